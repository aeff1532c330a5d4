//! One lesson file: YAML front matter between `---` lines, then Markdown.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::sections::{self, Section};
use super::spec::LessonSpec;
use super::{is_valid_lesson_id, yaml_error, Course, Lang};

/// The key in `messages:` of what `quest submit` says when the tokens differ from the
/// solution's (by default: greedy decoding repeats exactly, so the loop's logic changed).
pub const TOKENS_MESSAGE: &str = "tokens";

/// The key in `messages:` of what `quest submit` says when a model's logits leave quest's
/// (`logits:`), after the step, the position and the size: what such a gap usually is.
pub const LOGITS_MESSAGE: &str = "logits";

/// The key in `messages:` of what `quest submit` says when a sampler's draws leave the
/// distribution it was asked for (`draws:`): what such a gap usually is.
pub const DRAWS_MESSAGE: &str = "draws";

/// The typed front matter of a lesson file: what is said in this language.
/// Unknown keys are refused so a typo (`titel:`) fails loudly instead of being ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontMatter {
    pub id: String,
    pub lang: Lang,
    pub title: String,
    #[serde(default)]
    pub quote: Option<Quote>,
    /// In a translation: sha256 of the English file it was translated from.
    #[serde(default)]
    pub source_hash: Option<String>,
    /// The message of each code rule in `lesson.yaml`, by rule id; `{call}` is the call found.
    /// [`TOKENS_MESSAGE`] may say why the lesson's tokens must agree, when they differ.
    #[serde(default)]
    pub messages: BTreeMap<String, String>,
    /// The text of each quiz question in `lesson.yaml`, by question id.
    #[serde(default)]
    pub quiz: BTreeMap<String, QuestionText>,
}

/// A quiz question in one language.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionText {
    pub question: String,
    /// What each choice means, by choice.
    pub choices: BTreeMap<String, String>,
    /// Said when the answer is wrong: why, without giving it away.
    pub wrong: String,
}

/// The quote a lesson opens with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quote {
    pub text: String,
    pub who: String,
}

/// A parsed lesson in one language.
#[derive(Debug, Clone)]
pub struct Lesson {
    pub meta: FrontMatter,
    /// `lesson.yaml`: the same in every language.
    pub spec: LessonSpec,
    /// The file it was read from; errors point into it.
    pub path: PathBuf,
    /// The whole file, front matter included.
    pub source: String,
    /// Where the Markdown body starts in `source` (byte offset and 1-based line).
    pub body_offset: usize,
    pub body_line: usize,
    /// The intro (text before the first `##`, if any), then one per `##` heading.
    pub sections: Vec<Section>,
}

impl Lesson {
    /// Loads `<lessons_dir>/<id>/<lang>.md`, refusing ids not listed in `quest.yaml`.
    pub fn load(lessons_dir: &Path, id: &str, lang: Lang) -> Result<Lesson> {
        Course::load(lessons_dir)?.lesson(id, lang)
    }

    /// Reads and parses a lesson file that should hold lesson `id` in `lang`.
    pub fn load_file(path: &Path, id: &str, lang: Lang, spec: LessonSpec) -> Result<Lesson> {
        let source = fs::read_to_string(path)
            .with_context(|| format!("reading the lesson {}", path.display()))?;
        let lesson = Lesson::parse(path, source, spec)?;
        if lesson.meta.id != id {
            bail!(
                "{}:{}: the front matter says id `{}`, but this file is lesson `{id}`",
                path.display(),
                lesson.front_matter_line("id"),
                lesson.meta.id
            );
        }
        if lesson.meta.lang != lang {
            bail!(
                "{}:{}: the front matter says lang `{}`, but this file is the `{lang}` text",
                path.display(),
                lesson.front_matter_line("lang"),
                lesson.meta.lang
            );
        }
        Ok(lesson)
    }

