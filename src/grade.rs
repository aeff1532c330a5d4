//! The decisions of `quest submit` and `quest card`, as pure functions over a lesson's
//! data and the recorded history: which tokens must agree and where they first differ,
//! whether the effect showed where the lesson says it shows, what is wrong with a card,
//! and how quiz answers are judged.
//!
//! Every answer to a quiz question is recorded as an [`Attempt`], right or wrong. A
//! prediction (`quest submit --predict q=choice`) is recorded before the measurement and
//! judged by the first measurement after it; a card's answers are judged and recorded
//! only once nothing else is wrong with the card (so a refused card tells nothing of its
//! answers for free), and only then does the refusal say which were wrong. The lesson
//! completes once every answer is right; only a right first answer (a measured one
//! predicted) earns the first-try bonus (`LessonRecord::right_first_time`). The CLI
//! parses, runs, calls these, prints and records.

mod draws;
pub use draws::{draws_compared, DrawsVerdict, StepDraws};

use crate::check::card::{check_claim, correct_answer, Evidence, Refused};
use crate::course::spec::{
    Answer, CardNumber, Direction, FeedRule, LessonSpec, Move, Question, TokenCheck,
};
use crate::course::{Lesson, Metric};
use crate::device::{Backend, BackendKind};
use crate::progress::{Attempt, Card, CodeKind, CodeRef, LessonRecord, Timestamp};
use crate::stats::median;

/// How many leading tokens of the learner's run must be the solution's, when any:
/// `exact` all of either, `first: n` the first `n`.
pub fn tokens_compared(check: TokenCheck, solution: usize, learner: usize) -> Option<usize> {
    match check {
        TokenCheck::Exact => Some(solution.max(learner)),
        TokenCheck::First(n) => Some(n),
        TokenCheck::Repeatable | TokenCheck::None => None,
    }
}

/// A figure timed inside the judged process (a decode step's graph building, the host's
/// part of it) checked against what quest's own clock timed from outside: the whole step.
/// Building is part of a step, so a median build time over the median step's wall time
/// (beyond `slack`, a share of the step) cannot be: `Some((build_ms, step_ms))` where it
/// is over. quest trusts the clock; the inside figure only within it.
pub fn inside_figure_over_clock(
    build_ms: &[f64],
    step_ms: &[f64],
    slack: f64,
) -> Option<(f64, f64)> {
    if build_ms.is_empty() || step_ms.is_empty() {
        return None;
    }
    let (build, step) = (
        crate::stats::median(build_ms),
        crate::stats::median(step_ms),
    );
    (build > step * (1.0 + slack)).then_some((build, step))
}

/// Why a run's counts of calls into the learner's piece do not show the learner's code
/// made its numbers ([`piece_calls_problem`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallsProblem {
    /// The run sent no counts on quest's line: it never reached the lab's report.
    NotCounted,
    /// The model never called the learner's piece: the pieces were not handed to it.
    NeverCalled,
    /// quest's own implementation of the piece ran `quest` times in the learner's
    /// process, against `seam` calls: a trait default, or quest's pieces called inside.
    QuestRan { quest: u64, seam: u64 },
    /// Fewer calls than the model has layers: some layer ran something else.
    TooFew { seam: u64, layers: usize },
    /// One of MLX's fused ops that the piece replaces computed `fused` of the `seam`
    /// outputs, read off their graphs (`op`: the first seen).
    Fused {
        op: crate::lm::graph::Fused,
        fused: u64,
        seam: u64,
    },
    /// `evaluated` of the `seam` outputs came back already evaluated: what computed them
    /// is not in the graph.
    Evaluated { evaluated: u64, seam: u64 },
}

/// Whether `calls` (quest's seam's counts, from quest's line) show that the model called
/// the learner's `piece` in every layer and quest's own never ran: `None` where they do.
pub fn piece_calls_problem(
    piece: crate::course::spec::Piece,
    calls: Option<&std::collections::BTreeMap<crate::course::spec::Piece, crate::lm::Calls>>,
    layers: usize,
) -> Option<CallsProblem> {
    let Some(calls) = calls else {
        return Some(CallsProblem::NotCounted);
    };
    let counted = calls.get(&piece).copied().unwrap_or_default();
    if let (Some(op), fused @ 1..) = (counted.fused_op, counted.fused) {
        return Some(CallsProblem::Fused {
            op,
            fused,
            seam: counted.seam,
        });
    }
    if counted.evaluated > 0 {
        return Some(CallsProblem::Evaluated {
            evaluated: counted.evaluated,
            seam: counted.seam,
        });
    }
    if counted.quest > 0 {
        return Some(CallsProblem::QuestRan {
            quest: counted.quest,
            seam: counted.seam,
        });
    }
    if counted.seam == 0 {
        return Some(CallsProblem::NeverCalled);
    }
    // A sampler is called once a step, not once a layer.
    let layers = if piece == crate::course::spec::Piece::Sample {
        1
    } else {
        layers
    };
    (counted.seam < layers as u64).then_some(CallsProblem::TooFew {
        seam: counted.seam,
        layers,
    })
}

