//! `quest submit` and `quest card`: the lesson's payoff, read from its data. A
//! submission passes its checks when the code keeps the lesson's rules (read from the
//! syntax tree), writes the solution's tokens (as `tokens:` asks), and has been
//! measured beside the lesson's starting code (interleaved, medians) — showing the
//! effect where the lesson says it shows. The card then carries numbers quest measured
//! and the quiz's right answers; with both, the lesson is complete.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};

use quest::check::card::{check_claim, correct_answer, Evidence, Refused};
use quest::check::rules::{self, Finding};
use quest::course::spec::{CardNumber, TokenCheck};
use quest::course::{Lesson, Metric};
use quest::lab::{Report, Values};
use quest::progress::{
    Card, CodeKind, CodeRef, LessonRecord, Measurement, State, Submission, Timestamp,
};
use quest::stats::median;

use super::learner::{current_exercise, run_record, solution_path, starting_code_file, Learner};
use super::run::{build, request, run_binary};
use super::{Ctx, RunArgs};

/// The award key for finishing a lesson (its XP is the lesson's `xp`).
fn lesson_award(id: &str) -> String {
    format!("lesson:{id}:complete")
}

pub struct SubmitOptions {
    pub run: RunArgs,
    /// Interleaved rounds; the lesson's own number when `None`.
    pub rounds: Option<usize>,
}

/// The text of a finding, in the learner's language, with where it is.
pub fn finding_text(ctx: &Ctx, lesson: &Lesson, finding: &Finding) -> String {
    let text = match finding.rule.as_str() {
        rules::SYNTAX => ctx.ui_with("check_syntax", &[("call", &finding.call)]),
        rules::NO_REGION => ctx.ui_with("check_no_region", &[("call", &finding.call)]),
        rule => {
            let template = lesson.meta.messages.get(rule).map_or(rule, String::as_str);
            quest::course::fill_placeholders(template, &[("call", &finding.call)])
        }
    };
    let via = finding.via.map_or_else(String::new, |line| {
        format!(
            " {}",
            ctx.ui_with("check_via", &[("line", &line.to_string())])
        )
    });
    let file = lesson
        .spec
        .exercise
        .as_deref()
        .unwrap_or(Path::new("exercise"))
        .display();
    format!("{file}:{}: {text}{via}", finding.line)
}

