//! Splits a lesson's Markdown into sections at `##` headings and finds the
//! fenced code blocks in each.

use std::collections::BTreeMap;
use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The id of the text before the first `##` heading.
pub const INTRO: &str = "intro";

/// Sections every lesson has, in this order; the CLI finds them by these ids.
/// Anything else a lesson says is its own choice of sections.
pub const REQUIRED_SECTIONS: [&str; 3] = [INTRO, "exercise", "hint"];

/// The optional last section, after the hint: what the lesson's figures rest on (how they
/// were measured, the GPU's readings, a kernel's history). `quest run --lesson` shows it and
/// the web page folds it; a plain `quest run` does not.
pub const APPENDIX: &str = "appendix";

/// The info-string attribute that marks the exercise's code block.
pub const EXERCISE_ATTR: &str = "exercise";

/// The Markdown dialect of lessons: CommonMark plus `{#id}` heading anchors,
/// which give translated headings the same ids as the English ones.
pub fn markdown_options() -> Options {
    Options::ENABLE_HEADING_ATTRIBUTES
}

/// One `##` section of a lesson (or the intro before the first one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The `{#id}` anchor, or the slug of an ASCII title when there is none.
    pub id: String,
    /// The heading text without its anchor; empty for the intro.
    pub title: String,
    /// The file line of the heading (or of the body's start for the intro).
    pub line: usize,
    /// Byte range in the lesson body, heading included.
    pub range: Range<usize>,
    pub code_blocks: Vec<CodeBlock>,
}

/// A fenced code block, e.g. ```` ```rust exercise=decode_loop ````.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The first word of the info string (`rust`); empty when there is none.
    pub lang: String,
    /// The `key=value` words after it; a bare `key` maps to "".
    pub attrs: BTreeMap<String, String>,
    pub code: String,
    /// The file line of the opening fence.
    pub line: usize,
    /// Byte range of `code` in the lesson body (for rewriting it in place).
    pub code_range: Range<usize>,
}

impl CodeBlock {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).map(String::as_str)
    }
}

/// Splits an info string like `rust exercise=decode_loop` into language and attributes.
pub fn parse_info(info: &str) -> (String, BTreeMap<String, String>) {
    let mut words = info.split_whitespace().peekable();
    let lang = match words.peek() {
        Some(word) if !word.contains('=') => words.next().unwrap_or_default().to_string(),
        _ => String::new(),
    };
    let attrs = words
        .map(|word| match word.split_once('=') {
            Some((key, value)) => (key.to_string(), value.to_string()),
            None => (word.to_string(), String::new()),
        })
        .collect();
    (lang, attrs)
}

/// Parses a lesson body whose first line is file line `first_line`.
///
/// Errors are `line: message`; the caller puts the file name in front.
pub(crate) fn parse(body: &str, first_line: usize) -> Result<Vec<Section>, String> {
    let line_at = |offset: usize| first_line + body[..offset].matches('\n').count();
    let mut sections = vec![Section {
        id: INTRO.to_string(),
        title: String::new(),
        line: first_line,
        range: 0..body.len(),
        code_blocks: Vec::new(),
    }];
    let mut heading_title: Option<String> = None;
    let mut code: Option<CodeBlock> = None;

    for (event, range) in Parser::new_ext(body, markdown_options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H2,
                id,
                ..
            }) => {
                if let Some(current) = sections.last_mut() {
                    current.range.end = range.start;
                }
                sections.push(Section {
                    id: id.map(|id| id.to_string()).unwrap_or_default(),
                    title: String::new(),
                    line: line_at(range.start),
                    range: range.start..body.len(),
                    code_blocks: Vec::new(),
                });
                heading_title = Some(String::new());
            }
            Event::End(TagEnd::Heading(HeadingLevel::H2)) => {
                let title = heading_title.take().unwrap_or_default();
                let section = sections.last_mut().expect("a heading section was pushed");
                section.title = title.trim().to_string();
                if section.id.is_empty() {
                    section.id = slug(&section.title);
                }
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let (lang, attrs) = parse_info(&info);
                let fence_end = body[range.clone()]
                    .find('\n')
                    .map_or(range.end, |i| range.start + i + 1);
                code = Some(CodeBlock {
                    lang,
                    attrs,
                    code: String::new(),
                    line: line_at(range.start),
                    code_range: fence_end..fence_end,
                });
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some(block) = code.as_mut() {
                    if block.code.is_empty() {
                        block.code_range.start = range.start;
                    }
                    block.code.push_str(&text);
                    block.code_range.end = range.end;
                } else if let Some(title) = heading_title.as_mut() {
                    title.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some(block) = code.take() {
                    let section = sections.last_mut().expect("the intro is always there");
                    section.code_blocks.push(block);
                }
            }
            _ => {}
        }
    }

    // An intro that is only blank lines is no section at all.
    if body[sections[0].range.clone()].trim().is_empty() {
        sections.remove(0);
    }
    check_ids(&sections)?;
    Ok(sections)
}

