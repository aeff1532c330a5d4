//! What the progress file holds. Every field is plain data so the JSON
//! stays readable; the rules that act on it live in other files.

use super::Timestamp;
use crate::course::{sha256_hex, Lang, Metric};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file format version this quest writes. Files with a higher number
/// come from a newer quest and are refused rather than misread; older ones are
/// migrated (see `migrate.rs`).
pub const SCHEMA: u32 = 4;

/// The key, in a run's `metrics`, of the library's own decode speed measured beside it.
pub const LIBRARY_DECODE_TOK_S: &str = "library_decode_tok_s";

/// The key, in a run's `metrics`, of the learner's decode speed on the kernels the library
/// runs (MLX's own, quest's CUDA kernels off), measured beside [`LIBRARY_DECODE_TOK_S`]: what
/// "faster than the library" compares, so that it rewards the learner's loop, not quest's
/// kernels.
pub const SAME_KERNELS_DECODE_TOK_S: &str = "same_kernels_decode_tok_s";

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
    /// Every answer given to the lesson's quiz, right or wrong, in the order given:
    /// predictions (`quest submit --predict`) and the card's answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The furthest hint level `quest hint` has shown (1 for the first); 0: none yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hint_level: u32,
    /// `quest run` has shown the whole lesson once; later runs show its tasks.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read: bool,
}

impl LessonRecord {
    /// The lesson has been shown in full: by a run that said so, or, in a file written
    /// before runs said it, by any recorded run (every run then showed the whole lesson).
    pub fn has_read(&self) -> bool {
        self.read || !self.runs.is_empty()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One answer to one quiz question, as it was given and judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    pub at: Timestamp,
    pub question: String,
    pub choice: String,
    /// Given with `quest submit --predict`, before the measurement that judges it; else
    /// on the card.
    pub predicted: bool,
    /// The right answer is what this machine measures (the lesson's `measured:`), not fixed.
    pub measured: bool,
    /// The verdict; `None` while a prediction waits for its measurement.
    pub right: Option<bool>,
}

/// One measured generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub at: Timestamp,
    pub code: CodeRef,
    /// Where it ran, as recorded ([`crate::device::Backend::recorded_name`]): e.g.
    /// `mlx-metal` or `mlx-cpu`. Text: a record keeps whatever name a run was given.
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

    /// Whether every question on the card was right on its first answer: the first answer
    /// given to it was judged right and, where the answer is what this machine measures,
    /// was predicted before that measurement (read off the measurement, it shows nothing).
    /// A card with no answers (a lesson without a quiz) has nothing to be right about.
    pub fn right_first_time(&self) -> bool {
        self.card
            .as_ref()
            .is_some_and(|card| !card.answers.is_empty())
            && self.not_right_first().is_empty()
    }

    /// The card's questions whose first answer was not a right one (see
    /// [`LessonRecord::right_first_time`]), in the card's order.
    pub fn not_right_first(&self) -> Vec<&str> {
        let Some(card) = &self.card else {
            return Vec::new();
        };
        card.answers
            .keys()
            .filter(|question| {
                !self.first_attempt(question).is_some_and(|first| {
                    first.right == Some(true) && (first.predicted || !first.measured)
                })
            })
            .map(String::as_str)
            .collect()
    }

    /// The first answer given to `question`, if any.
    pub fn first_attempt(&self, question: &str) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.question == question)
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

    fn attempt(
        question: &str,
        choice: &str,
        predicted: bool,
        measured: bool,
        right: Option<bool>,
    ) -> Attempt {
        Attempt {
            at: Timestamp::now(),
            question: question.into(),
            choice: choice.into(),
            predicted,
            measured,
            right,
        }
    }

    #[test]
    fn only_a_right_first_answer_is_right_first_time() {
        let mut record = LessonRecord {
            card: Some(Card {
                at: Timestamp::now(),
                metric: None,
                numbers: BTreeMap::new(),
                answers: [("term", "fixed"), ("shows", "yes")]
                    .map(|(q, a)| (q.to_owned(), a.to_owned()))
                    .into(),
            }),
            ..LessonRecord::default()
        };
        let right_first = |record: &LessonRecord| record.right_first_time();
        let predicted_right = attempt("shows", "yes", true, true, Some(true));
        let term_right = attempt("term", "fixed", false, false, Some(true));
        record.attempts = vec![predicted_right.clone(), term_right.clone()];
        assert!(right_first(&record));
        // Guessed: wrong, then right.
        record.attempts = vec![
            predicted_right.clone(),
            attempt("term", "bytes", false, false, Some(false)),
            term_right.clone(),
        ];
        assert!(!right_first(&record));
        // A measured answer read off the measurement on the card is right, but not a
        // prediction.
        record.attempts = vec![
            attempt("shows", "yes", false, true, Some(true)),
            term_right.clone(),
        ];
        assert!(!right_first(&record));
        // A prediction still waiting for its measurement, or no answer at all.
        record.attempts = vec![
            attempt("shows", "yes", true, true, None),
            term_right.clone(),
        ];
        assert!(!right_first(&record));
        record.attempts = vec![term_right];
        assert!(!right_first(&record));
        record.card = None;
        record.attempts = vec![predicted_right];
        assert!(!right_first(&record));
    }
}
