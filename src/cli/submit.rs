//! `quest submit` and `quest card`: the lesson's payoff, read from its data. A
//! submission passes its checks when the code keeps the lesson's rules (read from the
//! syntax tree), writes the solution's tokens (as `tokens:` asks), and has been
//! measured beside the lesson's starting code (interleaved, medians) — showing the
//! effect where the lesson says it shows. The checks are [`quest::judge`]'s: here
//! they are run in order, each outcome said ([`super::checks`]), and the refusal or what
//! was measured recorded. The card then carries numbers quest measured and the quiz's
//! right answers; with both, the lesson is complete.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use quest::course::spec::CardNumber;
use quest::course::Lesson;
use quest::judge::{self, CardProblem, Judge, Judged, PredictionProblem, Refused, Subject};
use quest::lab::{Report, Values};
use quest::progress::{
    Attempt, Card, CodeKind, CodeRef, LessonRecord, Measurement, Run, State, Submission, Timestamp,
};
use quest::stats::median;

use super::checks::{say_passed, say_progress, say_refused};
use super::learner::{current_exercise, run_record, Learner};
use super::run::request;
use super::said::{explain_check_error, number};
use super::{Ctx, RunArgs};

/// The award key for finishing a lesson (its XP is the lesson's `xp`).
fn lesson_award(id: &str) -> String {
    format!("lesson:{id}:complete")
}

/// The award key for finishing a lesson with every first answer right.
fn first_try_award(id: &str) -> String {
    format!("lesson:{id}:first-try")
}

pub struct SubmitOptions {
    pub run: RunArgs,
    /// Interleaved rounds; the lesson's own number when `None`.
    pub rounds: Option<usize>,
    /// `--predict QUESTION=CHOICE`: quiz answers given before the measurement.
    pub predictions: Vec<(String, String)>,
}

pub fn submit(ctx: &Ctx, lesson: &Lesson, options: &SubmitOptions) -> Result<()> {
    let id = lesson.meta.id.as_str();
    if lesson.spec.exercise.is_none() {
        bail!(ctx.ui_with(
            "submit_no_exercise",
            &[("id", id), ("card", &card_command(lesson, None))]
        ));
    }
    let (path, source, code) = current_exercise(lesson)?;
    let mut learner = Learner::open(ctx)?;

    // Predictions, recorded before anything runs.
    if !options.predictions.is_empty() {
        record_predictions(ctx, &mut learner, lesson, &options.predictions)?;
    }
    // The checks, each said as it ends; a refusal is recorded and said here.
    let subject = Subject::new(path, source, code.clone());
    let judged = match judge(ctx, lesson, options, subject)? {
        Ok(judged) => judged,
        Err(refusal) => return refuse(ctx, &mut learner, id, code, refusal),
    };
    // Everything measured recorded, then the card.
    record_and_card(ctx, &mut learner, lesson, options, code, judged)
}

/// The lesson's checks in order ([`judge::checks`]), each run by the runner and
/// said as it ends ([`super::checks`]), up to the first that refuses: what they found
/// for the record, or the refusal.
fn judge(
    ctx: &Ctx,
    lesson: &Lesson,
    options: &SubmitOptions,
    mut subject: Subject,
) -> Result<std::result::Result<Judged, Refusal>> {
    let request = request(lesson, &options.run);
    let backend = quest::device::Backend::detect();
    let mut judge = Judge::new(lesson, request, backend)
        .with_rounds(options.rounds)
        .diagnosing();
    for check in judge::checks(&lesson.spec) {
        let outcome = judge
            .run(check, &mut subject, &mut |progress| {
                say_progress(ctx, progress)
            })
            .map_err(|e| explain_check_error(ctx, e))?;
        match outcome {
            judge::Outcome::Passed(passed) => say_passed(ctx, lesson, &passed),
            judge::Outcome::Refused(refused) => {
                let why = say_refused(ctx, lesson, &refused);
                return Ok(Err(Refusal::of(ctx, &subject.code, why, refused)));
            }
        }
    }
    Ok(Ok(subject.judged()))
}