/// The first position among the first `n` where the learner's tokens are not the
/// solution's (a missing token differs), or `None` when they agree.
pub fn first_difference(solution: &[u32], learner: &[u32], n: usize) -> Option<usize> {
    let (expected, got) = (
        &solution[..n.min(solution.len())],
        &learner[..n.min(learner.len())],
    );
    (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i))
}

/// How a model's logits compare with quest's own, step by step (`logits:`).
#[derive(Debug, Clone, PartialEq)]
pub enum LogitsVerdict {
    /// Every step within the tolerance: the largest difference, the step it was at, and
    /// the steps whose argmax differs all the same ([`near_ties`]).
    Within {
        steps: usize,
        largest: f32,
        at_step: usize,
        near_ties: Vec<usize>,
    },
    /// The first step beyond the tolerance.
    Beyond(LogitsGap),
    /// The run reported another number of steps (or another vocabulary) than quest's.
    Missing { steps: usize, expected: usize },
}

/// Where a model's logits first left quest's: the step (0 is the prompt's last position,
/// step `n` the `n`-th token fed after it), the sequence position it predicts from, the
/// vocabulary id where the difference is largest, by how much, and both argmaxes.
#[derive(Debug, Clone, PartialEq)]
pub struct LogitsGap {
    pub step: usize,
    pub position: usize,
    pub id: usize,
    pub by: f32,
    pub reference_argmax: usize,
    pub argmax: usize,
}

/// The first largest entry's index (NaN never wins).
fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() {
            best = i;
        }
    }
    best
}

/// Judges `yours` (one row of logits per step, teacher-forced on the reference's tokens)
/// against `reference` (quest's own pieces on the same tokens): the first step whose max
/// abs difference is over `tolerance` is refused; a NaN counts as an infinite difference.
/// `prompt_tokens` turns a step into the position it predicts from.
///
/// A step within the tolerance whose argmax differs is a near tie, not a refusal: with
/// every logit within `t` of quest's, another pick means quest's own logits for the two
/// tokens lie within `2t` of each other, a tie that rounding alone may break either way
/// (float16 on a random-weights model, whose logits are flat, breaks several in 32 steps).
/// Those steps are listed ([`LogitsVerdict::Within`]'s `near_ties`), for the token check
/// ([`tokens_against_quest`]).
pub fn logits_compared(
    reference: &[Vec<f32>],
    yours: &[Vec<f32>],
    tolerance: f32,
    prompt_tokens: usize,
) -> LogitsVerdict {
    let same_shape = reference.len() == yours.len()
        && reference.iter().zip(yours).all(|(r, y)| r.len() == y.len());
    if !same_shape || reference.is_empty() {
        return LogitsVerdict::Missing {
            steps: yours.len(),
            expected: reference.len(),
        };
    }
    let (mut largest, mut at_step, mut near_ties) = (0.0f32, 0, Vec::new());
    for (step, (r, y)) in reference.iter().zip(yours).enumerate() {
        let (mut id, mut by) = (0, 0.0f32);
        for (i, (a, b)) in r.iter().zip(y).enumerate() {
            let d = (a - b).abs();
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if d > by {
                (id, by) = (i, d);
            }
        }
        let (reference_argmax, argmax) = (argmax(r), argmax(y));
        if by > tolerance {
            return LogitsVerdict::Beyond(LogitsGap {
                step,
                // Step 0 predicts from the prompt's last position.
                position: (prompt_tokens + step).saturating_sub(1),
                id,
                by,
                reference_argmax,
                argmax,
            });
        }
        if reference_argmax != argmax {
            near_ties.push(step);
        }
        if by > largest {
            (largest, at_step) = (by, step);
        }
    }
    LogitsVerdict::Within {
        steps: reference.len(),
        largest,
        at_step,
        near_ties,
    }
}

/// A learner's free-running tokens against quest's own (the tokens its logits were
/// checked on), given the near ties of that check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgainstQuest {
    /// The same tokens as quest's.
    Same,
    /// The same up to this token, where the logits check found a near tie: the rest
    /// follows from another pick there, not from another computation.
    NearTie(usize),
    /// Apart from this token on, where the check found no tie: the free-running loop
    /// computes something the teacher-forced one did not.
    Apart(usize),
}

/// Where `learner`'s tokens first leave quest's `reference` (over the longer of the two),
/// and whether a near tie of the logits check explains it. Token `k` is what step `k`
/// picked: until the first difference both runs were fed the same tokens, so the learner's
/// free-running pick there is its teacher-forced argmax.
pub fn tokens_against_quest(
    reference: &[u32],
    learner: &[u32],
    near_ties: &[usize],
) -> AgainstQuest {
    match first_difference(reference, learner, reference.len().max(learner.len())) {
        None => AgainstQuest::Same,
        Some(at) if near_ties.contains(&at) => AgainstQuest::NearTie(at),
        Some(at) => AgainstQuest::Apart(at),
    }
}

/// Where a step's hidden states, layer by layer, first left quest's: what a refused logits
/// check adds when both models report their layers.
#[derive(Debug, Clone, PartialEq)]
pub enum LayersVerdict {
    /// The first layer whose output differs from quest's by more than the relative
    /// tolerance times the largest value quest's has there (hidden states are not scaled
    /// like logits).
    First { layer: usize, by: f32, largest: f32 },
    /// Every layer's output within: the difference begins after the last layer (the final
    /// norm or the head), or in what the step was fed.
    AfterLast { layers: usize },
    /// The two report other layer counts or widths: nothing to compare layer by layer.
    Unlike,
}

