//! `quest submit` and `quest card`: the lesson's payoff, read from its data. A
//! submission passes its checks when the code keeps the lesson's rules (read from the
//! syntax tree), writes the solution's tokens (as `tokens:` asks), and has been
//! measured beside the lesson's starting code (interleaved, medians) — showing the
//! effect where the lesson says it shows. The card then carries numbers quest measured
//! and the quiz's right answers; with both, the lesson is complete.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use quest::check::rules::{self, Finding};
use quest::course::spec::{CardNumber, FeedRule, Measure};
use quest::course::{Lesson, Metric};
use quest::grade::{self, CardProblem, Effect, FeedProblem, PredictionProblem};
use quest::lab::runner::RunRequest;
use quest::lab::{Report, Values};
use quest::progress::{
    Attempt, Card, CodeKind, CodeRef, LessonRecord, Measurement, Run, State, Submission, Timestamp,
};
use quest::stats::median;

use super::learner::{current_exercise, run_record, solution_path, starting_code_file, Learner};
use super::run::{build, request, run_binary};
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

/// A step of the submission: passed, with what it found for the steps after it, or
/// refused. No step refuses by itself: [`submit`] turns the refusal into the one
/// [`refuse`], which records it.
enum Step<T = ()> {
    Passed(T),
    Refused(Refusal),
}

/// Why a step refused the submission, and what the refusal records with it.
struct Refusal {
    /// What the learner reads last.
    why: String,
    /// Runs recorded before the failed submission: the measured rounds, or the run whose
    /// values were wrong.
    runs: Vec<Run>,
    /// What was measured, recorded with the failed submission.
    measured: Option<Measurement>,
}

impl<T> Step<T> {
    /// Refused for `why`, with nothing run or measured to record.
    fn refused(why: impl Into<String>) -> Self {
        Step::Refused(Refusal {
            why: why.into(),
            runs: Vec::new(),
            measured: None,
        })
    }

    /// What passed, turned by `f`; a refusal as it was.
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Passed(value) => Step::Passed(f(value)),
            Step::Refused(refusal) => Step::Refused(refusal),
        }
    }
}

/// A step's `Result<Step<T>>`: its `T` when it passed; else the pipeline stops there,
/// handing the refusal on.
macro_rules! passed {
    ($step:expr) => {
        match $step? {
            Step::Passed(value) => value,
            Step::Refused(refusal) => return Ok(Step::Refused(refusal)),
        }
    };
}

/// What a passed logits check hands the token check: quest's own greedy tokens (those the
/// learner's model was fed) and the steps where the two picked apart within the
/// tolerance ([`grade::logits_compared`]'s near ties).
pub(crate) struct LogitsPassed {
    quest_tokens: Vec<u32>,
    near_ties: Vec<usize>,
}

/// The piece's logits in the model, where the lesson asks (`logits:`), within the
/// tolerance of the float type this backend computes in ([`compare_logits`]).
fn check_logits(ctx: &Ctx, lesson: &Lesson, built: &Built) -> Result<Step<Option<LogitsPassed>>> {
    let Some(check) = lesson.spec.logits else {
        return Ok(Step::Passed(None));
    };
    let dtype = built.backend.float_dtype();
    let tolerance = check.tolerance_in(dtype);
    if !check.measured_in(dtype) {
        // Said before the check, so that a refusal by float16's rounding is read as such.
        println!(
            "  {}",
            ctx.ui_with(
                "submit_logits_unmeasured",
                &[("tolerance", &format!("{tolerance:.0e}"))]
            )
        );
    }
    Ok(compare_logits(ctx, lesson, &built.yours, &built.request, tolerance)?.map(Some))
}