/// Why a check refused the submission, and what the refusal records with it.
struct Refusal {
    /// What the learner reads last.
    why: String,
    /// Runs recorded before the failed submission: the measured rounds, or the run whose
    /// values were wrong.
    runs: Vec<Run>,
    /// What was measured, recorded with the failed submission.
    measured: Option<Measurement>,
}

impl Refusal {
    /// `refused`, said `why`, with the runs it carries as records of `code`: the run
    /// whose values were wrong (with quest's values), or every measured round.
    fn of(ctx: &Ctx, code: &CodeRef, why: String, refused: Refused) -> Self {
        let (runs, measured) = match refused {
            Refused::Values { compared, run } => {
                let mut run = run_record(&run, code.clone(), ctx.lang);
                run.metrics.extend(compared.quest.0);
                (vec![run], None)
            }
            Refused::Unmoved { rounds, .. } | Refused::EffectMissing { rounds, .. } => {
                (run_records(ctx, &rounds.reports, None), Some(rounds.taken))
            }
            _ => (Vec::new(), None),
        };
        Refusal {
            why,
            runs,
            measured,
        }
    }
}

/// Records everything measured (quest's values with the run they came from) and the
/// submission's checks passed, judges the predictions waiting, then looks at the card:
/// the lesson is finished when it stands, else the learner is shown how to fill it.
fn record_and_card(
    ctx: &Ctx,
    learner: &mut Learner,
    lesson: &Lesson,
    options: &SubmitOptions,
    code: CodeRef,
    judged: Judged,
) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let Judged {
        reports,
        measurement,
        quest_values,
    } = judged;
    record_runs(ctx, learner, id, &reports, quest_values.as_ref())?;
    record_submission(
        ctx,
        learner,
        id,
        Some(code.clone()),
        Ended::ChecksPassed,
        measurement.clone(),
    )?;
    judge_predictions(ctx, learner, lesson, &code, !options.predictions.is_empty())?;
    let card_ok = {
        let state = learner.store.state();
        let record = state.lesson(id).cloned().unwrap_or_default();
        record
            .card
            .as_ref()
            .is_some_and(|card| judge::card_problems(lesson, &record, &code, card).is_empty())
    };
    if card_ok {
        record_submission(ctx, learner, id, Some(code), Ended::Passed, None)?;
        return finish(ctx, learner, lesson);
    }
    println!("\n{}", ctx.ui("submit_fill_card"));
    print_quiz(ctx, lesson);
    println!("  {}", card_command(lesson, measurement.as_ref()));
    Ok(())
}

/// `quest card <id> --before X --after Y --answer q=<a|b>` as this lesson needs it,
/// with the medians of `measurement` filled in when known.
fn card_command(lesson: &Lesson, measurement: Option<&Measurement>) -> String {
    let mut command = format!("quest card {}", lesson.meta.id);
    if let Some(card) = &lesson.spec.card {
        for which in &card.numbers {
            let value = measurement.map(|m| match which {
                CardNumber::Before => median(&m.before),
                CardNumber::After => median(&m.after),
            });
            let shown = value.map_or_else(|| "<number>".to_owned(), number);
            command.push_str(&format!(" --{} {shown}", which.key()));
        }
    }
    for question in &lesson.spec.quiz {
        command.push_str(&format!(
            " --answer {}=<{}>",
            question.id,
            question.choices.join("|")
        ));
    }
    command
}

/// Each question, with what its choices mean.
fn print_quiz(ctx: &Ctx, lesson: &Lesson) {
    for question in &lesson.spec.quiz {
        let Some(text) = lesson.meta.quiz.get(&question.id) else {
            continue;
        };
        println!(
            "  {} ({}): {}",
            ctx.ui("question"),
            question.id,
            text.question
        );
        for choice in &question.choices {
            let meaning = text.choices.get(choice).map_or("", String::as_str);
            println!("    {choice}: {meaning}");
        }
    }
}

/// Records each report as a run; quest's own `values`, when given, go with every run
/// that reported values (there is one: a values lesson is not measured interleaved).
fn record_runs(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    reports: &[(Report, CodeRef)],
    values: Option<&Values>,
) -> Result<()> {
    learner.update(ctx, |state| {
        let record = state.lesson_mut(id);
        record.runs.extend(run_records(ctx, reports, values));
        Ok(())
    })
}

