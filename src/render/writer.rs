//! Walks Markdown events and writes terminal lines: blocks are separated by
//! one blank line, text is wrapped inside whatever indentation the enclosing
//! quotes and list items give it.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};

use super::highlight;
use super::style::{Color, Style};
use super::wrap::{line_width, text_width, wrap, Span};
use super::RenderOptions;
use crate::course::{markdown_options, Lang, Quote};

/// Text is never squeezed narrower than this, however deep the nesting.
const MIN_TEXT_WIDTH: usize = 20;
/// Code blocks and the opening quote sit this far in.
const INDENT: &str = "    ";

fn heading_style() -> Style {
    Style::fg(Color::Cyan).bold()
}
fn inline_code_style() -> Style {
    Style::fg(Color::Yellow)
}
fn link_style() -> Style {
    Style {
        underline: true,
        ..Style::fg(Color::Blue)
    }
}
fn url_style() -> Style {
    Style::fg(Color::Grey)
}
fn marker_style() -> Style {
    Style::fg(Color::Cyan)
}

enum Container {
    Quote,
    /// `loose` once an item holds paragraphs: its items get blank lines between them.
    List {
        next_number: Option<u64>,
        depth: usize,
        loose: bool,
    },
    /// `marker_shown` turns true once the bullet is printed; later lines of
    /// the item get spaces of the same width (a hanging indent).
    Item {
        marker: String,
        marker_shown: bool,
    },
}

pub(super) struct Writer<'o> {
    options: &'o RenderOptions,
    out: String,
    containers: Vec<Container>,
    /// The inline text of the block being read.
    inline: Vec<Span>,
    /// Nested inline styles (emphasis inside a link…); the top one applies.
    styles: Vec<Style>,
    /// Open links: their URL and where their text starts in `inline`.
    links: Vec<(String, usize)>,
    code: Option<(String, String)>,
    heading: Option<HeadingLevel>,
    blank_pending: bool,
}