/// The learner's model against quest's own (`logits:`): quest's greedy tokens and logits
/// in this process, the learner's binary teacher-forced on those tokens, every step
/// compared ([`grade::logits_compared`]). Refused after the step, the position and the
/// size of the difference were printed.
fn compare_logits(
    ctx: &Ctx,
    lesson: &Lesson,
    binary: &Path,
    request: &quest::lab::runner::RunRequest,
    tolerance: f32,
) -> Result<Step<LogitsPassed>> {
    println!("{}", ctx.ui("submit_checking_logits"));
    let reference = quest::lab::runner::reference(request)?;
    let (report, yours) = quest::lab::runner::run_forced(binary, request, &reference.tokens)
        .map_err(|e| super::run::explain_run_error(ctx, e))?;
    // These logits are the learner's only if the model called the learner's piece.
    if let Some(text) = super::piece::calls_text(ctx, lesson, &report) {
        println!("  ✗ {text}");
        return Ok(Step::refused(text));
    }
    let tolerance_text = format!("{tolerance:.0e}");
    match grade::logits_compared(
        &reference.logits,
        &yours,
        tolerance,
        reference.prompt_ids.len(),
    ) {
        grade::LogitsVerdict::Within {
            steps,
            largest,
            at_step,
            near_ties,
        } => {
            println!(
                "  ✓ {}",
                ctx.ui_with(
                    "submit_logits_ok",
                    &[
                        ("steps", &steps.to_string()),
                        ("tolerance", &tolerance_text),
                        ("largest", &format!("{largest:.1e}")),
                        ("step", &at_step.to_string()),
                    ]
                )
            );
            if !near_ties.is_empty() {
                let listed: Vec<String> = near_ties.iter().map(usize::to_string).collect();
                println!(
                    "    {}",
                    ctx.ui_with(
                        "submit_logits_near_ties",
                        &[
                            ("steps", &listed.join(", ")),
                            ("gap", &format!("{:.0e}", 2.0 * tolerance)),
                        ]
                    )
                );
            }
            Ok(Step::Passed(LogitsPassed {
                quest_tokens: reference.tokens,
                near_ties,
            }))
        }
        grade::LogitsVerdict::Beyond(gap) => {
            println!(
                "  ✗ {}",
                ctx.ui_with(
                    "submit_logits_differ",
                    &[
                        ("step", &gap.step.to_string()),
                        ("position", &gap.position.to_string()),
                        ("by", &format!("{:.3e}", gap.by)),
                        ("id", &gap.id.to_string()),
                        ("tolerance", &tolerance_text),
                    ]
                )
            );
            if gap.argmax != gap.reference_argmax {
                println!(
                    "    {}",
                    ctx.ui_with(
                        "submit_logits_argmax",
                        &[
                            ("reference", &gap.reference_argmax.to_string()),
                            ("yours", &gap.argmax.to_string()),
                        ]
                    )
                );
            }
            println!(
                "    {}",
                first_layer_apart(ctx, binary, request, &reference.tokens, &gap, tolerance)?
            );
            // A lesson may say what such a difference usually is (`messages: logits:`).
            let why = lesson_says(
                ctx,
                lesson,
                quest::course::LOGITS_MESSAGE,
                "submit_logits_failed",
            );
            Ok(Step::refused(why))
        }
        grade::LogitsVerdict::Missing { steps, expected } => {
            println!(
                "  ✗ {}",
                ctx.ui_with(
                    "submit_logits_missing",
                    &[
                        ("steps", &steps.to_string()),
                        ("expected", &expected.to_string()),
                    ]
                )
            );
            Ok(Step::refused(ctx.ui("submit_logits_failed")))
        }
    }
}

/// What the lesson says in `messages:` under `key` (why a check usually fails there), or
/// quest's own `fallback` text.
fn lesson_says<'a>(ctx: &'a Ctx, lesson: &'a Lesson, key: &str, fallback: &'a str) -> &'a str {
    lesson
        .meta
        .messages
        .get(key)
        .map_or_else(|| ctx.ui(fallback), String::as_str)
}

/// A sampler's run with `check.per_step` draws a step, its draws judged against the exact
/// distribution of each step's logits under the sampling quest asks for
/// ([`grade::draws_compared`]): what `quest submit` and `quest dev check` both run.
pub(crate) fn judge_draws(
    binary: &Path,
    request: &quest::lab::runner::RunRequest,
    sampling: &quest::lm::Sampling,
    check: quest::course::spec::DrawsCheck,
) -> Result<grade::DrawsVerdict> {
    let drawn = quest::lab::runner::run_drawn(binary, request, sampling, check.per_step)?;
    let expected: Vec<Vec<f64>> = drawn
        .logits
        .iter()
        .map(|row| quest::lm::sample::distribution(row, sampling))
        .collect();
    // quest's honest draws from their own seed, not the learner's key's.
    let honest_seed = sampling.seed ^ 0x5eed;
    Ok(grade::draws_compared(
        &expected,
        &drawn.draws,
        check.tolerance,
        honest_seed,
    ))
}