    /// Parses lesson text; `path` is only used in error messages and to find
    /// the files next to it.
    pub fn parse(path: &Path, source: String, spec: LessonSpec) -> Result<Lesson> {
        let Some((yaml, body_offset)) = split_front_matter(&source) else {
            bail!(
                "{}:1: a lesson starts with a `---` line, its YAML front matter, and another `---` line",
                path.display()
            );
        };
        // The YAML starts on line 2, right after the opening `---`.
        let meta: FrontMatter =
            serde_yaml::from_str(yaml).map_err(|error| yaml_error::located(path, 2, error))?;
        let body_line = 1 + source[..body_offset].matches('\n').count();
        let sections = sections::parse(&source[body_offset..], body_line)
            .map_err(|error| anyhow::anyhow!("{}:{error}", path.display()))?;
        let lesson = Lesson {
            meta,
            spec,
            path: path.to_path_buf(),
            source,
            body_offset,
            body_line,
            sections,
        };
        lesson.check_front_matter()?;
        lesson.check_required_sections()?;
        lesson.check_texts_for_spec()?;
        Ok(lesson)
    }

    /// The Markdown after the front matter.
    pub fn body(&self) -> &str {
        &self.source[self.body_offset..]
    }

    pub fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|section| section.id == id)
    }

    /// What `quest run` shows of the lesson by default: every section before the hint
    /// (the intro, the tasks, the teaching sections), never the hint or the appendix.
    pub fn default_markdown(&self) -> &str {
        let end = self
            .section("hint")
            .map_or(self.body().len(), |hint| hint.range.start);
        &self.body()[..end]
    }

    /// The appendix (`{#appendix}`, after the hint), if the lesson has one.
    pub fn appendix(&self) -> Option<&Section> {
        self.section(sections::APPENDIX)
    }

    /// The Markdown of one section, its heading included.
    pub fn section_markdown(&self, section: &Section) -> &str {
        &self.body()[section.range.clone()]
    }

    /// `lessons/` itself: lesson files live at `lessons/<id>/<lang>.md`.
    pub fn lessons_dir(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The folder that holds `lessons/`; exercise paths are relative to it.
    pub fn project_root(&self) -> PathBuf {
        self.lessons_dir()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The file line of the front matter key `key` (line 1 if not found).
    pub fn front_matter_line(&self, key: &str) -> usize {
        let front_matter = &self.source[..self.body_offset];
        front_matter
            .lines()
            .position(|line| line.starts_with(&format!("{key}:")))
            .map_or(1, |index| index + 1)
    }

    fn check_front_matter(&self) -> Result<()> {
        let meta = &self.meta;
        if !is_valid_lesson_id(&meta.id) {
            bail!(
                "{}:{}: lesson id `{}` may only use a-z, 0-9 and `-`",
                self.path.display(),
                self.front_matter_line("id"),
                meta.id
            );
        }
        if meta.lang != Lang::SOURCE && meta.source_hash.is_none() {
            bail!(
                "{}:1: a translation needs `source_hash:`, the sha256 of the {} file it translates \
                 (print it with `sha256sum lessons/{}/{}.md`)",
                self.path.display(),
                Lang::SOURCE,
                meta.id,
                Lang::SOURCE
            );
        }
        Ok(())
    }

    /// Every rule has its message and every question its text, in this language; an
    /// exercise is shown in a code block.
    fn check_texts_for_spec(&self) -> Result<()> {
        let at = format!("{}:{}", self.path.display(), 1);
        let ids = self.spec.rules.iter().map(|rule| &rule.id);
        let moves = self.spec.measure.iter().flat_map(|m| &m.moves);
        let ids = ids
            .chain(self.spec.feeds.iter().map(|feed| &feed.id))
            .chain(moves.map(|m| &m.id));
        for id in ids {
            if !self.meta.messages.contains_key(id) {
                bail!("{at}: `messages:` has no text for rule `{id}` of lesson.yaml");
            }
        }
        for question in &self.spec.quiz {
            let Some(text) = self.meta.quiz.get(&question.id) else {
                bail!(
                    "{at}: `quiz:` has no text for question `{}` of lesson.yaml",
                    question.id
                );
            };
            for choice in &question.choices {
                if !text.choices.contains_key(choice) {
                    bail!(
                        "{at}: question `{}` has no text for choice `{choice}`",
                        question.id
                    );
                }
            }
        }
        if self.spec.exercise.is_some() && self.exercise_blocks().is_empty() {
            bail!(
                "{at}: the lesson has an exercise, so it shows it: a ```rust {}=NAME code block",
                sections::EXERCISE_ATTR
            );
        }
        Ok(())
    }

    fn check_required_sections(&self) -> Result<()> {
        let mut previous: Option<&Section> = None;
        for required in sections::REQUIRED_SECTIONS {
            match self.section(required) {
                Some(section) => previous = Some(section),
                None => {
                    let (line, after) = match previous {
                        Some(section) => (section.line, format!(" after `{}`", section.id)),
                        None => (self.body_line, String::new()),
                    };
                    let found: Vec<&str> = self.sections.iter().map(|s| s.id.as_str()).collect();
                    if required == sections::INTRO {
                        bail!(
                            "{}:{line}: a lesson opens with a few lines of text before its first `##` heading",
                            self.path.display()
                        );
                    }
                    bail!(
                        "{}:{line}: missing section `{required}`{after}: add a `## Title {{#{required}}}` heading \
                         (sections found: {})",
                        self.path.display(),
                        found.join(", ")
                    );
                }
            }
        }
        Ok(())
    }

    /// The hint is the last section a learner reads in order; only the appendix may follow
    /// it, and the appendix follows nothing else. Checked by the author's readability check
    /// (`quest dev words`), not at load: a section out of place is hidden, never fatal.
    pub fn check_after_hint(&self) -> Result<()> {
        let hint_at = self.sections.iter().position(|s| s.id == "hint");
        for (at, section) in self.sections.iter().enumerate() {
            let after_hint = hint_at.is_some_and(|hint| at > hint);
            let is_appendix = section.id == sections::APPENDIX;
            if after_hint && (!is_appendix || at != self.sections.len() - 1) {
                bail!(
                    "{}:{}: `{}` follows the hint: only one section may, the last, \
                     `## … {{#{}}}` (what the figures rest on); move this one above the hint \
                     or into the appendix as a `###`",
                    self.path.display(),
                    section.line,
                    section.id,
                    sections::APPENDIX
                );
            }
            if is_appendix && !after_hint {
                bail!(
                    "{}:{}: the appendix comes last, after the hint",
                    self.path.display(),
                    section.line
                );
            }
        }
        Ok(())
    }
}

/// Splits `---\n<yaml>---\n<body>` into the YAML and the body's byte offset.
fn split_front_matter(source: &str) -> Option<(&str, usize)> {
    let after_open = source
        .strip_prefix("---\n")
        .or_else(|| source.strip_prefix("---\r\n"))?;
    let yaml_start = source.len() - after_open.len();
    let mut offset = yaml_start;
    for line in after_open.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&source[yaml_start..offset], offset + line.len()));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::tests::fixture_lessons;

    fn load_fixture(id: &str, lang: Lang) -> Result<Lesson> {
        Lesson::load(&fixture_lessons(), id, lang)
    }

    fn error_of(result: Result<Lesson>) -> String {
        format!("{:#}", result.unwrap_err())
    }

    /// Only the appendix may follow the hint; the default text stops at the hint.
    #[test]
    fn only_the_appendix_follows_the_hint() {
        let good = load_fixture("good", Lang::En).unwrap();
        let error = format!("{:#}", good.check_after_hint().unwrap_err());
        assert!(
            error.contains("`on-this-machine` follows the hint"),
            "{error}"
        );
        let source = good.source.replace("{#on-this-machine}", "{#appendix}");
        let lesson = Lesson::parse(&good.path, source, good.spec.clone()).unwrap();
        lesson.check_after_hint().unwrap();
        assert!(lesson.appendix().is_some());
        let shown = lesson.default_markdown();
        assert!(
            shown.contains("{#exercise}") && !shown.contains("{#hint}"),
            "{shown}"
        );
        let source = good.source.replace("{#the-loop}", "{#appendix}");
        let lesson = Lesson::parse(&good.path, source, good.spec.clone()).unwrap();
        let error = format!("{:#}", lesson.check_after_hint().unwrap_err());
        assert!(
            error.contains("follows the hint") || error.contains("comes last"),
            "{error}"
        );
    }

    #[test]
    fn front_matter_is_split_from_the_body() {
        let (yaml, body) = split_front_matter("---\nid: x\n---\n# Body\n").unwrap();
        assert_eq!(yaml, "id: x\n");
        assert_eq!(body, 14);
        assert!(split_front_matter("no front matter").is_none());
        assert!(split_front_matter("---\nid: x\nnever closed\n").is_none());
    }

    #[test]
    fn a_good_lesson_loads_with_its_sections_in_order() {
        let lesson = load_fixture("good", Lang::En).unwrap();
        assert_eq!(lesson.meta.title, "A good lesson");
        assert_eq!(lesson.spec.minutes, 5);
        let ids: Vec<&str> = lesson.sections.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "intro",
                "the-loop",
                "measured",
                "inside-a-forward-pass",
                "why-this-path",
                "the-code",
                "exercise",
                "hint",
                "on-this-machine"
            ]
        );
        let hint = lesson.section("hint").unwrap();
        assert_eq!(hint.title, "Hint");
        assert!(lesson.section_markdown(hint).starts_with("## Hint"));
        assert_eq!(
            &lesson.source.lines().nth(hint.line - 1).unwrap()[..7],
            "## Hint"
        );
    }

    #[test]
    fn korean_headings_carry_their_anchor() {
        let lesson = load_fixture("good", Lang::Ko).unwrap();
        let exercise = lesson.section("exercise").unwrap();
        assert_eq!(exercise.title, "연습");
    }

    #[test]
    fn bad_yaml_points_at_the_file_line() {
        let error = error_of(load_fixture("bad-yaml", Lang::En));
        // YAML notices at the end of the front matter (line 5); the unclosed
        // quote it names opens on line 4, column 8.
        assert!(error.contains("bad-yaml/en.md:5:1: "), "{error}");
        assert!(
            error.contains("quoted scalar at line 4 column 8"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_field_is_an_error() {
        let error = error_of(load_fixture("missing-field", Lang::En));
        assert!(error.contains("missing-field/lesson.yaml:"), "{error}");
        assert!(error.contains("missing field `minutes`"), "{error}");
    }

    #[test]
    fn an_unknown_field_is_an_error() {
        let error = error_of(load_fixture("unknown-field", Lang::En));
        assert!(error.contains("unknown-field/en.md:5:"), "{error}");
        assert!(error.contains("minute"), "{error}");
    }

    #[test]
    fn a_missing_section_is_named_with_a_line() {
        let error = error_of(load_fixture("missing-section", Lang::En));
        assert!(
            error.contains("missing section `hint` after `exercise`"),
            "{error}"
        );
        assert!(error.contains("missing-section/en.md:"), "{error}");
    }

    #[test]
    fn a_heading_without_an_anchor_is_an_error() {
        let error = error_of(load_fixture("no-anchor", Lang::Ko));
        assert!(error.contains("no-anchor/ko.md:"), "{error}");
        assert!(error.contains("{#"), "{error}");
    }

    #[test]
    fn a_translation_without_a_source_hash_is_an_error() {
        let error = error_of(load_fixture("no-source-hash", Lang::Ko));
        assert!(error.contains("source_hash"), "{error}");
    }

    #[test]
    fn a_file_that_names_another_lesson_is_an_error() {
        let error = error_of(load_fixture("wrong-id", Lang::En));
        assert!(error.contains("wrong-id/en.md:2:"), "{error}");
    }
}
