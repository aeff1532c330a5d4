//! How long a lesson is to read, and how much of the answer its hint gives away: the
//! numbers `quest dev words` prints and the course test holds to `TARGETS`.
//!
//! What is counted is what `quest run` shows by default (everything before the hint),
//! fenced code aside. A sentence ends at `.`, `!` or `?` before whitespace, and at the end
//! of every paragraph, heading, list item and table cell; a word is a whitespace-separated
//! token with a letter or a digit in it. The learner's lines are the solution's lines the
//! starting code lacks (comments, blank lines and lines of brackets aside); a hint level
//! "holds" one when the line, trimmed, appears in the level's text.

use anyhow::{Context, Result};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::hints::hint_levels;
use super::sections::markdown_options;
use super::Lesson;

/// The limits a lesson's default text and its hint are held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Targets {
    /// Words `quest run` shows by default.
    pub words: usize,
    /// The mean sentence, in words.
    pub mean_sentence: f64,
    /// The longest sentence, in words.
    pub longest_sentence: usize,
    /// The learner's lines any one hint level may hold.
    pub lines_per_hint_level: usize,
    /// The learner's lines an exercise of the inside track asks for, at least.
    pub inside_task_lines: usize,
}

pub const TARGETS: Targets = Targets {
    words: 900,
    mean_sentence: 22.0,
    longest_sentence: 45,
    lines_per_hint_level: 2,
    inside_task_lines: 8,
};

/// The sentences of a Markdown text, each as its words joined by single spaces.
pub fn sentences(markdown: &str) -> Vec<String> {
    let mut sentences = Vec::new();
    let mut current = String::new();
    let mut in_code_block = false;
    let flush = |current: &mut String, sentences: &mut Vec<String>| {
        split_sentences(current, sentences);
        current.clear();
    };
    // Tables as the web page reads them: a cell is a sentence of its own.
    let options = markdown_options() | Options::ENABLE_TABLES;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code_block = true,
            Event::End(TagEnd::CodeBlock) => in_code_block = false,
            Event::Text(text) | Event::Code(text) if !in_code_block => current.push_str(&text),
            Event::SoftBreak | Event::HardBreak => current.push(' '),
            // A block's end ends its sentence; a nested list's item starts a new one.
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::TableCell
                | TagEnd::BlockQuote(_),
            )
            | Event::Start(Tag::Item | Tag::List(_) | Tag::Paragraph) => {
                flush(&mut current, &mut sentences)
            }
            _ => {}
        }
    }
    flush(&mut current, &mut sentences);
    sentences
}

/// Cuts `text` after every `.`, `!` or `?` followed by whitespace; keeps the non-empty ones.
fn split_sentences(text: &str, into: &mut Vec<String>) {
    let mut words: Vec<&str> = Vec::new();
    for token in text.split_whitespace() {
        if token.chars().any(char::is_alphanumeric) {
            words.push(token);
        }
        if token.ends_with(['.', '!', '?']) && !words.is_empty() {
            into.push(words.join(" "));
            words.clear();
        }
    }
    if !words.is_empty() {
        into.push(words.join(" "));
    }
}

fn word_count(sentence: &str) -> usize {
    sentence.split(' ').count()
}

/// The solution's lines that the starting code lacks, trimmed: what the learner writes.
pub fn learner_lines(solution: &str, starting: &str) -> Vec<String> {
    let given: std::collections::HashSet<&str> = starting.lines().map(str::trim).collect();
    solution
        .lines()
        .map(str::trim)
        .filter(|line| line.chars().any(char::is_alphanumeric))
        .filter(|line| !line.starts_with("//"))
        .filter(|line| !given.contains(line))
        .map(str::to_owned)
        .collect()
}

/// The learner's lines a hint level's text holds.
pub fn lines_given<'a>(level: &str, lines: &'a [String]) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|line| level.contains(line.as_str()))
        .map(String::as_str)
        .collect()
}

/// (the solution's source, the starting code) of a lesson that has both.
pub fn lesson_code(lesson: &Lesson) -> Result<Option<(String, String)>> {
    let Some(path) = lesson.solution_path() else {
        return Ok(None);
    };
    let solution =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Some((solution, lesson.starting_code()?)))
}

/// One lesson's numbers, and what is past the targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Readability {
    pub words: usize,
    pub sentences: usize,
    pub mean_sentence: f64,
    pub longest: String,
    /// (level title, the learner's lines it holds) for every hint level.
    pub hint_levels: Vec<(String, Vec<String>)>,
    /// The learner's lines; `None` without a solution to compare.
    pub learner_lines: Option<usize>,
    /// Every target missed, said for an author.
    pub problems: Vec<String>,
}