/// A sampler's draws against the distribution it was asked for (`draws:`):
/// [`judge_draws`], said. Refused after the step, the distance and the token most
/// over-drawn were printed.
fn check_draws(ctx: &Ctx, lesson: &Lesson, built: &Built) -> Result<Step> {
    let Some(check) = lesson.spec.draws else {
        return Ok(Step::Passed(()));
    };
    let (binary, request) = (&built.yours, &built.request);
    let sampling = quest::lm::Sampling::from_env()?;
    println!(
        "{}",
        ctx.ui_with(
            "submit_checking_draws",
            &[
                ("per_step", &check.per_step.to_string()),
                ("sampling", &sampling.to_string()),
            ]
        )
    );
    let verdict = judge_draws(binary, request, &sampling, check)
        .map_err(|e| super::run::explain_run_error(ctx, e))?;
    let percent = |share: f64| format!("{:.1}", 100.0 * share);
    let numbers = |distance: f64, honest: f64, spread: f64| {
        [
            ("distance", format!("{distance:.3}")),
            ("honest", format!("{honest:.3}")),
            ("spread", format!("{spread:.3}")),
            ("tolerance", format!("{}", check.tolerance)),
        ]
    };
    let filled = |key: &str, values: &[(&str, String)]| {
        let pairs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ctx.ui_with(key, &pairs)
    };
    match verdict {
        grade::DrawsVerdict::Within {
            distance,
            honest,
            spread,
        } => {
            println!(
                "  ✓ {}",
                filled("submit_draws_ok", &numbers(distance, honest, spread))
            );
            Ok(Step::Passed(()))
        }
        grade::DrawsVerdict::Beyond {
            distance,
            honest,
            spread,
            worst,
        } => {
            println!(
                "  ✗ {}",
                filled("submit_draws_beyond", &numbers(distance, honest, spread))
            );
            println!(
                "    {}",
                filled(
                    "submit_draws_step",
                    &[
                        ("step", worst.step.to_string()),
                        ("distance", format!("{:.3}", worst.distance)),
                        ("honest", format!("{:.3}", worst.honest)),
                        ("token", worst.token.to_string()),
                        ("share", percent(worst.share)),
                        ("probability", percent(worst.probability)),
                        ("outside", percent(worst.outside)),
                    ]
                )
            );
            // A lesson may say what such a gap usually is (`messages: draws:`).
            let why = lesson_says(
                ctx,
                lesson,
                quest::course::DRAWS_MESSAGE,
                "submit_draws_failed",
            );
            Ok(Step::refused(why))
        }
        grade::DrawsVerdict::Missing { steps, expected } => {
            println!(
                "  ✗ {}",
                ctx.ui_with(
                    "submit_draws_missing",
                    &[
                        ("steps", &steps.to_string()),
                        ("expected", &expected.to_string()),
                    ]
                )
            );
            Ok(Step::refused(ctx.ui("submit_draws_failed")))
        }
    }
}

/// Both models again, teacher-forced as before, now reading back every layer's output: which
/// layer of the refused step first differs ([`grade::layers_compared`]), in words.
fn first_layer_apart(
    ctx: &Ctx,
    binary: &Path,
    request: &quest::lab::runner::RunRequest,
    tokens: &[u32],
    gap: &grade::LogitsGap,
    tolerance: f32,
) -> Result<String> {
    let (run, reference) = quest::lab::runner::reference_run(request, true)?;
    let (_, _, yours) = quest::lab::runner::run_forced_with(binary, request, tokens, true)
        .map_err(|e| super::run::explain_run_error(ctx, e))?;
    let (Some(reference), Some(logits), Some(yours)) =
        (reference.get(gap.step), run.logits.get(gap.step), yours)
    else {
        return Ok(ctx.ui("submit_layers_unknown").to_owned());
    };
    // The lesson's tolerance is on logits; as a share of their largest value it carries
    // over to hidden states of any scale.
    let largest_logit = logits.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let relative = tolerance / largest_logit.max(f32::MIN_POSITIVE);
    let step = gap.step.to_string();
    let yours = yours.get(gap.step).map_or(&[][..], Vec::as_slice);
    Ok(match grade::layers_compared(reference, yours, relative) {
        grade::LayersVerdict::First { layer, by, largest } => ctx.ui_with(
            "submit_layers_first",
            &[
                ("step", &step),
                ("layer", &layer.to_string()),
                ("layers", &reference.len().to_string()),
                ("by", &format!("{by:.3e}")),
                ("largest", &format!("{largest:.3e}")),
            ],
        ),
        grade::LayersVerdict::AfterLast { layers } => ctx.ui_with(
            "submit_layers_after_last",
            &[("step", &step), ("layers", &layers.to_string())],
        ),
        grade::LayersVerdict::Unlike => ctx.ui("submit_layers_unknown").to_owned(),
    })
}