/// Each report as a run, with quest's own `values` where it reported values.
fn run_records(ctx: &Ctx, reports: &[(Report, CodeRef)], values: Option<&Values>) -> Vec<Run> {
    reports
        .iter()
        .map(|(report, code)| {
            let mut run = run_record(report, code.clone(), ctx.lang);
            if let (Some(values), false) = (values, report.values.is_empty()) {
                run.metrics.extend(values.0.clone());
            }
            run
        })
        .collect()
}

/// How a submission ended, as the progress file records it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// A check refused it.
    Failed,
    /// Its checks passed; the card is still to be filled.
    ChecksPassed,
    /// Its checks passed and its card stands: the lesson is complete.
    Passed,
}

/// A submission refused: the runs the refusal carries are recorded, then the submission
/// as failed (with what was measured, if anything), and the refusal says why.
fn refuse(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    code: CodeRef,
    refusal: Refusal,
) -> Result<()> {
    let Refusal {
        why,
        runs,
        measured,
    } = refusal;
    if !runs.is_empty() {
        learner.update(ctx, |state| {
            state.lesson_mut(id).runs.extend(runs);
            Ok(())
        })?;
    }
    record_submission(ctx, learner, id, Some(code), Ended::Failed, measured)?;
    bail!(why)
}

fn record_submission(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    code: Option<CodeRef>,
    ended: Ended,
    measurement: Option<Measurement>,
) -> Result<()> {
    learner.update(ctx, |state| {
        let submission = Submission {
            at: Timestamp::now(),
            code,
            passed: ended == Ended::Passed,
            checks_passed: ended != Ended::Failed,
            lang: ctx.lang,
            measurement,
        };
        state.lesson_mut(id).submissions.push(submission);
        Ok(())
    })
}

/// Awards the lesson itself (once, by key), and its first-try bonus when every first
/// answer was right, and says so.
fn finish(ctx: &Ctx, learner: &mut Learner, lesson: &Lesson) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let xp = lesson.spec.xp;
    let bonus = judge::first_try_bonus(xp, ctx.course.first_try_percent);
    let (new, first_try, missed) = learner.update(ctx, |state| {
        let now = Timestamp::now();
        let new = state.award(&lesson_award(id), xp, now);
        let record = state.lesson(id).cloned().unwrap_or_default();
        let missed: Vec<String> = record
            .not_right_first()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let first_try = record.right_first_time() && state.award(&first_try_award(id), bonus, now);
        Ok((new, first_try, missed))
    })?;
    if new {
        println!(
            "✓ {}",
            ctx.ui_with("lesson_complete", &[("id", id), ("xp", &xp.to_string())])
        );
    } else {
        println!(
            "✓ {}",
            ctx.ui_with("lesson_already_complete", &[("id", id)])
        );
    }
    if first_try {
        println!(
            "★ {}",
            ctx.ui_with("first_try_bonus", &[("xp", &bonus.to_string())])
        );
    } else if new && !missed.is_empty() {
        println!(
            "  {}",
            ctx.ui_with(
                "first_try_missed",
                &[
                    ("questions", &missed.join(", ")),
                    ("xp", &bonus.to_string())
                ]
            )
        );
    }
    Ok(())
}

/// Records `--predict`'s answers before anything is measured, or refuses them all,
/// saying why, with nothing run or recorded.
fn record_predictions(
    ctx: &Ctx,
    learner: &mut Learner,
    lesson: &Lesson,
    given: &[(String, String)],
) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let record = learner.lesson(id);
    match judge::predictions(lesson, &record, given, Timestamp::now()) {
        Ok(attempts) => {
            learner.update(ctx, |state| {
                state.lesson_mut(id).attempts.extend(attempts);
                Ok(())
            })?;
            let given: Vec<String> = given.iter().map(|(q, c)| format!("{q}={c}")).collect();
            println!(
                "{}",
                ctx.ui_with("predict_recorded", &[("predictions", &given.join(", "))])
            );
            Ok(())
        }
        Err(problems) => {
            for problem in &problems {
                println!("  {}", explain_prediction(ctx, lesson, &record, problem));
            }
            bail!(ctx.ui("predict_not_recorded").to_owned())
        }
    }
}