/// Compares one step's hidden states after each layer, `yours` against `reference`
/// (step 0: the prompt's last position): a layer is apart where the difference is over
/// `relative` × quest's largest value there; a NaN counts as infinitely far.
pub fn layers_compared(reference: &[Vec<f32>], yours: &[Vec<f32>], relative: f32) -> LayersVerdict {
    let alike = !reference.is_empty()
        && reference.len() == yours.len()
        && reference.iter().zip(yours).all(|(r, y)| r.len() == y.len());
    if !alike {
        return LayersVerdict::Unlike;
    }
    for (layer, (r, y)) in reference.iter().zip(yours).enumerate() {
        let largest = r.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let by = r.iter().zip(y).fold(0.0f32, |m, (a, b)| {
            let d = (a - b).abs();
            m.max(if d.is_nan() { f32::INFINITY } else { d })
        });
        if by > relative * largest.max(f32::MIN_POSITIVE) {
            return LayersVerdict::First { layer, by, largest };
        }
    }
    LayersVerdict::AfterLast {
        layers: reference.len(),
    }
}

/// A feed rule the run broke, from what the model recorded of its forward calls.
#[derive(Debug, PartialEq)]
pub enum FeedProblem<'a> {
    /// The run recorded no forward call: its report was not handed the model it ran.
    NotRecorded,
    /// The first token came from a forward call of `positions` positions.
    FirstToken {
        rule: &'a FeedRule,
        positions: usize,
        limit: usize,
    },
    /// Decode step `step` (1 is the first after the first token) fed `positions`.
    Step {
        rule: &'a FeedRule,
        step: usize,
        positions: usize,
        limit: usize,
    },
}

/// What is wrong with what the run fed the model: `prefill` are the positions (per
/// sequence) of each forward call before the first token, `steps` of each after it
/// (see `lab::Report`). One problem per rule, at the first call that breaks it.
pub fn feed_problems<'a>(
    rules: &'a [FeedRule],
    prefill: &[usize],
    steps: &[usize],
) -> Vec<FeedProblem<'a>> {
    if rules.is_empty() {
        return Vec::new();
    }
    if prefill.is_empty() {
        return vec![FeedProblem::NotRecorded];
    }
    let mut problems = Vec::new();
    for rule in rules {
        if let (Some(limit), Some(&positions)) = (rule.first_token, prefill.last()) {
            if positions > limit {
                problems.push(FeedProblem::FirstToken {
                    rule,
                    positions,
                    limit,
                });
            }
        }
        if let Some(limit) = rule.step {
            if let Some((i, &positions)) = steps.iter().enumerate().find(|(_, &p)| p > limit) {
                problems.push(FeedProblem::Step {
                    rule,
                    step: i + 1,
                    positions,
                    limit,
                });
            }
        }
    }
    problems
}

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