/// The text of a finding, in the learner's language, with where it is.
pub fn finding_text(ctx: &Ctx, lesson: &Lesson, finding: &Finding) -> String {
    let text = match finding.rule.as_str() {
        rules::SYNTAX => ctx.ui_with("check_syntax", &[("call", &finding.call)]),
        rules::NO_REGION => ctx.ui_with("check_no_region", &[("call", &finding.call)]),
        rules::ESCAPE => ctx.ui_with("check_escape", &[("call", &finding.call)]),
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

/// What a broken feed rule says, in the learner's language, with the exercise's path.
fn feed_text(ctx: &Ctx, lesson: &Lesson, problem: &FeedProblem) -> String {
    let message = |rule: &FeedRule, fills: &[(&str, &str)]| {
        let template = lesson
            .meta
            .messages
            .get(&rule.id)
            .map_or(rule.id.as_str(), String::as_str);
        quest::course::fill_placeholders(template, fills)
    };
    let text = match problem {
        FeedProblem::NotRecorded => ctx.ui("submit_feeds_unrecorded").to_owned(),
        FeedProblem::FirstToken {
            rule,
            positions,
            limit,
        } => message(
            rule,
            &[
                ("positions", &positions.to_string()),
                ("limit", &limit.to_string()),
            ],
        ),
        FeedProblem::Step {
            rule,
            step,
            positions,
            limit,
        } => message(
            rule,
            &[
                ("step", &step.to_string()),
                ("positions", &positions.to_string()),
                ("limit", &limit.to_string()),
            ],
        ),
    };
    let file = lesson
        .spec
        .exercise
        .as_deref()
        .unwrap_or(Path::new("exercise"))
        .display();
    format!("{file}: {text}")
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

    // 0. Predictions, recorded before anything runs.
    if !options.predictions.is_empty() {
        record_predictions(ctx, &mut learner, lesson, &options.predictions)?;
    }
    // 1 to 12, each a step that may refuse; a refusal is recorded and said here.
    let judged = match judge(ctx, lesson, options, &path, &source, &code)? {
        Step::Passed(judged) => judged,
        Step::Refused(refusal) => return refuse(ctx, &mut learner, id, code, refusal),
    };
    // 13. Record everything measured, then look at the card.
    record_and_card(ctx, &mut learner, lesson, options, code, judged)
}

/// What the checks and the measurement hand the record.
struct Judged {
    measured: Measured,
    /// quest's own values, recorded with the run they came from.
    quest_values: Option<Values>,
}

/// The submission's steps, in order, up to the first that refuses.
fn judge(
    ctx: &Ctx,
    lesson: &Lesson,
    options: &SubmitOptions,
    path: &Path,
    source: &[u8],
    code: &CodeRef,
) -> Result<Step<Judged>> {
    // 1. The code, against the lesson's rules.
    passed!(check_rules(ctx, lesson, source));
    // 2. The solution copied over the exercise.
    passed!(check_copied(ctx, lesson, source));
    // 3. The build, and where the exercise runs.
    let built = build_submitted(ctx, lesson, options, path)?;
    // 4. A piece of the model, alone against quest's own.
    passed!(check_piece(ctx, lesson, &built));
    // 5. The piece's logits in the model, step by step.
    let logits = passed!(check_logits(ctx, lesson, &built));
    // 6. A sampler's draws.
    passed!(check_draws(ctx, lesson, &built));
    // 7. The behaviour: the first run, beside the solution's.
    let behaviour = passed!(check_behaviour(ctx, lesson, &built));
    // 8. What the run fed the model.
    passed!(check_feeds(ctx, lesson, &behaviour.first_run));
    // 9. A sampler's tokens, run again.
    passed!(check_repeat(ctx, lesson, &built, &behaviour.first_run));
    // 10. The solution's tokens.
    passed!(check_tokens(ctx, lesson, &behaviour, logits.as_ref()));
    // 11. The values it computed.
    let quest_values = passed!(check_values(ctx, lesson, code, &behaviour.first_run));
    // 12. The measurement.
    let measured = passed!(measure(
        ctx,
        lesson,
        options,
        &built,
        code,
        behaviour.first_run
    ));
    Ok(Step::Passed(Judged {
        measured,
        quest_values,
    }))
}

/// The code, against the lesson's rules (read from its syntax tree), every finding said.
fn check_rules(ctx: &Ctx, lesson: &Lesson, source: &[u8]) -> Result<Step> {
    println!("{}", ctx.ui("submit_checking_code"));
    let findings = rules::check(&String::from_utf8_lossy(source), &lesson.spec.rules);
    for finding in &findings {
        println!("  {}", finding_text(ctx, lesson, finding));
    }
    if !findings.is_empty() {
        return Ok(Step::refused(ctx.ui("submit_code_failed")));
    }
    println!("  ✓ {}", ctx.ui("submit_code_ok"));
    Ok(Step::Passed(()))
}

/// The solution copied over the exercise teaches nothing and measures nothing of the
/// learner's: said kindly, and refused.
fn check_copied(ctx: &Ctx, lesson: &Lesson, source: &[u8]) -> Result<Step> {
    if let Ok(solution) = solution_path(lesson).and_then(|p| Ok(std::fs::read_to_string(p)?)) {
        if quest::check::same_as_solution(&String::from_utf8_lossy(source), &solution) {
            return Ok(Step::refused(ctx.ui_with(
                "submit_copied_solution",
                &[("id", lesson.meta.id.as_str())],
            )));
        }
    }
    Ok(Step::Passed(()))
}

/// The learner's code built, with what it is compared with and how it runs.
struct Built {
    /// The learner's binary.
    yours: PathBuf,
    request: RunRequest,
    /// The starting code's file (the measurement's baseline), and its code.
    starting: PathBuf,
    original_code: CodeRef,
    backend: quest::device::Backend,
}

/// Builds the learner's code, and what it is compared with: the solution for the tokens
/// (in [`check_behaviour`]), the starting code for the measurement. Where the exercise does
/// not run (`runs_on`), it stops after what it checks here (a CUDA kernel compiles): its
/// own run says so, and nothing more is judged.
fn build_submitted(
    ctx: &Ctx,
    lesson: &Lesson,
    options: &SubmitOptions,
    path: &Path,
) -> Result<Built> {
    let (starting, original_code) = starting_code_file(lesson)?;
    let yours = build(ctx, path, true)?;
    let request = request(lesson, &options.run);
    let backend = quest::device::Backend::detect();
    if !lesson.spec.runs_on_backend(backend) {
        run_binary(ctx, &yours, &request)?;
        bail!(ctx.ui_with("submit_runs_elsewhere", &[("backend", backend.name())]));
    }
    Ok(Built {
        yours,
        request,
        starting,
        original_code,
        backend,
    })
}

/// A piece of the model: first the piece alone against quest's own, on random tensors of
/// the shapes that matter (its logits in the model are [`check_logits`]).
fn check_piece(ctx: &Ctx, lesson: &Lesson, built: &Built) -> Result<Step> {
    if lesson.spec.piece.is_none() {
        return Ok(Step::Passed(()));
    }
    println!("{}", ctx.ui("submit_checking_piece"));
    let why = match super::piece::check(ctx, lesson, &built.yours, &built.request, true)? {
        Some(super::piece::Checked::Passed) | None => None,
        Some(super::piece::Checked::Wrong) => Some("submit_piece_failed"),
        Some(super::piece::Checked::Unwritten) => Some("submit_piece_missing"),
    };
    Ok(match why {
        Some(why) => Step::refused(ctx.ui(why)),
        None => Step::Passed(()),
    })
}

/// What the first run did, and the solution's run where its tokens are checked.
struct Behaviour {
    reference: Option<Report>,
    first_run: Report,
}

/// The behaviour: the solution's greedy tokens (run here, compared in [`check_tokens`]) and
/// the learner's first run, refused where the model did not call the learner's piece, where
/// quest's clock and the run's own figures disagree, or where it ran another batch.
fn check_behaviour(ctx: &Ctx, lesson: &Lesson, built: &Built) -> Result<Step<Behaviour>> {
    let spec = &lesson.spec;
    let (yours, request) = (&built.yours, &built.request);
    let reference = match spec.tokens {
        quest::course::spec::TokenCheck::None | quest::course::spec::TokenCheck::Repeatable => None,
        _ => Some(run_binary(
            ctx,
            &build(ctx, &solution_path(lesson)?, true)?,
            request,
        )?),
    };
    let first_run = run_binary(ctx, yours, request)?;
    // quest's clock times what it awards; a report that says the run was faster than the
    // clock saw is refused, with what each said.
    // The run's numbers are the learner's only if the model called the learner's piece.
    if let Some(text) = super::piece::calls_text(ctx, lesson, &first_run) {
        println!("  ✗ {text}");
        return Ok(Step::refused(text));
    }
    // A figure timed inside the process is trusted only within quest's clock.
    if let Some(text) = super::run::inside_over_clock_text(ctx, &first_run) {
        println!("  ✗ {text}");
        return Ok(Step::refused(text));
    }
    if let Some(text) = super::run::disagreement_text(ctx, &first_run) {
        println!("  ✗ {text}");
        return Ok(Step::refused(ctx.ui("submit_clock_failed")));
    }
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
            return Ok(Step::refused(ctx.ui("submit_batch_failed")));
        }
    }
    Ok(Step::Passed(Behaviour {
        reference,
        first_run,
    }))
}