pub fn submit(ctx: &Ctx, lesson: &Lesson, options: &SubmitOptions) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let spec = &lesson.spec;
    if spec.exercise.is_none() {
        bail!(ctx.ui_with(
            "submit_no_exercise",
            &[("id", id), ("card", &card_command(lesson, None))]
        ));
    }
    let (path, source, code) = current_exercise(lesson)?;
    let mut learner = Learner::open(ctx)?;

    // 1. The code, against the lesson's rules.
    println!("{}", ctx.ui("submit_checking_code"));
    let findings = rules::check(&String::from_utf8_lossy(&source), &spec.rules);
    for finding in &findings {
        println!("  {}", finding_text(ctx, lesson, finding));
    }
    if !findings.is_empty() {
        record_submission(ctx, &mut learner, id, Some(code), false, false, None)?;
        bail!(ctx.ui("submit_code_failed").to_owned());
    }
    println!("  ✓ {}", ctx.ui("submit_code_ok"));

    // 2. Build the learner's code, and what it is compared with: the solution for the
    // tokens, the starting code for the measurement.
    let (starting, original_code) = starting_code_file(lesson)?;
    let yours = build(ctx, &path, true)?;
    let request = request(lesson, &options.run);

    // 3. The behaviour: the solution's greedy tokens.
    let reference = match spec.tokens {
        TokenCheck::None => None,
        _ => Some(run_binary(
            ctx,
            &build(ctx, &solution_path(lesson)?, true)?,
            &request,
        )?),
    };
    let first_run = run_binary(ctx, &yours, &request)?;
    if let Some(batch) = spec.batch {
        if first_run.batch != batch {
            println!(
                "  {}",
                ctx.ui_with(
                    "submit_batch_differs",
                    &[
                        ("got", &first_run.batch.to_string()),
                        ("batch", &batch.to_string())
                    ]
                )
            );
            record_submission(ctx, &mut learner, id, Some(code), false, false, None)?;
            bail!(ctx.ui("submit_batch_failed").to_owned());
        }
    }
    let compared = match (spec.tokens, &reference) {
        (TokenCheck::Exact, Some(reference)) => {
            Some(reference.tokens.len().max(first_run.tokens.len()))
        }
        (TokenCheck::First(n), _) => Some(n),
        _ => None,
    };
    if let (Some(n), Some(reference)) = (compared, &reference) {
        println!("{}", ctx.ui("submit_checking_tokens"));
        let take = |tokens: &[u32]| tokens.iter().take(n).copied().collect::<Vec<_>>();
        let (expected, got) = (take(&reference.tokens), take(&first_run.tokens));
        if let Some(at) =
            (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i))
        {
            println!(
                "  {}",
                ctx.ui_with("submit_tokens_differ", &[("at", &at.to_string())])
            );
            println!(
                "    {}: {}",
                ctx.ui("submit_expected"),
                reference.text.trim()
            );
            println!("    {}: {}", ctx.ui("submit_got"), first_run.text.trim());
            record_submission(ctx, &mut learner, id, Some(code), false, false, None)?;
            // A lesson may say why its tokens must agree (`messages: tokens:`).
            let why = lesson
                .meta
                .messages
                .get(quest::course::TOKENS_MESSAGE)
                .map_or_else(|| ctx.ui("submit_behaviour_failed"), String::as_str);
            bail!(why.to_owned());
        }
        println!(
            "  ✓ {}",
            ctx.ui_with("submit_tokens_ok", &[("n", &got.len().to_string())])
        );
    }

    // 3b. The values it computed, against quest's own computation from its inputs.
    let mut quest_values = None;
    if let Some(checked) = super::values::check(ctx, lesson, &first_run)? {
        let ok = checked.ok;
        quest_values = Some(checked.quest);
        if !ok {
            let mut run = run_record(&first_run, code.clone(), ctx.lang);
            run.metrics.extend(quest_values.unwrap_or_default().0);
            learner.update(ctx, |state| {
                state.lesson_mut(id).runs.push(run);
                Ok(())
            })?;
            record_submission(ctx, &mut learner, id, Some(code), false, false, None)?;
            bail!(ctx.ui("values_failed").to_owned());
        }
        println!("  ✓ {}", ctx.ui("values_ok"));
    }

    // 4. The measurement: starting code and yours, interleaved, medians.
    let mut measurement = None;
    let mut reports: Vec<(Report, CodeRef)> = Vec::new();
    if let Some(measure) = &spec.measure {
        let before_binary = build(ctx, &starting, true)?;
        let metric = measure.metric;
        let rounds = options.rounds.unwrap_or(measure.rounds).max(1);
        println!(
            "{}",
            ctx.ui_with(
                "submit_measuring",
                &[
                    ("rounds", &rounds.to_string()),
                    ("metric", &metric_name(ctx, metric))
                ]
            )
        );
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let b = run_binary(ctx, &before_binary, &request)?;
            let a = run_binary(ctx, &yours, &request)?;
            let value = |r: &Report| measured_value(ctx, r, metric);
            let (vb, va) = (value(&b)?, value(&a)?);
            println!(
                "  {} {}: {} / {} {}",
                ctx.ui("round"),
                round + 1,
                number(vb),
                number(va),
                metric.unit()
            );
            before.push(vb);
            after.push(va);
            reports.push((b, original_code.clone()));
            reports.push((a, code.clone()));
        }
        let (median_before, median_after) = (median(&before), median(&after));
        let improvement = metric.improvement(median_before, median_after);
        println!(
            "  {}: {} → {} {} (×{:.2})",
            ctx.ui("submit_medians"),
            number(median_before),
            number(median_after),
            metric.unit(),
            improvement.unwrap_or(f64::NAN)
        );
        for &also in &measure.also {
            let of = |code: &CodeRef| {
                let values: Vec<f64> = reports
                    .iter()
                    .filter(|(_, c)| c == code)
                    .filter_map(|(r, _)| r.metric(also))
                    .collect();
                median(&values)
            };
            println!(
                "  {}: {:.2} → {:.2} {}",
                metric_name(ctx, also),
                of(&original_code),
                of(&code),
                also.unit()
            );
        }
        let taken = Measurement {
            metric: metric.key().into(),
            before,
            after,
        };
        let backend = first_run.backend.as_str();
        if spec.shows_on_backend(backend) {
            if let Some(at_least) = measure.at_least {
                if improvement.is_none_or(|ratio| ratio < at_least) {
                    let ratio = format!("{:.2}", improvement.unwrap_or(0.0));
                    println!(
                        "  {}",
                        ctx.ui_with(
                            "submit_effect_missing",
                            &[("ratio", &ratio), ("at_least", &format!("{at_least:.2}"))]
                        )
                    );
                    record_runs(ctx, &mut learner, id, &reports, None)?;
                    record_submission(
                        ctx,
                        &mut learner,
                        id,
                        Some(code),
                        false,
                        false,
                        Some(taken),
                    )?;
                    bail!(ctx.ui("submit_measure_failed").to_owned());
                }
            }
        } else if !spec.shows_on.is_empty() {
            // A lesson that expects its effect nowhere (`shows_on: []`) reports what it
            // measured and says nothing about elsewhere.
            let expected: Vec<String> = spec
                .shows_on
                .iter()
                .map(|kind| {
                    serde_json::to_value(kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                })
                .collect();
            println!(
                "  {}",
                ctx.ui_with(
                    "submit_effect_elsewhere",
                    &[("backend", backend), ("expected", &expected.join(", "))]
                )
            );
        }
        measurement = Some(taken);
    } else {
        reports.push((first_run, code.clone()));
    }

    // 5. Record everything measured (quest's values with the run they came from), then
    // look at the card.
    record_runs(ctx, &mut learner, id, &reports, quest_values.as_ref())?;
    record_submission(
        ctx,
        &mut learner,
        id,
        Some(code.clone()),
        true,
        false,
        measurement.clone(),
    )?;
    let card_ok = {
        let state = learner.store.state();
        let record = state.lesson(id).cloned().unwrap_or_default();
        record
            .card
            .as_ref()
            .is_some_and(|card| card_problems(lesson, &record, &code, card).is_empty())
    };
    if card_ok {
        record_submission(ctx, &mut learner, id, Some(code), true, true, None)?;
        return finish(ctx, &mut learner, lesson);
    }
    println!("\n{}", ctx.ui("submit_fill_card"));
    print_quiz(ctx, lesson);
    println!("  {}", card_command(lesson, measurement.as_ref()));
    Ok(())
}