impl Readability {
    pub fn longest_words(&self) -> usize {
        if self.longest.is_empty() {
            0
        } else {
            word_count(&self.longest)
        }
    }

    /// The most learner's lines any hint level holds.
    pub fn most_lines_in_a_level(&self) -> usize {
        self.hint_levels
            .iter()
            .map(|(_, lines)| lines.len())
            .max()
            .unwrap_or(0)
    }
}

/// Measures `lesson` against `targets`; `code` is (the solution, the starting code) where
/// the lesson has both.
pub fn measure(lesson: &Lesson, code: Option<(&str, &str)>, targets: &Targets) -> Readability {
    let sentences = sentences(lesson.default_markdown());
    let words: usize = sentences.iter().map(|s| word_count(s)).sum();
    let mean_sentence = if sentences.is_empty() {
        0.0
    } else {
        words as f64 / sentences.len() as f64
    };
    let longest = sentences
        .iter()
        .max_by_key(|s| word_count(s))
        .cloned()
        .unwrap_or_default();
    let lines = code.map(|(solution, starting)| learner_lines(solution, starting));
    let hint_levels = match lesson.section("hint") {
        Some(section) => hint_levels(lesson.section_markdown(section))
            .levels
            .iter()
            .map(|level| {
                let given = lines
                    .as_deref()
                    .map(|lines| lines_given(level.markdown, lines))
                    .unwrap_or_default();
                (
                    level.title.clone(),
                    given.into_iter().map(str::to_owned).collect(),
                )
            })
            .collect(),
        None => Vec::new(),
    };
    let mut found = Readability {
        words,
        sentences: sentences.len(),
        mean_sentence,
        longest,
        hint_levels,
        learner_lines: lines.as_ref().map(Vec::len),
        problems: Vec::new(),
    };
    found.problems = problems(lesson, &found, targets);
    found
}

fn problems(lesson: &Lesson, found: &Readability, targets: &Targets) -> Vec<String> {
    let mut problems = Vec::new();
    if found.words > targets.words {
        problems.push(format!(
            "{} words before the hint (at most {})",
            found.words, targets.words
        ));
    }
    if found.mean_sentence > targets.mean_sentence {
        problems.push(format!(
            "sentences of {:.1} words on average (at most {})",
            found.mean_sentence, targets.mean_sentence
        ));
    }
    if found.longest_words() > targets.longest_sentence {
        problems.push(format!(
            "a sentence of {} words (at most {}): \"{}\"",
            found.longest_words(),
            targets.longest_sentence,
            found.longest
        ));
    }
    for (title, lines) in &found.hint_levels {
        if lines.len() > targets.lines_per_hint_level {
            problems.push(format!(
                "hint level \"{title}\" holds {} of the lines the learner writes (at most {}): {}",
                lines.len(),
                targets.lines_per_hint_level,
                lines.join(" | ")
            ));
        }
    }
    let inside = lesson.spec.tags.iter().any(|tag| tag == "inside");
    if let (true, Some(lines)) = (inside, found.learner_lines) {
        if lines < targets.inside_task_lines {
            problems.push(format!(
                "the exercise asks for {lines} lines of the learner's own code (at least {})",
                targets.inside_task_lines
            ));
        }
    }
    if let Err(error) = lesson.check_after_hint() {
        problems.push(format!("{error:#}"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_at_stops_and_at_every_block() {
        let text = "# Title\n\nOne two three. Four five!\nSix, 1.5 seven? Eight\n\n\
                    - an item\n- another. Two\n\n```rust\nlet code = not_prose();\n```\n\n\
                    | a b | c |\n|---|---|\n| d | e f |\n";
        assert_eq!(
            sentences(text),
            [
                "Title",
                "One two three.",
                "Four five!",
                "Six, 1.5 seven?",
                "Eight",
                "an item",
                "another.",
                "Two",
                "a b",
                "c",
                "d",
                "e f"
            ]
        );
    }

    #[test]
    fn inline_code_is_words_and_lone_punctuation_is_not() {
        assert_eq!(
            sentences("Run `quest run x` — then wait."),
            ["Run quest run x then wait."]
        );
    }

    #[test]
    fn learner_lines_are_the_solutions_new_code() {
        let starting = "fn f() -> i32 {\n    todo!()\n}\n";
        let solution = "fn f() -> i32 {\n    // why\n    let a = 1;\n\n    a + 1\n}\n";
        assert_eq!(learner_lines(solution, starting), ["let a = 1;", "a + 1"]);
        let level = "Start with `let a = 1;`, then add one.";
        assert_eq!(
            lines_given(level, &learner_lines(solution, starting)),
            ["let a = 1;"]
        );
    }
}