/// What the run fed the model, call by call, as the model recorded it.
fn check_feeds(ctx: &Ctx, lesson: &Lesson, first_run: &Report) -> Result<Step> {
    let spec = &lesson.spec;
    if spec.feeds.is_empty() {
        return Ok(Step::Passed(()));
    }
    println!("{}", ctx.ui("submit_checking_feeds"));
    let problems = grade::feed_problems(&spec.feeds, &first_run.prefill_fed, &first_run.steps_fed);
    for problem in &problems {
        println!("  {}", feed_text(ctx, lesson, problem));
    }
    if !problems.is_empty() {
        return Ok(Step::refused(ctx.ui("submit_feeds_failed")));
    }
    println!("  ✓ {}", ctx.ui("submit_feeds_ok"));
    Ok(Step::Passed(()))
}

/// A sampler's tokens: the same seed, run again, the same tokens.
fn check_repeat(ctx: &Ctx, lesson: &Lesson, built: &Built, first_run: &Report) -> Result<Step> {
    if lesson.spec.tokens != quest::course::spec::TokenCheck::Repeatable {
        return Ok(Step::Passed(()));
    }
    println!("{}", ctx.ui("submit_checking_repeat"));
    let again = run_binary(ctx, &built.yours, &built.request)?;
    let n = first_run.tokens.len().max(again.tokens.len());
    if let Some(at) = grade::first_difference(&first_run.tokens, &again.tokens, n) {
        println!(
            "  ✗ {}",
            ctx.ui_with("submit_repeat_differs", &[("at", &at.to_string())])
        );
        println!("    1: {}", first_run.text.trim());
        println!("    2: {}", again.text.trim());
        return Ok(Step::refused(ctx.ui("submit_repeat_failed")));
    }
    println!(
        "  ✓ {}",
        ctx.ui_with("submit_repeat_ok", &[("n", &n.to_string())])
    );
    Ok(Step::Passed(()))
}

