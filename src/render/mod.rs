//! Lessons as terminal text: Markdown wrapped to the terminal's width (CJK
//! counted as two columns), with ANSI styles when colour is on and plain
//! markers when it is off.

mod highlight;
mod style;
mod wrap;
mod writer;

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::ops::RangeInclusive;

use crate::course::{Course, Lang, Lesson};
use writer::Writer;

/// Wider lines are hard to read; a wide terminal still gets this many columns.
pub const MAX_WIDTH: usize = 100;
/// When the terminal does not say how wide it is.
pub const DEFAULT_WIDTH: usize = 80;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// Columns of display width (a Hangul syllable counts two).
    pub width: usize,
    /// ANSI styles on; off gives plain text with Markdown-like markers.
    pub color: bool,
    /// The reader's language; it picks typography (Hangul gets no italics).
    pub lang: Lang,
}

impl RenderOptions {
    /// Options for this process's stdout: `COLUMNS` (capped at `MAX_WIDTH`)
    /// and `color_enabled()`.
    pub fn for_stdout(lang: Lang) -> RenderOptions {
        let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
        RenderOptions {
            width: columns.unwrap_or(DEFAULT_WIDTH).min(MAX_WIDTH),
            color: color_enabled(),
            lang,
        }
    }
}

/// How much of a lesson the terminal shows. The hint is never part of it: `quest hint`
/// gives it, one level at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// Everything before the hint: the intro, the tasks, the teaching sections.
    Lesson,
    /// The lesson and its appendix (what its figures rest on).
    WithAppendix,
    /// The title and the tasks alone: what a run shows once the lesson has been read.
    Tasks,
}

/// The lesson as `show` asks: title, its minutes and tags, opening quote, then the body.
/// `course` gives the reader's wording of the minutes.
pub fn terminal(lesson: &Lesson, course: &Course, show: Show, options: &RenderOptions) -> String {
    let mut writer = Writer::new(options);
    writer.title(&lesson.meta.title);
    writer.byline(&byline(lesson, course, options.lang));
    match show {
        Show::Tasks => {
            if let Some(tasks) = lesson.section("exercise") {
                writer.markdown(lesson.section_markdown(tasks));
            }
        }
        Show::Lesson | Show::WithAppendix => {
            if let Some(quote) = &lesson.meta.quote {
                writer.quote(quote);
            }
            writer.markdown(lesson.default_markdown());
            if let (Show::WithAppendix, Some(appendix)) = (show, lesson.appendix()) {
                writer.markdown(lesson.section_markdown(appendix));
            }
        }
    }
    writer.finish()
}

/// `15 min · journey · mlx · …`: how long the lesson takes, then its tags.
fn byline(lesson: &Lesson, course: &Course, lang: Lang) -> String {
    let minutes = lesson.spec.minutes.to_string();
    std::iter::once(course.ui_with("minutes", lang, &[("n", &minutes)]))
        .chain(lesson.spec.tags.iter().cloned())
        .collect::<Vec<_>>()
        .join(" · ")
}

/// One section (heading included), e.g. the hint; `None` if there is no such section.
pub fn section(lesson: &Lesson, id: &str, options: &RenderOptions) -> Option<String> {
    let section = lesson.section(id)?;
    Some(markdown(lesson.section_markdown(section), options))
}

/// The hint's levels `shown` (1-based) under the hint's heading, each under its title as
/// the course's `hint_level` says it ("Hint 2 of 3: The ops"); a hint of one level as its
/// section reads. `None` without a hint section or with a level it does not have.
pub fn hint(
    lesson: &Lesson,
    course: &Course,
    shown: RangeInclusive<u32>,
    options: &RenderOptions,
) -> Option<String> {
    let hints = lesson.hints()?;
    let of = hints.levels.len();
    if of == 1 && shown == (1..=1) {
        return section(lesson, "hint", options);
    }
    let mut text = hints.head.to_owned();
    for n in shown {
        let level = hints.levels.get(usize::try_from(n).ok()?.checked_sub(1)?)?;
        let label = hint_label(course, options.lang, n, of, &level.title);
        text.push_str(&format!("\n\n### {label}\n\n{}", level.markdown));
    }
    Some(markdown(&text, options))
}

/// "Hint 2 of 3: The ops", in the reader's language.
pub fn hint_label(course: &Course, lang: Lang, n: u32, of: usize, title: &str) -> String {
    course.ui_with(
        "hint_level",
        lang,
        &[
            ("n", &n.to_string()),
            ("of", &of.to_string()),
            ("title", title),
        ],
    )
}

/// Any Markdown, e.g. a UI string that carries emphasis.
pub fn markdown(text: &str, options: &RenderOptions) -> String {
    let mut writer = Writer::new(options);
    writer.markdown(text);
    writer.finish()
}

