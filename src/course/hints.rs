//! A lesson's hint in levels: each `###` heading inside its `## Hint` section starts one,
//! the first the idea and the last close to the answer; `quest hint` shows one more each
//! time it is asked. A hint without a `###` heading is a single level.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

use super::sections::markdown_options;
use super::Lesson;

impl Lesson {
    /// The lesson's hint in levels; `None` for a lesson without a hint section.
    pub fn hints(&self) -> Option<HintLevels<'_>> {
        let section = self.section("hint")?;
        Some(hint_levels(self.section_markdown(section)))
    }
}

/// The hint section cut into its levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintLevels<'a> {
    /// The section's own `##` heading, and any text before its first level, which goes
    /// above every level shown.
    pub head: &'a str,
    /// At least one.
    pub levels: Vec<HintLevel<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintLevel<'a> {
    /// The `###` heading's text (its `{#anchor}` left out); empty for a hint of one level.
    pub title: String,
    /// The level's Markdown, below its heading.
    pub markdown: &'a str,
}

/// Cuts a hint section's Markdown (as `Lesson::section_markdown` gives it, its `##`
/// heading first) at its `###` headings. Headings inside code blocks are code, not levels.
pub fn hint_levels(section: &str) -> HintLevels<'_> {
    let mut head_end = 0;
    // (start of the heading, end of the heading, its text) for every `###`.
    let mut starts: Vec<(usize, usize, String)> = Vec::new();
    let mut in_level_heading = false;
    for (event, range) in Parser::new_ext(section, markdown_options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H3,
                ..
            }) => {
                starts.push((range.start, range.end, String::new()));
                in_level_heading = true;
            }
            Event::End(TagEnd::Heading(HeadingLevel::H3)) => in_level_heading = false,
            Event::End(TagEnd::Heading(HeadingLevel::H2)) if starts.is_empty() => {
                head_end = range.end;
            }
            Event::Text(text) | Event::Code(text) if in_level_heading => {
                if let Some((_, _, title)) = starts.last_mut() {
                    title.push_str(&text);
                }
            }
            _ => {}
        }
    }
    if starts.is_empty() {
        return HintLevels {
            head: &section[..head_end],
            levels: vec![HintLevel {
                title: String::new(),
                markdown: &section[head_end..],
            }],
        };
    }
    let ends = starts
        .iter()
        .skip(1)
        .map(|(start, _, _)| *start)
        .chain([section.len()]);
    let levels = starts
        .iter()
        .zip(ends)
        .map(|((_, heading_end, title), end)| HintLevel {
            title: title.trim().to_owned(),
            markdown: &section[*heading_end..end],
        })
        .collect();
    HintLevels {
        head: &section[..starts[0].0],
        levels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_without_levels_is_one_level() {
        let hints = hint_levels("## Hint {#hint}\n\nThe offset.\n\nMore.\n");
        assert_eq!(hints.head, "## Hint {#hint}\n");
        assert_eq!(hints.levels.len(), 1);
        assert_eq!(hints.levels[0].title, "");
        assert_eq!(hints.levels[0].markdown.trim(), "The offset.\n\nMore.");
    }

    #[test]
    fn each_level_heading_starts_a_level() {
        let section = "## 힌트 {#hint}\n\nAbove all.\n\n### The idea {#idea}\n\nOne.\n\n\
                       ### The `ops`\n\n```rust\n### not a heading\n```\n\n### Close\n\nThree.\n";
        let hints = hint_levels(section);
        assert_eq!(hints.head, "## 힌트 {#hint}\n\nAbove all.\n\n");
        let titles: Vec<&str> = hints.levels.iter().map(|l| l.title.as_str()).collect();
        assert_eq!(titles, ["The idea", "The ops", "Close"]);
        assert_eq!(hints.levels[0].markdown.trim(), "One.");
        assert_eq!(
            hints.levels[1].markdown.trim(),
            "```rust\n### not a heading\n```"
        );
        assert_eq!(hints.levels[2].markdown.trim(), "Three.");
    }
}