/// The first run's tokens against the solution's (as `tokens:` asks); where the logits
/// check passed, a run that leaves them only at its near ties is still quest's computation.
fn check_tokens(
    ctx: &Ctx,
    lesson: &Lesson,
    behaviour: &Behaviour,
    logits_passed: Option<&LogitsPassed>,
) -> Result<Step> {
    let first_run = &behaviour.first_run;
    let compared = behaviour.reference.as_ref().and_then(|reference| {
        grade::tokens_compared(
            lesson.spec.tokens,
            reference.tokens.len(),
            first_run.tokens.len(),
        )
        .map(|n| (n, reference))
    });
    let Some((n, reference)) = compared else {
        return Ok(Step::Passed(()));
    };
    println!("{}", ctx.ui("submit_checking_tokens"));
    let differs = grade::first_difference(&reference.tokens, &first_run.tokens, n);
    // Where the logits check saw near ties, a run may leave the solution's tokens
    // at one and still be quest's computation (grade::tokens_against_quest).
    let explained = differs.and(logits_passed).map(|passed| {
        grade::tokens_against_quest(&passed.quest_tokens, &first_run.tokens, &passed.near_ties)
    });
    match (differs, explained) {
        (None, _) => {
            let agreed = n.min(first_run.tokens.len());
            println!(
                "  ✓ {}",
                ctx.ui_with("submit_tokens_ok", &[("n", &agreed.to_string())])
            );
        }
        (Some(_), Some(grade::AgainstQuest::NearTie(at))) => println!(
            "  ✓ {}",
            ctx.ui_with("submit_tokens_near_tie", &[("at", &at.to_string())])
        ),
        (Some(_), Some(grade::AgainstQuest::Same)) => {
            println!("  ✓ {}", ctx.ui("submit_tokens_quests"))
        }
        (Some(at), _) => {
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
            // A lesson may say why its tokens must agree (`messages: tokens:`).
            let why = lesson_says(
                ctx,
                lesson,
                quest::course::TOKENS_MESSAGE,
                "submit_behaviour_failed",
            );
            return Ok(Step::refused(why));
        }
    }
    Ok(Step::Passed(()))
}

