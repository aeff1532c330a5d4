//! What the progress file holds. Every field is plain data so the JSON
//! stays readable; the rules that act on it live in other files.

use super::Timestamp;
use crate::course::{sha256_hex, Lang, Metric};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file format version this quest writes. Files with a higher number
/// come from a newer quest and are refused rather than misread; older ones are
/// migrated (see `migrate.rs`).
pub const SCHEMA: u32 = 2;

/// The key, in a run's `metrics`, of the library's own decode speed measured beside it.
pub const LIBRARY_DECODE_TOK_S: &str = "library_decode_tok_s";

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
    pub tokens_generated: u32,
    pub prompt_tokens: u32,
    pub lang: Lang,
    /// What was measured, by name: the [`Metric`] keys (`decode_tok_s`, `ttft_ms`, …),
    /// [`LIBRARY_DECODE_TOK_S`] when the library ran beside it, and quest's own values
    /// (a lesson's `values:`, e.g. `fixed_ms`) for an exercise that reports values.
    pub metrics: BTreeMap<String, f64>,
    /// The weight layout that ran (`dense-f32`, `quantized`, …), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
}

impl Run {
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        self.metrics.get(metric.key()).copied()
    }
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
    /// The learner's own code outside the exercise.
    Learner,
}

/// The learner's own summary of a lesson: their numbers and their answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    pub at: Timestamp,
    /// The metric the numbers are in (a [`Metric`] key); absent for a quiz alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// By name: `before` and `after`.
    #[serde(default)]
    pub numbers: BTreeMap<String, f64>,
    /// Quiz answers by question id, e.g. `term: fixed`.
    #[serde(default)]
    pub answers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub at: Timestamp,
    /// The code submitted; `None` for a lesson without an exercise (a quiz).
    pub code: Option<CodeRef>,
    /// The whole lesson passed: code, behaviour, measurements and the card.
    pub passed: bool,
    /// Code, behaviour and measurements passed (the card may still be missing).
    #[serde(default)]
    pub checks_passed: bool,
    pub lang: Lang,
    /// The interleaved measurement of this submission, when it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
}

/// Baseline and learner's code measured in one run, round by round, interleaved:
/// the only thing a "faster" claim rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// A [`Metric`] key.
    pub metric: String,
    pub before: Vec<f64>,
    pub after: Vec<f64>,
}

impl Measurement {
    /// Median after over median before, as an improvement (above 1 is better).
    pub fn improvement(&self) -> Option<f64> {
        let metric = Metric::from_key(&self.metric)?;
        let (before, after) = (
            crate::stats::median(&self.before),
            crate::stats::median(&self.after),
        );
        metric.improvement(before, after)
    }
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

    /// The best improvement of any submission whose checks passed, from its own
    /// interleaved measurement.
    pub fn best_improvement(&self) -> Option<f64> {
        self.submissions
            .iter()
            .filter(|submission| submission.checks_passed)
            .filter_map(|submission| submission.measurement.as_ref()?.improvement())
            .max_by(f64::total_cmp)
    }

    /// The improvement measured for this version of the code, by its latest
    /// submission that passed its checks.
    pub fn improvement_of(&self, code: &CodeRef) -> Option<f64> {
        self.submissions
            .iter()
            .rev()
            .filter(|s| s.checks_passed && s.code.as_ref() == Some(code))
            .find_map(|s| s.measurement.as_ref()?.improvement())
    }

    /// The named numbers of the latest run of this code, once it passed its checks: where
    /// quest's own `values:` for it are recorded (see `cli::values`).
    pub fn values_of(&self, code: &CodeRef) -> Option<&BTreeMap<String, f64>> {
        if !self.passed_checks(code) {
            return None;
        }
        self.runs
            .iter()
            .rev()
            .find(|run| &run.code == code)
            .map(|run| &run.metrics)
    }

    /// Whether this code passed its checks in some submission.
    pub fn passed_checks(&self, code: &CodeRef) -> bool {
        self.submissions
            .iter()
            .any(|s| s.checks_passed && s.code.as_ref() == Some(code))
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