/// Rust code as lines of (CSS class, text) pieces, for HTML: the terminal's highlighter,
/// each style named (`kw`, `str`, `com`, `num`, `mac`, `ty`; `None` for plain text).
pub fn rust_classes(code: &str) -> Vec<Vec<(Option<&'static str>, String)>> {
    highlight::rust_lines(code)
        .into_iter()
        .map(|line| {
            line.into_iter()
                .map(|span| (highlight::class_of(span.style), span.text))
                .collect()
        })
        .collect()
}

/// Colour only for a terminal, and never when `NO_COLOR` is set (no-color.org).
pub fn color_enabled() -> bool {
    color_allowed(
        std::env::var_os("NO_COLOR").as_deref(),
        std::io::stdout().is_terminal(),
    )
}

fn color_allowed(no_color: Option<&OsStr>, stdout_is_terminal: bool) -> bool {
    // An empty NO_COLOR does not count, as the convention says.
    let no_color_set = no_color.is_some_and(|value| !value.is_empty());
    stdout_is_terminal && !no_color_set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(width: usize, color: bool, lang: Lang) -> RenderOptions {
        RenderOptions { width, color, lang }
    }

    fn plain(text: &str) -> String {
        markdown(text, &options(40, false, Lang::En))
    }

    #[test]
    fn no_color_and_pipes_turn_colour_off() {
        assert!(color_allowed(None, true));
        assert!(color_allowed(Some(OsStr::new("")), true));
        assert!(!color_allowed(Some(OsStr::new("1")), true));
        assert!(!color_allowed(None, false));
    }

    #[test]
    fn paragraphs_wrap_and_are_separated_by_one_blank_line() {
        let text = plain("one two three four five six seven eight nine ten eleven\n\nnext");
        assert_eq!(
            text,
            "one two three four five six seven eight\nnine ten eleven\n\nnext\n"
        );
    }

    #[test]
    fn korean_wraps_by_display_width() {
        let text = markdown(
            "토큰 하나가 들어가고 같은 가중치를 한 번 지나 토큰 하나가 나옵니다.",
            &options(20, false, Lang::Ko),
        );
        for line in text.lines() {
            assert!(wrap::text_width(line) <= 20, "{line:?} is too wide");
        }
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    #[test]
    fn headings_are_underlined_to_their_width() {
        assert_eq!(
            plain("## The loop {#the-loop}\n\ntext"),
            "The loop\n────────\n\ntext\n"
        );
        let korean = markdown("## 루프 {#the-loop}", &options(40, false, Lang::Ko));
        assert_eq!(korean, "루프\n────\n");
    }

    #[test]
    fn list_items_hang_under_their_bullet() {
        let text = plain("- first item that is long enough to wrap around\n- second\n  - nested\n\n1. one\n2. two");
        assert_eq!(
            text,
            "• first item that is long enough to wrap\n  around\n• second\n  ◦ nested\n\n1. one\n2. two\n"
        );
    }

    #[test]
    fn loose_lists_keep_blank_lines_between_items() {
        let text = plain("1. Run it:\n\n   ```sh\n   quest run\n   ```\n\n2. Next\n");
        assert_eq!(text, "1. Run it:\n\n       quest run\n\n2. Next\n");
    }

    #[test]
    fn plain_text_keeps_markers_for_emphasis_and_code() {
        assert_eq!(plain("a *b* **c** `d e`"), "a *b* **c** `d e`\n");
    }

    #[test]
    fn colour_uses_ansi_instead_of_markers() {
        let text = markdown("a *b* **c** `d`", &options(40, true, Lang::En));
        assert_eq!(text, "a \x1b[3mb\x1b[0m \x1b[1mc\x1b[0m \x1b[33md\x1b[0m\n");
        let korean = markdown("*강조*", &options(40, true, Lang::Ko));
        assert_eq!(
            korean, "\x1b[4m강조\x1b[0m\n",
            "Hangul is underlined, not slanted"
        );
    }

    #[test]
    fn links_show_their_url() {
        assert_eq!(
            plain("see [MLX](https://ml-explore.github.io/mlx/)"),
            "see MLX\n(https://ml-explore.github.io/mlx/)\n"
        );
        assert_eq!(plain("<https://x.org>"), "https://x.org\n");
        assert_eq!(plain("[above](#the-loop)"), "above\n");
    }

    #[test]
    fn code_blocks_are_indented_and_highlighted_only_in_colour() {
        let source = "```rust\nlet x = 1; // one\n```";
        assert_eq!(plain(source), "    let x = 1; // one\n");
        let coloured = markdown(source, &options(40, true, Lang::En));
        assert!(coloured.contains("\x1b[35mlet\x1b[0m"), "{coloured:?}");
        assert!(coloured.contains("\x1b[90m// one\x1b[0m"), "{coloured:?}");
    }

    #[test]
    fn quotes_get_a_bar() {
        assert_eq!(
            plain("> quoted\n> text\n\nafter"),
            "│ quoted text\n\nafter\n"
        );
    }

    #[test]
    fn translator_comments_are_not_shown() {
        assert_eq!(plain("<!-- note -->\n\ntext"), "text\n");
    }
}