fn explain_prediction(
    ctx: &Ctx,
    lesson: &Lesson,
    record: &LessonRecord,
    problem: &PredictionProblem,
) -> String {
    let choices = |question: &str, sep: &str| {
        lesson
            .spec
            .question(question)
            .map(|q| q.choices.join(sep))
            .unwrap_or_default()
    };
    match problem {
        PredictionProblem::UnknownQuestion(question) => {
            let known: Vec<&str> = lesson.spec.quiz.iter().map(|q| q.id.as_str()).collect();
            ctx.ui_with(
                "card_unknown_question",
                &[("question", question), ("known", &known.join(", "))],
            )
        }
        PredictionProblem::BadChoice { question, choice } => ctx.ui_with(
            "card_bad_choice",
            &[
                ("question", question),
                ("choice", choice),
                ("choices", &choices(question, ", ")),
            ],
        ),
        PredictionProblem::Twice(question) => {
            ctx.ui_with("predict_twice", &[("question", question)])
        }
        PredictionProblem::AlreadyAnswered { question, choice } => {
            let at = record
                .first_attempt(question)
                .map_or_else(String::new, |first| first.at.to_string());
            ctx.ui_with(
                "predict_already_answered",
                &[("question", question), ("choice", choice), ("at", &at)],
            )
        }
        PredictionProblem::AlreadyMeasured(question) => ctx.ui_with(
            "predict_already_measured",
            &[("question", question), ("id", &lesson.meta.id)],
        ),
    }
}

/// Once `code` passed its checks: the predictions still waiting get the verdict of what
/// was just measured, and the learner sees every prediction's verdict when some were
/// judged now or `fresh` (given with this submission).
fn judge_predictions(
    ctx: &Ctx,
    learner: &mut Learner,
    lesson: &Lesson,
    code: &CodeRef,
    fresh: bool,
) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let judged: Vec<Attempt> = learner.update(ctx, |state| {
        let record = state.lesson_mut(id);
        let verdicts = judge::judge_waiting(lesson, record, code);
        Ok(verdicts
            .into_iter()
            .map(|(i, right)| {
                record.attempts[i].right = Some(right);
                record.attempts[i].clone()
            })
            .collect())
    })?;
    if judged.is_empty() && !fresh {
        return Ok(());
    }
    // Fixed answers were judged when predicted: shown now, with the measured ones.
    let state = learner.store.state();
    let shown: Vec<&Attempt> = state.lesson(id).map_or(Vec::new(), |record| {
        record
            .attempts
            .iter()
            .filter(|a| a.predicted && a.right.is_some())
            .collect()
    });
    if shown.is_empty() {
        return Ok(());
    }
    println!("{}", ctx.ui("predict_judged"));
    for attempt in shown {
        let said = format!("{}={}", attempt.question, attempt.choice);
        if attempt.right == Some(true) {
            println!("  ✓ {said}");
        } else {
            let why = lesson
                .meta
                .quiz
                .get(&attempt.question)
                .map_or("", |text| text.wrong.as_str());
            println!("  ✗ {said}: {why}");
        }
    }
    Ok(())
}