impl<'o> Writer<'o> {
    pub(super) fn new(options: &'o RenderOptions) -> Writer<'o> {
        Writer {
            options,
            out: String::new(),
            containers: Vec::new(),
            inline: Vec::new(),
            styles: vec![Style::PLAIN],
            links: Vec::new(),
            code: None,
            heading: None,
            blank_pending: false,
        }
    }

    pub(super) fn finish(mut self) -> String {
        self.flush_inline();
        self.out
    }

    /// The lesson title, double-underlined.
    pub(super) fn title(&mut self, title: &str) {
        self.begin_block();
        let spans = vec![Span::new(title, heading_style())];
        let widest = self.write_wrapped(&spans);
        self.write_line(&[Span::new("═".repeat(widest), heading_style())]);
        self.blank_pending = true;
    }

    /// A line of facts right under the title (the minutes, the tags), dimmed.
    pub(super) fn byline(&mut self, text: &str) {
        self.blank_pending = false;
        self.write_wrapped(&[Span::new(text, url_style())]);
        self.blank_pending = true;
    }

    /// The opening quote: indented text, then `— who` flush right.
    pub(super) fn quote(&mut self, quote: &Quote) {
        self.begin_block();
        let width = self.options.width.max(MIN_TEXT_WIDTH);
        let text_width_max = width.saturating_sub(2 * INDENT.len()).max(MIN_TEXT_WIDTH);
        let style = self.emphasis_style();
        for line in wrap(&[Span::new(quote.text.trim(), style)], text_width_max) {
            let mut spans = vec![Span::new(INDENT, Style::PLAIN)];
            spans.extend(line);
            self.write_line(&spans);
        }
        let attribution = format!("— {}", quote.who.trim());
        let pad = width
            .saturating_sub(INDENT.len() + text_width(&attribution))
            .max(INDENT.len());
        self.write_line(&[
            Span::new(" ".repeat(pad), Style::PLAIN),
            Span::new(attribution, Style::PLAIN),
        ]);
        self.blank_pending = true;
    }

    pub(super) fn markdown(&mut self, markdown: &str) {
        for event in Parser::new_ext(markdown, markdown_options()) {
            self.event(event);
        }
        self.flush_inline();
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match self.code.as_mut() {
                Some((_, code)) => code.push_str(&text),
                None => self.push_text(&text),
            },
            Event::Code(code) => self.push_inline_code(&code),
            Event::SoftBreak => self.push_text(" "),
            Event::HardBreak => self.inline.push(Span::new("\n", Style::PLAIN)),
            Event::Rule => {
                self.begin_block();
                let width = self.text_width();
                self.write_line(&[Span::new("─".repeat(width), url_style())]);
                self.blank_pending = true;
            }
            // Comments are notes to translators, not to learners.
            Event::Html(html) | Event::InlineHtml(html)
                if html.trim_start().starts_with("<!--") => {}
            Event::Html(html) | Event::InlineHtml(html) => self.push_text(&html),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.mark_list_loose();
                self.begin_block();
            }
            Tag::Heading { level, .. } => {
                self.begin_block();
                self.heading = Some(level);
            }
            Tag::BlockQuote(_) => {
                self.begin_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.begin_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(first_number) => {
                // A list inside an item follows the item's text directly.
                if matches!(self.containers.last(), Some(Container::Item { .. })) {
                    self.flush_inline();
                } else {
                    self.begin_block();
                }
                let depth = self
                    .containers
                    .iter()
                    .filter(|c| matches!(c, Container::List { .. }))
                    .count();
                self.containers.push(Container::List {
                    next_number: first_number,
                    depth,
                    loose: false,
                });
            }
            Tag::Item => {
                // Items of a tight list follow each other without blank lines.
                let loose = matches!(
                    self.containers.last(),
                    Some(Container::List { loose: true, .. })
                );
                self.blank_pending &= loose;
                self.begin_block();
                let marker = self.next_marker();
                self.containers.push(Container::Item {
                    marker,
                    marker_shown: false,
                });
            }
            Tag::Emphasis => {
                self.push_marker("*");
                self.push_style(self.emphasis_style());
            }
            Tag::Strong => {
                self.push_marker("**");
                self.push_style(Style::PLAIN.bold());
            }
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push((dest_url.to_string(), self.inline.len()));
                self.push_style(link_style());
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.blank_pending = true;
            }
            TagEnd::Heading(level) => self.end_heading(level),
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.containers.pop();
                self.blank_pending = true;
            }
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::List(_) => {
                self.flush_inline();
                self.containers.pop();
                self.blank_pending = true;
            }
            TagEnd::Item => {
                self.flush_inline();
                self.containers.pop();
            }
            TagEnd::Emphasis => {
                self.styles.pop();
                self.push_marker("*");
            }
            TagEnd::Strong => {
                self.styles.pop();
                self.push_marker("**");
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                self.end_link();
            }
            _ => {}
        }
    }

    fn end_heading(&mut self, level: HeadingLevel) {
        self.heading = None;
        let style = match level {
            HeadingLevel::H1 | HeadingLevel::H2 => heading_style(),
            _ => Style::PLAIN.bold(),
        };
        let mut spans: Vec<Span> = std::mem::take(&mut self.inline)
            .into_iter()
            .map(|span| Span {
                style: style.merge(span.style),
                ..span
            })
            .collect();
        if level >= HeadingLevel::H3 {
            // Without colour a minor heading still needs a mark.
            spans.insert(0, Span::new("▸ ", style));
        }
        let widest = self.write_wrapped(&spans);
        let rule = match level {
            HeadingLevel::H1 => Some("═"),
            HeadingLevel::H2 => Some("─"),
            _ => None,
        };
        if let Some(rule) = rule {
            self.write_line(&[Span::new(rule.repeat(widest), style)]);
        }
        self.blank_pending = true;
    }

    fn end_code_block(&mut self) {
        let Some((lang, code)) = self.code.take() else {
            return;
        };
        let lines: Vec<Vec<Span>> = if self.options.color && matches!(lang.as_str(), "rust" | "rs")
        {
            highlight::rust_lines(&code)
        } else {
            code.lines()
                .map(|line| vec![Span::new(line, Style::PLAIN)])
                .collect()
        };
        for mut line in lines {
            line.insert(0, Span::new(INDENT, Style::PLAIN));
            self.write_line(&line);
        }
        self.blank_pending = true;
    }

    /// Links read as `text (url)`; a bare URL or an in-page anchor shows once.
    fn end_link(&mut self) {
        let Some((url, text_start)) = self.links.pop() else {
            return;
        };
        let text: String = self.inline[text_start..]
            .iter()
            .map(|span| span.text.as_str())
            .collect();
        if url.is_empty() || url.starts_with('#') || text.trim() == url {
            return;
        }
        self.inline.push(Span::new(" ", Style::PLAIN));
        self.inline.push(Span {
            keep_together: true,
            ..Span::new(format!("({url})"), url_style())
        });
    }

    fn emphasis_style(&self) -> Style {
        // Hangul has no true italic; terminals slant it badly, so underline it.
        match self.options.lang {
            Lang::Ko => Style {
                underline: true,
                ..Style::PLAIN
            },
            Lang::En => Style {
                italic: true,
                ..Style::PLAIN
            },
        }
    }

    fn push_style(&mut self, style: Style) {
        let current = self.current_style();
        self.styles.push(current.merge(style));
    }

    fn current_style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_text(&mut self, text: &str) {
        let style = self.current_style();
        self.inline.push(Span::new(text, style));
    }

    /// Without colour, emphasis shows as Markdown's own `*` and `**`.
    fn push_marker(&mut self, marker: &str) {
        if !self.options.color {
            self.push_text(marker);
        }
    }

    fn push_inline_code(&mut self, code: &str) {
        let (text, style) = if self.options.color {
            (
                code.to_string(),
                self.current_style().merge(inline_code_style()),
            )
        } else {
            (format!("`{code}`"), self.current_style())
        };
        self.inline.push(Span {
            keep_together: true,
            ..Span::new(text, style)
        });
    }

    fn next_marker(&mut self) -> String {
        let Some(Container::List {
            next_number, depth, ..
        }) = self.containers.last_mut()
        else {
            return "• ".to_string();
        };
        match next_number {
            Some(number) => {
                let marker = format!("{number}. ");
                *number += 1;
                marker
            }
            None => ["• ", "◦ ", "▪ "][(*depth).min(2)].to_string(),
        }
    }

    /// A paragraph right inside an item makes its list loose (CommonMark
    /// only emits paragraphs in items of loose lists).
    fn mark_list_loose(&mut self) {
        let depth = self.containers.len();
        if depth >= 2 && matches!(self.containers[depth - 1], Container::Item { .. }) {
            if let Container::List { loose, .. } = &mut self.containers[depth - 2] {
                *loose = true;
            }
        }
    }

    /// Starts a block: one blank line after the previous block, except
    /// right at an item's bullet.
    fn begin_block(&mut self) {
        self.flush_inline();
        let at_bullet = matches!(
            self.containers.last(),
            Some(Container::Item {
                marker_shown: false,
                ..
            })
        );
        if self.blank_pending && !self.out.is_empty() && !at_bullet {
            let prefix = self.prefix(false);
            let text: String = prefix.iter().map(|span| span.text.as_str()).collect();
            self.out.push_str(text.trim_end());
            self.out.push('\n');
        }
        self.blank_pending = false;
    }

    fn flush_inline(&mut self) {
        let spans = std::mem::take(&mut self.inline);
        if spans.iter().all(|span| span.text.trim().is_empty()) {
            return;
        }
        self.write_wrapped(&spans);
    }

    /// Writes `spans` wrapped to the room left by the indentation; returns
    /// the width of the widest line.
    fn write_wrapped(&mut self, spans: &[Span]) -> usize {
        let mut widest = 0;
        for line in wrap(spans, self.text_width()) {
            widest = widest.max(line_width(&line));
            self.write_line(&line);
        }
        widest
    }

    /// Columns left for text after the containers' indentation.
    fn text_width(&mut self) -> usize {
        let indent = line_width(&self.prefix(false));
        self.options
            .width
            .saturating_sub(indent)
            .max(MIN_TEXT_WIDTH)
    }

    fn write_line(&mut self, line: &[Span]) {
        let mut spans = self.prefix(true);
        spans.extend_from_slice(line);
        let mut text = String::new();
        for span in &spans {
            text.push_str(&span.style.paint(&span.text, self.options.color));
        }
        self.out.push_str(text.trim_end_matches(' '));
        self.out.push('\n');
    }

    /// The indentation of the next line: quote bars and list indents, with
    /// the bullet on an item's first line (`show_marker` uses it up).
    fn prefix(&mut self, show_marker: bool) -> Vec<Span> {
        let mut spans = Vec::new();
        for container in &mut self.containers {
            match container {
                Container::Quote => spans.push(Span::new("│ ", url_style())),
                Container::List { .. } => {}
                Container::Item {
                    marker,
                    marker_shown,
                } => {
                    if *marker_shown || !show_marker {
                        spans.push(Span::new(" ".repeat(text_width(marker)), Style::PLAIN));
                    } else {
                        spans.push(Span::new(marker.clone(), marker_style()));
                        *marker_shown = true;
                    }
                }
            }
        }
        spans
    }
}
