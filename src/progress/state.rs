//! What the progress file holds. Every field is plain data so the JSON
//! stays readable; the rules that act on it live in other files.

use super::Timestamp;
use crate::course::{sha256_hex, Lang};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file format version this quest writes. Files with a higher number
/// come from a newer quest and are refused rather than misread.
pub const SCHEMA: u32 = 1;

// Unknown fields are refused everywhere: ignoring them would silently drop
// data the next time the file is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub schema: u32,
    /// `None` until the learner picks a language.
    #[serde(default)]
    pub lang: Option<Lang>,
    /// Keyed by lesson id, e.g. `mlx-path`.
    #[serde(default)]
    pub lessons: BTreeMap<String, LessonRecord>,
    /// The award ledger, keyed so that nothing is awarded twice,
    /// e.g. `lesson:mlx-path:complete` or `achievement:first-token`.
    #[serde(default)]
    pub awards: BTreeMap<String, Award>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Award {
    pub xp: u32,
    pub at: Timestamp,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessonRecord {
    /// In the order they were recorded.
    #[serde(default)]
    pub runs: Vec<Run>,
    #[serde(default)]
    pub card: Option<Card>,
    #[serde(default)]
    pub submissions: Vec<Submission>,
}

/// One measured generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub at: Timestamp,
    pub code: CodeRef,
    /// Where it ran, e.g. `mlx-metal` or `mlx-cpu`.
    pub backend: String,
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    pub tokens_generated: u32,
    pub prompt_tokens: u32,
    pub lang: Lang,
    /// The library's own decode speed on the same prompt, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_tok_s: Option<f64>,
}

/// Which code produced a run, and a hash that tells its versions apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRef {
    pub kind: CodeKind,
    /// Lower-case hex SHA-256 of the source.
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodeKind {
    /// The exercise exactly as the lesson gives it (the hand loop before any edit).
    Original,
    /// The exercise file, as the learner edited it.
    Exercise,
    /// The course's reference solution.
    Solution,
    /// The learner's own code outside the exercise.
    Learner,
}

/// The learner's own summary of a lesson: their numbers and their answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    pub at: Timestamp,
    pub before_tok_s: f64,
    pub after_tok_s: f64,
    /// The answer to the lesson's "which term dominates?" question.
    pub which_term: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub at: Timestamp,
    pub code: CodeRef,
    /// The whole lesson passed: code, behaviour, measurements and the card.
    pub passed: bool,
    /// Code, behaviour and measurements passed (the card may still be missing).
    #[serde(default)]
    pub checks_passed: bool,
    pub lang: Lang,
}

impl CodeRef {
    pub fn of(kind: CodeKind, source: &[u8]) -> Self {
        CodeRef {
            kind,
            sha256: sha256_hex(source),
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            schema: SCHEMA,
            lang: None,
            lessons: BTreeMap::new(),
            awards: BTreeMap::new(),
        }
    }
}

impl LessonRecord {
    /// Done once any submission passed.
    pub fn is_done(&self) -> bool {
        self.submissions.iter().any(|submission| submission.passed)
    }
}

impl State {
    /// Records an award once: returns `false`, changing nothing, when `key`
    /// was already awarded, so callers may award on every run.
    pub fn award(&mut self, key: &str, xp: u32, at: Timestamp) -> bool {
        if self.awards.contains_key(key) {
            return false;
        }
        self.awards.insert(key.to_owned(), Award { xp, at });
        true
    }

    pub fn has_award(&self, key: &str) -> bool {
        self.awards.contains_key(key)
    }

    pub fn total_xp(&self) -> u64 {
        self.awards.values().map(|award| u64::from(award.xp)).sum()
    }

    pub fn lesson(&self, id: &str) -> Option<&LessonRecord> {
        self.lessons.get(id)
    }

    /// The lesson's record, created empty on first use.
    pub fn lesson_mut(&mut self, id: &str) -> &mut LessonRecord {
        self.lessons.entry(id.to_owned()).or_default()
    }

    /// Every run of every lesson.
    pub fn runs(&self) -> impl Iterator<Item = &Run> {
        self.lessons.values().flat_map(|lesson| &lesson.runs)
    }

    /// Every submission of every lesson.
    pub fn submissions(&self) -> impl Iterator<Item = &Submission> {
        self.lessons.values().flat_map(|lesson| &lesson.submissions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awarding_the_same_key_twice_counts_once() {
        let mut state = State::default();
        let at = Timestamp::now();
        assert!(state.award("achievement:first-token", 10, at));
        assert!(!state.award("achievement:first-token", 99, at));
        assert_eq!(state.awards.len(), 1);
        assert_eq!(state.total_xp(), 10);
    }

    #[test]
    fn code_hash_is_hex_sha256() {
        let code = CodeRef::of(CodeKind::Learner, b"abc");
        assert_eq!(
            code.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