fn check_ids(sections: &[Section]) -> Result<(), String> {
    for (index, section) in sections.iter().enumerate() {
        if !super::is_valid_lesson_id(&section.id) {
            return Err(format!(
                "{}: heading `{}` needs an id: write it as `## {} {{#some-id}}` (a-z, 0-9, `-`)",
                section.line, section.title, section.title
            ));
        }
        if let Some(first) = sections[..index].iter().find(|s| s.id == section.id) {
            return Err(format!(
                "{}: section id `{}` is already used on line {}",
                section.line, section.id, first.line
            ));
        }
    }
    Ok(())
}

/// `The loop` → `the-loop`. Non-ASCII titles give non-ASCII slugs, which the
/// id check refuses: translated headings need an explicit `{#id}`.
fn slug(title: &str) -> String {
    let lowered = title.to_lowercase();
    let words: Vec<&str> = lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    words.join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_strings_split_into_language_and_attributes() {
        let (lang, attrs) = parse_info("rust exercise=decode_loop no_run");
        assert_eq!(lang, "rust");
        assert_eq!(attrs["exercise"], "decode_loop");
        assert_eq!(attrs["no_run"], "");
        let (lang, attrs) = parse_info("exercise=x");
        assert_eq!(lang, "");
        assert_eq!(attrs["exercise"], "x");
        assert_eq!(parse_info("").0, "");
    }

    #[test]
    fn titles_become_slugs() {
        assert_eq!(slug("The loop"), "the-loop");
        assert_eq!(slug("Inside a forward pass"), "inside-a-forward-pass");
        assert_eq!(slug("On this machine!"), "on-this-machine");
    }

    #[test]
    fn sections_split_at_level_two_headings_only() {
        let body = "Intro text.\n\n## First {#one}\n\nA\n\n### Sub\n\nB\n\n## Second\n\nC\n";
        let sections = parse(body, 10).unwrap();
        let ids: Vec<&str> = sections.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["intro", "one", "second"]);
        assert_eq!(sections[1].title, "First");
        assert_eq!(sections[1].line, 12);
        assert!(body[sections[1].range.clone()].contains("### Sub"));
        assert_eq!(&body[sections[2].range.clone()], "## Second\n\nC\n");
    }

    #[test]
    fn code_blocks_keep_their_bytes_and_position() {
        let body = "## Code {#the-code}\n\n```rust exercise=demo\nfn main() {}\n\n// end\n```\n";
        let sections = parse(body, 1).unwrap();
        let block = &sections[0].code_blocks[0];
        assert_eq!(block.lang, "rust");
        assert_eq!(block.attr("exercise"), Some("demo"));
        assert_eq!(block.code, "fn main() {}\n\n// end\n");
        assert_eq!(&body[block.code_range.clone()], block.code);
        assert_eq!(block.line, 3);
    }

    #[test]
    fn an_empty_code_block_has_an_empty_range_inside_its_fences() {
        let body = "## Code\n\n```rust\n```\n";
        let block = &parse(body, 1).unwrap()[0].code_blocks[0];
        assert_eq!(block.code, "");
        // Right after the opening fence line `` ```rust\n ``.
        assert_eq!(block.code_range, 17..17);
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let error = parse("## A {#x}\n\n## B {#x}\n", 1).unwrap_err();
        assert!(error.starts_with("3: section id `x`"), "{error}");
    }

    #[test]
    fn headings_without_ascii_titles_need_an_anchor() {
        let error = parse("## 연습\n", 7).unwrap_err();
        assert!(
            error.starts_with("7: heading `연습` needs an id"),
            "{error}"
        );
    }
}
