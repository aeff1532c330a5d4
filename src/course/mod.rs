//! The course: which lessons exist and in what order, the strings the CLI
//! shows, and the lessons themselves (front matter, sections, code blocks).
//!
//! Everything a learner reads lives in `lessons/`; this module only loads and
//! checks it.

mod exercise;
pub mod figures;
pub mod glossary;
mod hints;
mod lang;
mod lesson;
pub mod readability;
mod sections;
pub mod spec;
mod translation;
mod yaml_error;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

pub use exercise::{first_line_difference, LineDifference};
pub use glossary::{Glossary, Hit, Term, GLOSSARY_FILE};
pub use hints::{hint_levels, HintLevel, HintLevels};
pub use lang::{Lang, Localized};
pub use lesson::{
    FrontMatter, Lesson, QuestionText, Quote, DRAWS_MESSAGE, LOGITS_MESSAGE, TOKENS_MESSAGE,
};
pub use sections::{
    markdown_options, parse_info, CodeBlock, Section, APPENDIX, EXERCISE_ATTR, INTRO,
    REQUIRED_SECTIONS,
};
pub use spec::{LessonSpec, Metric};
pub use translation::{sha256_hex, source_hash, TranslationStatus};

/// The course file inside the lessons folder.
pub const COURSE_FILE: &str = "quest.yaml";

/// `lessons/quest.yaml`: tracks, UI strings, levels and achievements.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Course {
    pub tracks: Vec<Track>,
    /// CLI strings by key; values may hold `{name}` placeholders.
    pub ui: BTreeMap<String, Localized>,
    /// Kept untyped here: the progress module gives them their types.
    #[serde(default)]
    pub levels: serde_yaml::Value,
    #[serde(default)]
    pub achievements: serde_yaml::Value,
    /// `lessons/glossary.yaml`: one Korean term for each idea (none without the file).
    #[serde(skip)]
    pub glossary: Glossary,
    /// A lesson finished with every quiz question right on its first answer earns this
    /// share of its XP again (percent; none when absent).
    #[serde(default)]
    pub first_try_percent: u32,
    /// The folder `quest.yaml` was read from.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// A named sequence of lessons, taken in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Track {
    pub id: String,
    pub title: Localized,
    pub lessons: Vec<String>,
}

impl Course {
    pub fn load(lessons_dir: &Path) -> Result<Course> {
        let path = lessons_dir.join(COURSE_FILE);
        let text = fs::read_to_string(&path)
            .with_context(|| format!("reading the course file {}", path.display()))?;
        let mut course: Course =
            serde_yaml::from_str(&text).map_err(|error| yaml_error::located(&path, 1, error))?;
        course.dir = lessons_dir.to_path_buf();
        course.glossary = Glossary::load(lessons_dir)?;
        course.check_lesson_ids(&path)?;
        Ok(course)
    }

    /// Every lesson id, in track order.
    pub fn lesson_ids(&self) -> impl Iterator<Item = &str> {
        self.tracks
            .iter()
            .flat_map(|track| track.lessons.iter().map(String::as_str))
    }

    /// Loads one lesson in one language (its `lesson.yaml` and `<lang>.md`); `id`
    /// must be listed in `quest.yaml`.
    pub fn lesson(&self, id: &str, lang: Lang) -> Result<Lesson> {
        self.ensure_known_lesson(id, lang)?;
        let spec = LessonSpec::load(&self.dir, id)?;
        Lesson::load_file(&self.lesson_path(id, lang), id, lang, spec)
    }

    /// One lesson's `lesson.yaml` alone (no language's text): what it runs, where, and how
    /// it is checked.
    pub fn spec(&self, id: &str) -> Result<LessonSpec> {
        self.ensure_known_lesson(id, Lang::En)?;
        LessonSpec::load(&self.dir, id)
    }