fn explain(ctx: &Ctx, lesson: &Lesson, problem: &CardProblem) -> String {
    let id = lesson.meta.id.as_str();
    match problem {
        CardProblem::Unbacked(r) => {
            let measured: Vec<String> = r.measured.iter().map(|&m| number(m)).collect();
            let measured = if measured.is_empty() {
                ctx.ui("card_nothing_measured").to_owned()
            } else {
                measured.join(", ")
            };
            let tolerance = lesson.spec.card.as_ref().map_or(0.0, |c| c.tolerance);
            let unit = lesson.spec.measure.as_ref().map_or("", |m| m.metric.unit());
            ctx.ui_with(
                "card_refused",
                &[
                    ("which", ctx.ui(&format!("card_{}", r.which))),
                    ("claimed", &format!("{} {unit}", number(r.claimed))),
                    ("measured", &measured),
                    ("tolerance", &format!("{:.0}", tolerance * 100.0)),
                ],
            )
        }
        CardProblem::MissingNumber(which) => ctx.ui_with("card_needs_number", &[("which", which)]),
        CardProblem::MissingAnswer(question) | CardProblem::UnknownQuestion(question) => {
            let choices = lesson
                .spec
                .question(question)
                .map(|q| q.choices.join("|"))
                .unwrap_or_default();
            let key = if matches!(problem, CardProblem::MissingAnswer(_)) {
                "card_needs_answer"
            } else {
                "card_unknown_question"
            };
            let known: Vec<&str> = lesson.spec.quiz.iter().map(|q| q.id.as_str()).collect();
            ctx.ui_with(
                key,
                &[
                    ("question", question),
                    ("choices", &choices),
                    ("known", &known.join(", ")),
                ],
            )
        }
        CardProblem::BadChoice { question, choice } => {
            let choices = lesson
                .spec
                .question(question)
                .map(|q| q.choices.join(", "))
                .unwrap_or_default();
            ctx.ui_with(
                "card_bad_choice",
                &[
                    ("question", question),
                    ("choice", choice),
                    ("choices", &choices),
                ],
            )
        }
        CardProblem::NotMeasured => ctx.ui_with("card_measure_first", &[("id", id)]),
        CardProblem::Wrong(question) => lesson
            .meta
            .quiz
            .get(question)
            .map_or_else(|| question.clone(), |text| text.wrong.clone()),
    }
}

/// The numbers and answers the learner gives `quest card`.
pub struct CardInput {
    pub numbers: BTreeMap<String, f64>,
    pub answers: BTreeMap<String, String>,
}

pub fn card(ctx: &Ctx, lesson: &Lesson, input: CardInput) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let code = match lesson.spec.exercise {
        Some(_) => Some(current_exercise(lesson)?.2),
        None => None,
    };
    let mut learner = Learner::open(ctx)?;
    let card = Card {
        at: Timestamp::now(),
        metric: lesson
            .spec
            .measure
            .as_ref()
            .map(|m| m.metric.key().to_owned()),
        numbers: input.numbers,
        answers: input.answers,
    };
    let record = learner.lesson(id);
    // A quiz-only lesson has no code: its answers depend on nothing measured.
    let judged_code = code
        .clone()
        .unwrap_or_else(|| CodeRef::of(CodeKind::Learner, b""));
    let problems = judge::card_problems(lesson, &record, &judged_code, &card);
    // Wrong answers are named only once nothing else is wrong: then every answer is
    // recorded, the wrong ones too, before the refusal says which.
    let judged = problems
        .iter()
        .all(|problem| matches!(problem, CardProblem::Wrong(_)));
    let attempts = judge::card_attempts(lesson, &record, &judged_code, &card, card.at);
    if !problems.is_empty() {
        if judged {
            learner.update(ctx, |state| {
                state.lesson_mut(id).attempts.extend(attempts);
                Ok(())
            })?;
        }
        for problem in &problems {
            println!("  {}", explain(ctx, lesson, problem));
        }
        if judged {
            println!("{}", ctx.ui("quiz_recorded_wrong"));
        }
        bail!(ctx.ui_with("card_not_saved", &[("id", id)]));
    }
    let checks_passed = learner.update(ctx, |state: &mut State| {
        let record = state.lesson_mut(id);
        record.attempts.extend(attempts);
        record.card = Some(card);
        Ok(match &code {
            Some(code) => record.passed_checks(code),
            None => true,
        })
    })?;
    println!("✓ {}", ctx.ui_with("card_saved", &[("id", id)]));
    if checks_passed {
        record_submission(ctx, &mut learner, id, code, Ended::Passed, None)?;
        finish(ctx, &mut learner, lesson)
    } else {
        println!("{}", ctx.ui_with("card_then_submit", &[("id", id)]));
        Ok(())
    }
}