/// The values it computed, against quest's own computation from its inputs: quest's values
/// when they agree; refused with the run (and quest's values) recorded when not.
fn check_values(
    ctx: &Ctx,
    lesson: &Lesson,
    code: &CodeRef,
    first_run: &Report,
) -> Result<Step<Option<Values>>> {
    let Some(checked) = super::values::check(ctx, lesson, first_run)? else {
        return Ok(Step::Passed(None));
    };
    if !checked.ok {
        let mut run = run_record(first_run, code.clone(), ctx.lang);
        run.metrics.extend(checked.quest.0);
        return Ok(Step::Refused(Refusal {
            why: ctx.ui("values_failed").to_owned(),
            runs: vec![run],
            measured: None,
        }));
    }
    println!("  ✓ {}", ctx.ui("values_ok"));
    Ok(Step::Passed(Some(checked.quest)))
}

/// What the measurement hands the record: every run with the code it ran (the first run
/// alone where the lesson measures nothing), and what was measured.
struct Measured {
    reports: Vec<(Report, CodeRef)>,
    measurement: Option<Measurement>,
}

/// The measurement: starting code and yours, interleaved, medians
/// ([`measure_rounds`]); refused where what the change is about did not move
/// ([`said_unmoved`]) or the effect does not show ([`said_effect_missing`]), with the
/// rounds recorded.
fn measure(
    ctx: &Ctx,
    lesson: &Lesson,
    options: &SubmitOptions,
    built: &Built,
    code: &CodeRef,
    first_run: Report,
) -> Result<Step<Measured>> {
    let Some(measure) = &lesson.spec.measure else {
        return Ok(Step::Passed(Measured {
            reports: vec![(first_run, code.clone())],
            measurement: None,
        }));
    };
    let Rounds {
        reports,
        taken,
        improvement,
    } = measure_rounds(ctx, lesson, measure, options, built, code)?;
    let why = if said_unmoved(lesson, measure, &reports, &built.original_code, code) {
        Some("submit_moves_failed")
    } else if said_effect_missing(ctx, lesson, first_run.backend, improvement) {
        Some("submit_measure_failed")
    } else {
        None
    };
    if let Some(why) = why {
        return Ok(Step::Refused(Refusal {
            why: ctx.ui(why).to_owned(),
            runs: run_records(ctx, &reports, None),
            measured: Some(taken),
        }));
    }
    Ok(Step::Passed(Measured {
        reports,
        measurement: Some(taken),
    }))
}

/// What the interleaved rounds measured.
struct Rounds {
    /// Every report, with the code it ran.
    reports: Vec<(Report, CodeRef)>,
    taken: Measurement,
    /// The medians' improvement.
    improvement: Option<f64>,
}

/// The interleaved rounds, each round's values and the medians said.
fn measure_rounds(
    ctx: &Ctx,
    lesson: &Lesson,
    measure: &Measure,
    options: &SubmitOptions,
    built: &Built,
    code: &CodeRef,
) -> Result<Rounds> {
    let (yours, request, original_code) = (&built.yours, &built.request, &built.original_code);
    let mut reports: Vec<(Report, CodeRef)> = Vec::new();
    // Against quest's own pieces: the learner's binary again, told to keep quest's.
    let against_quest = measure.against == quest::course::spec::Baseline::QuestPieces;
    let before_binary = if against_quest {
        yours.clone()
    } else {
        build(ctx, &built.starting, true)?
    };
    let before_env: &[(&str, &str)] = if against_quest {
        &[(quest::settings::PIECES.name, "quest")]
    } else {
        &[]
    };
    let metric = measure.metric;
    let rounds = options.rounds.unwrap_or(measure.rounds).max(1);
    println!(
        "{}",
        ctx.ui_with(
            match (against_quest, lesson.spec.draws.is_some()) {
                (true, true) => "submit_measuring_sampler",
                (true, false) => "submit_measuring_pieces",
                (false, _) => "submit_measuring",
            },
            &[
                ("rounds", &rounds.to_string()),
                ("metric", &metric_name(ctx, metric))
            ]
        )
    );
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let b = quest::lab::runner::run_with_env(&before_binary, request, before_env)
            .map_err(|e| super::run::explain_run_error(ctx, e))?;
        let a = run_binary(ctx, yours, request)?;
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
            of(original_code),
            of(code),
            also.unit()
        );
    }
    let taken = Measurement {
        metric: metric.key().into(),
        before,
        after,
    };
    Ok(Rounds {
        reports,
        taken,
        improvement,
    })
}

