//! The interleaved measurement's verdicts: the moves the code did not make (`measure:
//! moves:`) and whether the effect showed where the lesson says it shows.

use crate::course::spec::{Direction, LessonSpec, Move};
use crate::device::{Backend, BackendKind};

/// The `moves` of the lesson's measurement that the learner's code did not make: each
/// with the starting code's median and the learner's (`None` where the runs did not
/// report the metric). `median` gives a metric's median for the starting code
/// (`false`) or the learner's (`true`).
pub fn unmoved(
    moves: &[Move],
    median: impl Fn(crate::course::Metric, bool) -> Option<f64>,
) -> Vec<(&Move, Option<f64>, Option<f64>)> {
    moves
        .iter()
        .filter_map(|m| {
            let (before, after) = (median(m.metric, false), median(m.metric, true));
            let moved = match (before, after, m.expect) {
                (Some(b), Some(a), Direction::Lower) => a < b,
                (Some(b), Some(a), Direction::Higher) => a > b,
                _ => false,
            };
            (!moved).then_some((m, before, after))
        })
        .collect()
}

/// What the interleaved measurement says of the lesson's effect.
#[derive(Debug, PartialEq)]
pub enum Effect {
    /// Where it shows, it showed (or the lesson asks for no ratio).
    Shown,
    /// Where it shows, the ratio fell short of `at_least` (`None`: not measurable).
    Missing { ratio: Option<f64>, at_least: f64 },
    /// This backend is not where the lesson expects it; it shows on these.
    Elsewhere(Vec<BackendKind>),
}

/// The effect gate: on a backend where the lesson says its effect shows, the learner's
/// improvement (after over before, the metric's direction) must be at least the
/// lesson's `at_least`; elsewhere nothing is asked.
pub fn effect(spec: &LessonSpec, backend: Backend, improvement: Option<f64>) -> Effect {
    if spec.shows_on_backend(backend) {
        match spec.measure.as_ref().and_then(|m| m.at_least) {
            Some(at_least) if improvement.is_none_or(|ratio| ratio < at_least) => Effect::Missing {
                ratio: improvement,
                at_least,
            },
            _ => Effect::Shown,
        }
    } else if spec.shows_on.is_empty() {
        // A lesson that expects its effect nowhere says nothing about elsewhere.
        Effect::Shown
    } else {
        Effect::Elsewhere(spec.shows_on.clone())
    }
}