/// What is wrong with a card for this code.
pub enum CardProblem {
    /// A number no run of that code backs.
    Unbacked(Refused),
    /// A number the lesson's card asks for is missing.
    MissingNumber(&'static str),
    MissingAnswer(String),
    UnknownQuestion(String),
    BadChoice {
        question: String,
        choice: String,
    },
    /// The answer depends on a measurement not made yet for this code.
    NotMeasured,
    Wrong(String),
}

/// Everything wrong with `card` for lesson `lesson` and the learner's `code`. Wrong
/// answers are named only when nothing else is wrong: a card refused for a number, a
/// missing answer or a measurement still to make says nothing of its answers.
pub fn card_problems(
    lesson: &Lesson,
    record: &LessonRecord,
    code: &CodeRef,
    card: &Card,
) -> Vec<CardProblem> {
    let mut problems = Vec::new();
    if let (Some(card_spec), Some(measure)) = (&lesson.spec.card, &lesson.spec.measure) {
        let values = |filter: &dyn Fn(&CodeRef) -> bool| -> Vec<f64> {
            record
                .runs
                .iter()
                .filter(|run| filter(&run.code))
                .filter_map(|run| run.metric(measure.metric))
                .collect()
        };
        for number in &card_spec.numbers {
            let Some(&claimed) = card.numbers.get(number.key()) else {
                problems.push(CardProblem::MissingNumber(number.key()));
                continue;
            };
            // A run quest recorded, or the median of a measurement it printed.
            let medians = record.submissions.iter().filter_map(|s| {
                let m = s
                    .measurement
                    .as_ref()
                    .filter(|m| m.metric == measure.metric.key())?;
                match number {
                    CardNumber::Before => Some(median(&m.before)),
                    CardNumber::After => (s.code.as_ref() == Some(code)).then(|| median(&m.after)),
                }
            });
            let mut measured = match number {
                CardNumber::Before => values(&|c| c.kind == CodeKind::Original),
                CardNumber::After => values(&|c| c == code),
            };
            measured.extend(medians);
            if let Err(refused) = check_claim(number.key(), claimed, &measured, card_spec.tolerance)
            {
                problems.push(CardProblem::Unbacked(refused));
            }
        }
    }
    for id in card.answers.keys() {
        if lesson.spec.question(id).is_none() {
            problems.push(CardProblem::UnknownQuestion(id.clone()));
        }
    }
    for question in &lesson.spec.quiz {
        let Some(answer) = card.answers.get(&question.id) else {
            problems.push(CardProblem::MissingAnswer(question.id.clone()));
            continue;
        };
        if !question.choices.contains(answer) {
            problems.push(CardProblem::BadChoice {
                question: question.id.clone(),
                choice: answer.clone(),
            });
            continue;
        }
        if correct_answer(question, &evidence(record, code)).is_none() {
            problems.push(CardProblem::NotMeasured);
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    card_attempts(lesson, record, code, card, Timestamp::now())
        .into_iter()
        .filter(|attempt| attempt.right == Some(false))
        .map(|attempt| CardProblem::Wrong(attempt.question))
        .collect()
}

/// Whether the right answer to `question` is what this machine measures.
pub fn is_measured(question: &Question) -> bool {
    matches!(question.answer, Answer::Measured { .. })
}

/// The card's answers as attempts to record, each judged against what quest measured
/// for `code` (`right: None` only where nothing was measured yet), in quiz order.
pub fn card_attempts(
    lesson: &Lesson,
    record: &LessonRecord,
    code: &CodeRef,
    card: &Card,
    at: Timestamp,
) -> Vec<Attempt> {
    let evidence = evidence(record, code);
    lesson
        .spec
        .quiz
        .iter()
        .filter_map(|question| {
            let choice = card.answers.get(&question.id)?;
            Some(Attempt {
                at,
                question: question.id.clone(),
                choice: choice.clone(),
                predicted: false,
                measured: is_measured(question),
                right: correct_answer(question, &evidence).map(|right| &right == choice),
            })
        })
        .collect()
}

/// Why `quest submit --predict` refused a prediction.
#[derive(Debug, PartialEq)]
pub enum PredictionProblem {
    UnknownQuestion(String),
    BadChoice {
        question: String,
        choice: String,
    },
    /// Named twice in one command.
    Twice(String),
    /// The question already has an answer (a card's, or another prediction): only a
    /// first answer can be a prediction.
    AlreadyAnswered {
        question: String,
        choice: String,
    },
    /// Its answer is what this machine measures, and quest has measured this lesson
    /// already: it would be read off that measurement, not predicted.
    AlreadyMeasured(String),
}

/// Whether quest has shown a measurement of this lesson: a submission whose checks
/// passed (its numbers or values were printed), or one refused for an effect it measured.
pub fn measured_already(record: &LessonRecord) -> bool {
    record
        .submissions
        .iter()
        .any(|s| s.checks_passed || s.measurement.is_some())
}

/// The predictions to record for `given` (question, choice), before anything runs: a
/// fixed answer judged now, a measured one left for the measurement to judge. One the
/// record already holds as it is (the same command again after a refused submission) is
/// not recorded twice. Refused whole when any prediction is.
pub fn predictions(
    lesson: &Lesson,
    record: &LessonRecord,
    given: &[(String, String)],
    at: Timestamp,
) -> Result<Vec<Attempt>, Vec<PredictionProblem>> {
    let mut problems = Vec::new();
    let mut attempts = Vec::new();
    for (n, (id, choice)) in given.iter().enumerate() {
        let Some(question) = lesson.spec.question(id) else {
            problems.push(PredictionProblem::UnknownQuestion(id.clone()));
            continue;
        };
        if !question.choices.contains(choice) {
            problems.push(PredictionProblem::BadChoice {
                question: id.clone(),
                choice: choice.clone(),
            });
            continue;
        }
        if given[..n].iter().any(|(earlier, _)| earlier == id) {
            problems.push(PredictionProblem::Twice(id.clone()));
            continue;
        }
        if let Some(first) = record.first_attempt(id) {
            if !(first.predicted && &first.choice == choice) {
                problems.push(PredictionProblem::AlreadyAnswered {
                    question: id.clone(),
                    choice: first.choice.clone(),
                });
            }
            continue;
        }
        let measured = is_measured(question);
        if measured && measured_already(record) {
            problems.push(PredictionProblem::AlreadyMeasured(id.clone()));
            continue;
        }
        attempts.push(Attempt {
            at,
            question: id.clone(),
            choice: choice.clone(),
            predicted: true,
            measured,
            right: correct_answer(question, &Evidence::default()).map(|right| &right == choice),
        });
    }
    if problems.is_empty() {
        Ok(attempts)
    } else {
        Err(problems)
    }
}

/// The verdicts that what quest measured for `code` gives the predictions still waiting
/// (index in `record.attempts`, right): called once a submission of `code` passed its
/// checks, so each prediction is judged by the first measurement after it.
pub fn judge_waiting(lesson: &Lesson, record: &LessonRecord, code: &CodeRef) -> Vec<(usize, bool)> {
    let evidence = evidence(record, code);
    record
        .attempts
        .iter()
        .enumerate()
        .filter(|(_, attempt)| attempt.predicted && attempt.right.is_none())
        .filter_map(|(i, attempt)| {
            let question = lesson.spec.question(&attempt.question)?;
            let right = correct_answer(question, &evidence)?;
            Some((i, right == attempt.choice))
        })
        .collect()
}

/// The first-try bonus for a lesson worth `xp`: `percent` of it, rounded.
pub fn first_try_bonus(xp: u32, percent: u32) -> u32 {
    (u64::from(xp) * u64::from(percent)).div_ceil(100) as u32
}

/// What quest measured for `code`: its improvement in the interleaved measurement, and
/// the weight bytes per token of the latest recorded runs of the baseline and of it, and
/// quest's own values from its latest checked run.
pub fn evidence<'a>(record: &'a LessonRecord, code: &CodeRef) -> Evidence<'a> {
    let latest = |of: &dyn Fn(&CodeRef) -> bool| {
        record
            .runs
            .iter()
            .rev()
            .filter(|run| of(&run.code))
            .find_map(|run| run.metric(Metric::WeightMbPerToken))
    };
    let before = latest(&|c| c.kind == CodeKind::Original);
    let after = latest(&|c| c == code);
    Evidence {
        improvement: record.improvement_of(code),
        weight_mb: before.zip(after),
        values: record.values_of(code),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_inside_figure_over_the_clocks_step_cannot_be() {
        // Building 20 ms of a 100 ms step: within the clock.
        assert_eq!(
            inside_figure_over_clock(&[20.0, 21.0], &[100.0, 98.0], 0.05),
            None
        );
        // A build time of 150 ms in steps quest timed at 100 ms: written, not measured.
        assert_eq!(
            inside_figure_over_clock(&[150.0], &[100.0], 0.05),
            Some((150.0, 100.0))
        );
        assert_eq!(inside_figure_over_clock(&[], &[100.0], 0.05), None);
    }

    #[test]
    fn a_piece_counts_only_where_the_model_called_the_learners_in_every_layer() {
        use crate::course::spec::Piece;
        use crate::lm::Calls;
        let counted = |seam, quest| {
            let mut calls = std::collections::BTreeMap::new();
            calls.insert(
                Piece::Rope,
                Calls {
                    seam,
                    quest,
                    ..Default::default()
                },
            );
            calls
        };
        let rope = |calls: Option<std::collections::BTreeMap<Piece, Calls>>| {
            piece_calls_problem(Piece::Rope, calls.as_ref(), 30)
        };
        assert_eq!(rope(Some(counted(60 * 33, 0))), None);
        assert_eq!(rope(None), Some(CallsProblem::NotCounted));
        assert_eq!(
            rope(Some(Default::default())),
            Some(CallsProblem::NeverCalled)
        );
        assert_eq!(
            rope(Some(counted(1980, 1980))),
            Some(CallsProblem::QuestRan {
                quest: 1980,
                seam: 1980
            })
        );
        assert_eq!(
            rope(Some(counted(29, 0))),
            Some(CallsProblem::TooFew {
                seam: 29,
                layers: 30
            })
        );
        // The graph of an output showed MLX's fused op, or nothing (evaluated): refused
        // before anything else, with what was seen.
        let seen = |fused, fused_op, evaluated| {
            let mut calls = counted(1980, 0);
            let rope = calls.get_mut(&Piece::Rope).unwrap();
            (rope.fused, rope.fused_op, rope.evaluated) = (fused, fused_op, evaluated);
            Some(calls)
        };
        assert_eq!(
            rope(seen(3, Some(crate::lm::graph::Fused::Rope), 0)),
            Some(CallsProblem::Fused {
                op: crate::lm::graph::Fused::Rope,
                fused: 3,
                seam: 1980
            })
        );
        assert_eq!(
            rope(seen(0, None, 5)),
            Some(CallsProblem::Evaluated {
                evaluated: 5,
                seam: 1980
            })
        );
        // A sampler is called once a step.
        let mut sampled = std::collections::BTreeMap::new();
        sampled.insert(
            Piece::Sample,
            Calls {
                seam: 8,
                ..Default::default()
            },
        );
        assert_eq!(piece_calls_problem(Piece::Sample, Some(&sampled), 30), None);
    }

    use super::*;

    #[test]
    fn layers_are_compared_relative_to_quests_largest_value() {
        let reference = vec![vec![100.0, -1.0], vec![200.0, 3.0], vec![50.0, 1.0]];
        // 0.05 on a layer whose largest is 100 is within 1e-3 of it; 1.0 at layer 1 is not.
        let close = vec![vec![100.05, -1.0], vec![200.0, 2.0], vec![0.0, 0.0]];
        assert_eq!(
            layers_compared(&reference, &close, 1e-3),
            LayersVerdict::First {
                layer: 1,
                by: 1.0,
                largest: 200.0
            }
        );
        assert_eq!(
            layers_compared(&reference, &reference, 1e-3),
            LayersVerdict::AfterLast { layers: 3 }
        );
        let nan = vec![vec![f32::NAN, -1.0], vec![200.0, 3.0], vec![50.0, 1.0]];
        assert!(matches!(
            layers_compared(&reference, &nan, 1e3),
            LayersVerdict::First { layer: 0, .. }
        ));
        assert_eq!(
            layers_compared(&reference, &reference[..2], 1e-3),
            LayersVerdict::Unlike
        );
        assert_eq!(layers_compared(&[], &[], 1e-3), LayersVerdict::Unlike);
    }

    #[test]
    fn logits_are_judged_at_the_first_step_beyond_the_tolerance() {
        let reference = vec![
            vec![0.0, 1.0, 0.5],
            vec![2.0, 0.0, 0.0],
            vec![0.0, 0.0, 3.0],
        ];
        let mut close = reference.clone();
        close[1][1] += 4e-4;
        assert_eq!(
            logits_compared(&reference, &close, 1e-3, 10),
            LogitsVerdict::Within {
                steps: 3,
                largest: close[1][1],
                at_step: 1,
                near_ties: vec![]
            }
        );
        let mut off = reference.clone();
        off[1][2] -= 0.25;
        off[2][0] += 9.0;
        assert_eq!(
            logits_compared(&reference, &off, 1e-3, 10),
            LogitsVerdict::Beyond(LogitsGap {
                step: 1,
                position: 10,
                id: 2,
                by: 0.25,
                reference_argmax: 0,
                argmax: 0
            })
        );
        // Within the tolerance, but the argmax moved: a near tie, listed, not refused.
        let mut flipped = reference.clone();
        flipped[0][2] = 1.0 + 1e-4;
        let LogitsVerdict::Within { near_ties, .. } =
            logits_compared(&reference, &flipped, 1.0, 10)
        else {
            panic!("a near tie within the tolerance was refused");
        };
        assert_eq!(near_ties, vec![0]);
        // The same move beyond a smaller tolerance: refused, with both argmaxes.
        let LogitsVerdict::Beyond(gap) = logits_compared(&reference, &flipped, 0.1, 10) else {
            panic!("a moved argmax beyond the tolerance passed");
        };
        assert_eq!((gap.step, gap.reference_argmax, gap.argmax), (0, 1, 2));
        // A NaN is never within.
        let mut nan = reference.clone();
        nan[2][1] = f32::NAN;
        let LogitsVerdict::Beyond(gap) = logits_compared(&reference, &nan, 1e3, 10) else {
            panic!("a NaN passed");
        };
        assert_eq!((gap.step, gap.id, gap.by), (2, 1, f32::INFINITY));
        // Fewer steps, or another vocabulary: missing, never judged.
        assert_eq!(
            logits_compared(&reference, &reference[..2], 1e-3, 10),
            LogitsVerdict::Missing {
                steps: 2,
                expected: 3
            }
        );
    }

    #[test]
    fn free_running_tokens_may_leave_quests_only_at_a_near_tie() {
        let quest = [5, 6, 7, 8];
        assert_eq!(
            tokens_against_quest(&quest, &quest, &[]),
            AgainstQuest::Same
        );
        // Another pick at step 2, where the logits check saw a tie: what follows is free.
        assert_eq!(
            tokens_against_quest(&quest, &[5, 6, 9, 1], &[2, 3]),
            AgainstQuest::NearTie(2)
        );
        // Another pick where no tie was seen, or a tie seen later than the difference.
        assert_eq!(
            tokens_against_quest(&quest, &[5, 0, 7, 8], &[2]),
            AgainstQuest::Apart(1)
        );
        // A run that stops early differs where its tokens end.
        assert_eq!(
            tokens_against_quest(&quest, &[5, 6], &[]),
            AgainstQuest::Apart(2)
        );
    }

    #[test]
    fn tokens_differ_at_the_first_position_either_lacks_or_changes() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3], 3), None);
        assert_eq!(first_difference(&[1, 2, 3], &[1, 9, 3], 3), Some(1));
        // A shorter run differs where it stops; past `n` nothing is compared.
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2], 3), Some(2));
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 7], 2), None);
        assert_eq!(tokens_compared(TokenCheck::Exact, 5, 7), Some(7));
        assert_eq!(tokens_compared(TokenCheck::First(6), 32, 32), Some(6));
        assert_eq!(tokens_compared(TokenCheck::None, 32, 32), None);
    }

    fn feeds(yaml: &str) -> Vec<FeedRule> {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_first_token_comes_from_the_last_prompt_position_alone() {
        let rules = feeds("[{id: split-prefill, first_token: 1}]");
        let split = &rules[0];
        // The unchanged prefill (whatever it evaluates after): all 42 positions in one
        // call, the first token from its logits.
        assert_eq!(
            feed_problems(&rules, &[42], &[1, 1, 1]),
            [FeedProblem::FirstToken {
                rule: split,
                positions: 42,
                limit: 1
            }]
        );
        // The split: 41 positions, then the last alone; or in chunks, then the last.
        assert_eq!(feed_problems(&rules, &[41, 1], &[1, 1]), []);
        assert_eq!(feed_problems(&rules, &[16, 16, 9, 1], &[1]), []);
        // A split that runs the last two together still reads two rows of the head.
        assert_eq!(feed_problems(&rules, &[40, 2], &[1]).len(), 1);
        // A run that recorded nothing is not taken on trust.
        assert_eq!(feed_problems(&rules, &[], &[]), [FeedProblem::NotRecorded]);
        assert_eq!(feed_problems(&[], &[], &[]), []);
    }

    #[test]
    fn a_decode_step_feeds_one_position_whatever_makes_its_input() {
        let rules = feeds("[{id: one-token, step: 1}]");
        // One token a step, however the array was made (`y.reshape(&[1, 1])` or
        // `lm::tokens_array(&[last])`): the model sees one position either way.
        assert_eq!(feed_problems(&rules, &[42], &[1, 1, 1]), []);
        // The whole sequence again at every step: refused at the first step, saying how many.
        assert_eq!(
            feed_problems(&rules, &[42], &[43, 44, 45]),
            [FeedProblem::Step {
                rule: &rules[0],
                step: 1,
                positions: 43,
                limit: 1
            }]
        );
        // The last two tokens from the third step on.
        assert_eq!(
            feed_problems(&rules, &[42], &[1, 1, 2, 2]),
            [FeedProblem::Step {
                rule: &rules[0],
                step: 3,
                positions: 2,
                limit: 1
            }]
        );
    }

    #[test]
    fn a_change_that_leaves_the_bytes_as_they_were_is_not_the_lessons_change() {
        let moves: Vec<Move> =
            serde_yaml::from_str("[{id: fewer-bytes, metric: weight_mb_per_token, expect: lower}]")
                .unwrap();
        let measured = |before: f64, after: f64| {
            move |_: Metric, yours: bool| Some(if yours { after } else { before })
        };
        // `Layout::Dense` on the CPU, where the model already loads dense: the same bytes.
        assert_eq!(
            unmoved(&moves, measured(538.06, 538.06)),
            [(&moves[0], Some(538.06), Some(538.06))]
        );
        // More bytes (8 bits over a model stored in 4) is the other way.
        assert_eq!(unmoved(&moves, measured(101.0, 150.0)).len(), 1);
        // q4 over dense: fewer.
        assert_eq!(unmoved(&moves, measured(538.06, 101.0)), []);
        // Not reported: not taken on trust.
        assert_eq!(unmoved(&moves, |_, _| None).len(), 1);
    }

    fn spec(shows_on: &str, at_least: Option<f64>) -> LessonSpec {
        let at_least = at_least.map_or(String::new(), |r| format!("  at_least: {r}\n"));
        let yaml = format!(
            "minutes: 1\nxp: 1\ntags: []\nshows_on: {shows_on}\nexercise: e.rs\nsolution: s.rs\n\
             measure:\n  metric: decode_tok_s\n  expect: higher\n{at_least}"
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    #[test]
    fn the_effect_must_show_where_the_lesson_says_it_shows() {
        let gpu_only = spec("[gpu]", Some(1.1));
        assert_eq!(effect(&gpu_only, Backend::Cuda, Some(1.1)), Effect::Shown);
        assert_eq!(
            effect(&gpu_only, Backend::Cuda, Some(1.09)),
            Effect::Missing {
                ratio: Some(1.09),
                at_least: 1.1
            }
        );
        assert_eq!(
            effect(&gpu_only, Backend::Cuda, None),
            Effect::Missing {
                ratio: None,
                at_least: 1.1
            }
        );
        // Elsewhere a slower edit passes, and the learner is told where it shows.
        assert_eq!(
            effect(&gpu_only, Backend::Cpu, Some(0.5)),
            Effect::Elsewhere(vec![BackendKind::Gpu])
        );
        assert_eq!(
            effect(&spec("[]", Some(1.1)), Backend::Cpu, Some(0.5)),
            Effect::Shown
        );
        assert_eq!(
            effect(&spec("[cpu]", None), Backend::Cpu, Some(0.5)),
            Effect::Shown
        );
    }

    use crate::progress::{Measurement, Submission};

    /// A lesson with a fixed question (`term`) and a measured one (`shows`).
    fn quiz_lesson() -> Lesson {
        let spec: LessonSpec = serde_yaml::from_str(
            "minutes: 1\nxp: 40\ntags: []\nexercise: e.rs\nsolution: s.rs\n\
             measure: {metric: decode_tok_s, expect: higher}\n\
             quiz:\n  - {id: term, choices: [fixed, bytes], answer: fixed}\n  \
             - {id: shows, choices: [\"yes\", \"no\"], answer: {measured: effect_shows}}\n",
        )
        .unwrap();
        let text = "---\nid: q\nlang: en\ntitle: Q\nquiz:\n  term:\n    question: Which?\n    \
                    choices: {fixed: f, bytes: b}\n    wrong: Not bytes.\n  shows:\n    \
                    question: Shows?\n    choices: {\"yes\": y, \"no\": n}\n    wrong: Look.\n\
                    ---\n\nIntro.\n\n## Exercise {#exercise}\n\n```rust exercise=main\nfn main() {}\n```\n\n\
                    ## Hint {#hint}\n\nH.\n";
        Lesson::parse(std::path::Path::new("q/en.md"), text.into(), spec).unwrap()
    }

    fn given(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(q, c)| ((*q).to_owned(), (*c).to_owned()))
            .collect()
    }

    fn code() -> CodeRef {
        CodeRef::of(CodeKind::Exercise, b"mine")
    }

    /// `record` after a submission of `code()` whose checks passed, measured ×`ratio`.
    fn measured(mut record: LessonRecord, ratio: f64) -> LessonRecord {
        record.submissions.push(Submission {
            at: Timestamp::now(),
            code: Some(code()),
            passed: false,
            checks_passed: true,
            lang: crate::course::Lang::En,
            measurement: Some(Measurement {
                metric: "decode_tok_s".into(),
                before: vec![10.0],
                after: vec![10.0 * ratio],
            }),
        });
        record
    }

    fn card(answers: &[(&str, &str)]) -> Card {
        Card {
            at: Timestamp::now(),
            metric: None,
            numbers: Default::default(),
            answers: given(answers).into_iter().collect(),
        }
    }

    #[test]
    fn a_prediction_is_recorded_before_the_measurement_and_judged_by_it() {
        let lesson = quiz_lesson();
        let mut record = LessonRecord::default();
        let at = Timestamp::now();
        let predicted = predictions(
            &lesson,
            &record,
            &given(&[("shows", "yes"), ("term", "fixed")]),
            at,
        )
        .unwrap();
        assert_eq!(predicted.len(), 2);
        // The measured answer waits for its measurement; the fixed one is judged now.
        assert_eq!(predicted[0].right, None);
        assert!(predicted[0].predicted && predicted[0].measured);
        assert_eq!(predicted[1].right, Some(true));
        record.attempts = predicted;
        assert!(
            judge_waiting(&lesson, &record, &code()).is_empty(),
            "nothing measured yet"
        );
        // The same command again (after a refused submission) records nothing new.
        assert_eq!(
            predictions(&lesson, &record, &given(&[("shows", "yes")]), at),
            Ok(vec![])
        );
        // The measurement judges it: ×1.3 shows, ×1.02 does not.
        let shown = measured(record.clone(), 1.3);
        assert_eq!(judge_waiting(&lesson, &shown, &code()), vec![(0, true)]);
        let not_shown = measured(record.clone(), 1.02);
        assert_eq!(
            judge_waiting(&lesson, &not_shown, &code()),
            vec![(0, false)]
        );
        // Once measured, a measured question can no longer be predicted, and an answered
        // one can have no other first answer.
        let problems = predictions(
            &lesson,
            &measured(LessonRecord::default(), 1.3),
            &given(&[("shows", "yes"), ("term", "fixed")]),
            at,
        )
        .unwrap_err();
        assert_eq!(
            problems,
            [PredictionProblem::AlreadyMeasured("shows".into())]
        );
        let problems = predictions(&lesson, &record, &given(&[("shows", "no")]), at).unwrap_err();
        assert_eq!(
            problems,
            [PredictionProblem::AlreadyAnswered {
                question: "shows".into(),
                choice: "yes".into()
            }]
        );
        let problems = predictions(
            &lesson,
            &LessonRecord::default(),
            &given(&[
                ("term", "fixed"),
                ("term", "bytes"),
                ("terms", "x"),
                ("shows", "maybe"),
            ]),
            at,
        )
        .unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
    }

    #[test]
    fn a_refused_card_names_wrong_answers_only_when_nothing_else_is_wrong() {
        let lesson = quiz_lesson();
        let record = measured(LessonRecord::default(), 1.3);
        let problems = |record: &LessonRecord, answers: &[(&str, &str)]| -> Vec<String> {
            card_problems(&lesson, record, &code(), &card(answers))
                .iter()
                .map(|p| match p {
                    CardProblem::Wrong(q) => format!("wrong {q}"),
                    CardProblem::MissingAnswer(q) => format!("missing {q}"),
                    CardProblem::NotMeasured => "not measured".into(),
                    _ => "other".into(),
                })
                .collect()
        };
        assert_eq!(
            problems(&record, &[("term", "bytes"), ("shows", "yes")]),
            ["wrong term"]
        );
        assert!(problems(&record, &[("term", "fixed"), ("shows", "yes")]).is_empty());
        // A missing answer, or one that needs a measurement: the wrong one is not named.
        assert_eq!(problems(&record, &[("term", "bytes")]), ["missing shows"]);
        assert_eq!(
            problems(
                &LessonRecord::default(),
                &[("term", "bytes"), ("shows", "yes")]
            ),
            ["not measured"]
        );
        // Each answer becomes an attempt, judged; a measured one is not a prediction.
        let attempts = card_attempts(
            &lesson,
            &record,
            &code(),
            &card(&[("term", "bytes"), ("shows", "yes")]),
            Timestamp::now(),
        );
        let verdicts: Vec<_> = attempts
            .iter()
            .map(|a| (a.question.as_str(), a.right, a.predicted, a.measured))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("term", Some(false), false, false),
                ("shows", Some(true), false, true)
            ]
        );
    }

    #[test]
    fn the_first_try_bonus_is_a_share_of_the_lesson() {
        assert_eq!(first_try_bonus(100, 50), 50);
        assert_eq!(first_try_bonus(30, 50), 15);
        assert_eq!(first_try_bonus(15, 50), 8);
        assert_eq!(first_try_bonus(40, 0), 0);
    }
}