/// What the change is about moved, whatever the speed did (`measure.moves`): each metric
/// that did not is said; true when one did not.
fn said_unmoved(
    lesson: &Lesson,
    measure: &Measure,
    reports: &[(Report, CodeRef)],
    original_code: &CodeRef,
    code: &CodeRef,
) -> bool {
    let unmoved = grade::unmoved(&measure.moves, |metric, yours| {
        let of = if yours { code } else { original_code };
        let values: Vec<f64> = reports
            .iter()
            .filter(|(_, c)| c == of)
            .filter_map(|(r, _)| r.metric(metric))
            .collect();
        (!values.is_empty()).then(|| median(&values))
    });
    for (moved, before, after) in &unmoved {
        let shown = |v: &Option<f64>| v.map_or_else(|| "?".to_owned(), number);
        let template = lesson
            .meta
            .messages
            .get(&moved.id)
            .map_or(moved.id.as_str(), String::as_str);
        let text = quest::course::fill_placeholders(
            template,
            &[("before", &shown(before)), ("after", &shown(after))],
        );
        println!("  ✗ {text}");
    }
    !unmoved.is_empty()
}

/// The effect where the lesson says it shows ([`grade::effect`]): said when missing (true)
/// or measured on another backend than the lesson's.
fn said_effect_missing(
    ctx: &Ctx,
    lesson: &Lesson,
    backend: quest::device::Backend,
    improvement: Option<f64>,
) -> bool {
    match grade::effect(&lesson.spec, backend, improvement) {
        Effect::Shown => false,
        Effect::Missing { ratio, at_least } => {
            let ratio = format!("{:.2}", ratio.unwrap_or(0.0));
            println!(
                "  {}",
                ctx.ui_with(
                    "submit_effect_missing",
                    &[("ratio", &ratio), ("at_least", &format!("{at_least:.2}"))]
                )
            );
            true
        }
        Effect::Elsewhere(kinds) => {
            let expected: Vec<&str> = kinds.iter().map(|kind| kind.key()).collect();
            println!(
                "  {}",
                ctx.ui_with(
                    "submit_effect_elsewhere",
                    &[
                        ("backend", backend.name()),
                        ("expected", &expected.join(", "))
                    ]
                )
            );
            false
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
        measured: Measured {
            reports,
            measurement,
        },
        quest_values,
    } = judged;
    record_runs(ctx, learner, id, &reports, quest_values.as_ref())?;
    record_submission(
        ctx,
        learner,
        id,
        Some(code.clone()),
        Outcome::ChecksPassed,
        measurement.clone(),
    )?;
    judge_predictions(ctx, learner, lesson, &code, !options.predictions.is_empty())?;
    let card_ok = {
        let state = learner.store.state();
        let record = state.lesson(id).cloned().unwrap_or_default();
        record
            .card
            .as_ref()
            .is_some_and(|card| grade::card_problems(lesson, &record, &code, card).is_empty())
    };
    if card_ok {
        record_submission(ctx, learner, id, Some(code), Outcome::Passed, None)?;
        return finish(ctx, learner, lesson);
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
enum Outcome {
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
    record_submission(ctx, learner, id, Some(code), Outcome::Failed, measured)?;
    bail!(why)
}

fn record_submission(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    code: Option<CodeRef>,
    outcome: Outcome,
    measurement: Option<Measurement>,
) -> Result<()> {
    learner.update(ctx, |state| {
        let submission = Submission {
            at: Timestamp::now(),
            code,
            passed: outcome == Outcome::Passed,
            checks_passed: outcome != Outcome::Failed,
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
    let bonus = grade::first_try_bonus(xp, ctx.course.first_try_percent);
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
    match grade::predictions(lesson, &record, given, Timestamp::now()) {
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
        let verdicts = grade::judge_waiting(lesson, record, code);
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
    let problems = grade::card_problems(lesson, &record, &judged_code, &card);
    // Wrong answers are named only once nothing else is wrong: then every answer is
    // recorded, the wrong ones too, before the refusal says which.
    let judged = problems
        .iter()
        .all(|problem| matches!(problem, CardProblem::Wrong(_)));
    let attempts = grade::card_attempts(lesson, &record, &judged_code, &card, card.at);
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
        record_submission(ctx, &mut learner, id, code, Outcome::Passed, None)?;
        finish(ctx, &mut learner, lesson)
    } else {
        println!("{}", ctx.ui_with("card_then_submit", &[("id", id)]));
        Ok(())
    }
}