    /// The folder that holds `lessons/`: exercise and solution paths are relative to it.
    pub fn project_root(&self) -> PathBuf {
        self.dir.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// Where the lesson's text in `lang` lives (it may not exist yet).
    pub fn lesson_path(&self, id: &str, lang: Lang) -> PathBuf {
        self.dir.join(id).join(format!("{lang}.md"))
    }

    /// Fails, in the learner's language, unless `id` names a listed lesson.
    ///
    /// Checking the listing (not just the spelling) also keeps ids like
    /// `../x` from reaching the file system.
    pub fn ensure_known_lesson(&self, id: &str, lang: Lang) -> Result<()> {
        if is_valid_lesson_id(id) && self.lesson_ids().any(|known| known == id) {
            return Ok(());
        }
        let list = self.lesson_ids().collect::<Vec<_>>().join(", ");
        bail!(self.ui_with("unknown_lesson", lang, &[("id", id), ("list", &list)]))
    }

    /// A UI string; an unknown key comes back as itself so the CLI never
    /// crashes over a missing string (the tests check the keys in use).
    pub fn ui<'a>(&'a self, key: &'a str, lang: Lang) -> &'a str {
        self.ui.get(key).map_or(key, |text| text.get(lang))
    }

    /// A UI string with its `{name}` placeholders filled in.
    pub fn ui_with(&self, key: &str, lang: Lang, args: &[(&str, &str)]) -> String {
        fill_placeholders(self.ui(key, lang), args)
    }

    /// Where a lesson's effect shows (`shows_on`, with the model where lesson.yaml names
    /// one) and, for an exercise that runs on some backends only (`runs_on`), where it
    /// runs: the line `quest list` and the course page give under its title.
    pub fn where_it_shows(&self, lesson: &Lesson, lang: Lang) -> Option<String> {
        let spec = &lesson.spec;
        let mut parts = Vec::new();
        if !spec.shows_on.is_empty() {
            let places: Vec<String> = (spec.shows_on.iter())
                .map(|kind| match spec.shows_with.get(kind) {
                    Some(model) => self.ui_with(
                        "list_shows_with",
                        lang,
                        &[("backend", kind.key()), ("model", model)],
                    ),
                    None => kind.key().to_owned(),
                })
                .collect();
            parts.push(self.ui_with("list_shows_on", lang, &[("where", &places.join(", "))]));
        }
        if !spec.runs_on.is_empty() {
            let places: Vec<&str> = spec.runs_on.iter().map(|kind| kind.key()).collect();
            parts.push(self.ui_with("list_runs_on", lang, &[("where", &places.join(", "))]));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    fn check_lesson_ids(&self, path: &Path) -> Result<()> {
        let mut seen = Vec::new();
        for id in self.lesson_ids() {
            if !is_valid_lesson_id(id) {
                bail!(
                    "{}: lesson id `{id}` may only use a-z, 0-9 and `-`",
                    path.display()
                );
            }
            if seen.contains(&id) {
                bail!("{}: lesson `{id}` is listed twice", path.display());
            }
            seen.push(id);
        }
        Ok(())
    }
}

/// Lesson ids double as folder names, so they stay plain: `[a-z0-9-]+`.
pub fn is_valid_lesson_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}

/// Replaces each `{name}` with its value; unknown placeholders stay visible.
pub fn fill_placeholders(template: &str, args: &[(&str, &str)]) -> String {
    args.iter()
        .fold(template.to_string(), |text, (name, value)| {
            text.replace(&format!("{{{name}}}"), value)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `ui:` string is shown somewhere, and every key the code asks for exists: the
    /// code names a key as a string literal (in a `ui` call, or a match arm's `"signal_ill"`), or
    /// builds it from a family's prefix (`metric_…`, `card_…`), whose members are checked
    /// against the list they come from.
    #[test]
    fn every_ui_key_is_used_and_every_used_key_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let course = Course::load(&root.join("lessons")).unwrap();
        let source: String = crate::rust_sources()
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        let literal = |key: &str| source.contains(&format!("\"{key}\""));
        let families: Vec<String> = crate::course::Metric::ALL
            .iter()
            .map(|m| format!("metric_{}", m.key()))
            .chain(["card_before".into(), "card_after".into()])
            .collect();
        let unused: Vec<&String> = course
            .ui
            .keys()
            .filter(|key| !literal(key) && !families.contains(key))
            .collect();
        assert!(unused.is_empty(), "ui keys nothing shows: {unused:?}");
        let missing: Vec<&String> = families
            .iter()
            .filter(|k| !course.ui.contains_key(*k))
            .collect();
        assert!(
            missing.is_empty(),
            "ui keys asked for but missing: {missing:?}"
        );
        // Literal keys asked of `ui(…)` / `ui_with(…)`.
        let mut asked = Vec::new();
        for call in ["ui(\"", "ui_with(\""] {
            for (at, _) in source.match_indices(call) {
                let rest = &source[at + call.len()..];
                let key = &rest[..rest.find('"').unwrap()];
                asked.push(key.to_owned());
            }
        }
        let unknown: Vec<&String> = asked
            .iter()
            .filter(|key| !course.ui.contains_key(*key) && key.as_str() != "no_such_key")
            .collect();
        assert!(
            unknown.is_empty(),
            "ui keys the code asks for that quest.yaml lacks: {unknown:?}"
        );
    }

    pub(crate) fn fixture_lessons() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broken-lessons/lessons")
    }

    #[test]
    fn lesson_ids_are_plain() {
        assert!(is_valid_lesson_id("mlx-path"));
        assert!(is_valid_lesson_id("lesson-2"));
        for bad in ["", "../x", "MLX", "a/b", "a.b", "a b", "é"] {
            assert!(!is_valid_lesson_id(bad), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn placeholders_are_filled() {
        let text = fill_placeholders(
            "Unknown lesson {id}. Lessons: {list}",
            &[("id", "x"), ("list", "a, b")],
        );
        assert_eq!(text, "Unknown lesson x. Lessons: a, b");
    }

    #[test]
    fn unknown_and_escaping_ids_are_refused_with_the_list() {
        let course = Course::load(&fixture_lessons()).unwrap();
        for id in ["../x", "nope", "../../etc/passwd"] {
            let error = course.lesson(id, Lang::En).unwrap_err().to_string();
            assert!(error.contains(&format!("Unknown lesson {id}")), "{error}");
            assert!(error.contains("good, bad-yaml"), "{error}");
        }
        let error = course.lesson("nope", Lang::Ko).unwrap_err().to_string();
        assert!(error.contains("레슨"), "the learner's language: {error}");
    }

    #[test]
    fn a_missing_ui_key_shows_itself() {
        let course = Course::load(&fixture_lessons()).unwrap();
        assert_eq!(course.ui("no_such_key", Lang::En), "no_such_key");
    }
}
