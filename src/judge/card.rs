//! The card and the quiz, judged in one place with `claims` (a claimed number against
//! what quest measured, a quiz answer against the lesson's): what is wrong with a card,
//! the answers and predictions to record, the first-try bonus.

use super::claims::{check_claim, correct_answer, ClaimRefused, Evidence};
use crate::course::spec::{Answer, CardNumber, Question};
use crate::course::{Lesson, Metric};
use crate::progress::{Attempt, Card, CodeKind, CodeRef, LessonRecord, Timestamp};
use crate::stats::median;

/// What is wrong with a card for this code.
pub enum CardProblem {
    /// A number no run of that code backs.
    Unbacked(ClaimRefused),
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