/// The value of `metric` in a report, or a message saying how to make the exercise
/// report it.
fn measured_value(ctx: &Ctx, report: &Report, metric: Metric) -> Result<f64> {
    report.metric(metric).ok_or_else(|| {
        anyhow::anyhow!(ctx.ui_with("metric_missing", &[("metric", &metric_name(ctx, metric))]))
    })
}

/// A metric's name in the learner's language.
pub fn metric_name(ctx: &Ctx, metric: Metric) -> String {
    ctx.ui(&format!("metric_{}", metric.key())).to_owned()
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

/// A measured number with enough digits to stay within a card's tolerance of itself
/// (0.0042 ms would print as 0.00 with two decimals).
pub fn number(value: f64) -> String {
    let digits = if value.abs() >= 10.0 || value == 0.0 {
        2
    } else {
        (3.0 - value.abs().log10().floor()) as usize
    };
    format!("{value:.digits$}")
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
        record.runs.extend(reports.iter().map(|(report, code)| {
            let mut run = run_record(report, code.clone(), ctx.lang);
            if let (Some(values), false) = (values, report.values.is_empty()) {
                run.metrics.extend(values.0.clone());
            }
            run
        }));
        Ok(())
    })
}

fn record_submission(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    code: Option<CodeRef>,
    checks_passed: bool,
    passed: bool,
    measurement: Option<Measurement>,
) -> Result<()> {
    learner.update(ctx, |state| {
        let submission = Submission {
            at: Timestamp::now(),
            code,
            passed,
            checks_passed,
            lang: ctx.lang,
            measurement,
        };
        state.lesson_mut(id).submissions.push(submission);
        Ok(())
    })
}

/// Awards the lesson itself (once, by key) and says so.
fn finish(ctx: &Ctx, learner: &mut Learner, lesson: &Lesson) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let xp = lesson.spec.xp;
    let new = learner.update(ctx, |state| {
        Ok(state.award(&lesson_award(id), xp, Timestamp::now()))
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
    Ok(())
}

/// What is wrong with a card for this code.
enum CardProblem {
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

/// Everything wrong with `card` for lesson `lesson` and the learner's `code`.
fn card_problems(
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
        match correct_answer(question, &evidence(record, code)) {
            None => problems.push(CardProblem::NotMeasured),
            Some(right) if &right != answer => {
                problems.push(CardProblem::Wrong(question.id.clone()))
            }
            Some(_) => {}
        }
    }
    problems
}

/// What quest measured for `code`: its improvement in the interleaved measurement, and
/// the weight bytes per token of the latest recorded runs of the baseline and of it, and
/// quest's own values from its latest checked run.
fn evidence<'a>(record: &'a LessonRecord, code: &CodeRef) -> Evidence<'a> {
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
    let record = learner
        .store
        .state()
        .lesson(id)
        .cloned()
        .unwrap_or_default();
    // A quiz-only lesson has no code: its answers depend on nothing measured.
    let problems = card_problems(
        lesson,
        &record,
        code.as_ref()
            .unwrap_or(&CodeRef::of(CodeKind::Learner, b"")),
        &card,
    );
    if !problems.is_empty() {
        for problem in &problems {
            println!("  {}", explain(ctx, lesson, problem));
        }
        bail!(ctx.ui_with("card_not_saved", &[("id", id)]));
    }
    let checks_passed = learner.update(ctx, |state: &mut State| {
        let record = state.lesson_mut(id);
        record.card = Some(card);
        Ok(match &code {
            Some(code) => record.passed_checks(code),
            None => true,
        })
    })?;
    println!("✓ {}", ctx.ui_with("card_saved", &[("id", id)]));
    if checks_passed {
        record_submission(ctx, &mut learner, id, code, true, true, None)?;
        finish(ctx, &mut learner, lesson)
    } else {
        println!("{}", ctx.ui_with("card_then_submit", &[("id", id)]));
        Ok(())
    }
}
