//! `quest run` and `quest watch`: build the learner's exercise, run it on the model,
//! print what it measured, record the run; `quest reset` puts the exercise back.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

use quest::course::Lesson;
use quest::judge::PieceJudged;
use quest::lab::clock::{Disagreement, HeldBack};
use quest::lab::runner::{self, RunRequest};
use quest::lab::Report;

use super::learner::{current_exercise, exercise_path, run_record, Learner};
use super::said::explain_run_error;
use super::{Ctx, RunArgs};

/// What to run an exercise with: the lesson's settings, overridden by the options.
pub(crate) fn request(lesson: &Lesson, args: &RunArgs) -> RunRequest {
    RunRequest {
        model: args
            .model
            .clone()
            .unwrap_or_else(|| lesson.spec.model.clone()),
        prompt: {
            let text = args.prompt.as_deref().unwrap_or(&lesson.spec.prompt);
            // A long document of a short text: copies joined by spaces (one line, as
            // quest's line hands a prompt over).
            vec![text; lesson.spec.prompt_copies.unwrap_or(1).max(1)].join(" ")
        },
        max_tokens: args.max_tokens.unwrap_or(lesson.spec.max_tokens).max(1),
        time_limit: args.time_limit.map(Duration::from_secs),
        piece: lesson.spec.piece,
    }
}

/// Builds `source` as an exercise binary, saying so in the learner's language when
/// the compiler refuses it.
pub(crate) fn build(ctx: &Ctx, source: &Path, quiet: bool) -> Result<std::path::PathBuf> {
    runner::build(&runner::workspace_root(), source, quiet).inspect_err(|e| {
        if e.downcast_ref::<runner::BuildFailed>().is_some() {
            eprintln!("{}", ctx.ui("build_failed"));
        }
    })
}

/// Runs a built exercise, explaining failures in the learner's language.
pub(crate) fn run_binary(ctx: &Ctx, binary: &Path, request: &RunRequest) -> Result<Report> {
    runner::run(binary, request).map_err(|e| explain_run_error(ctx, e))
}

/// Runs the exercise and records the run (its code's hash, backend, numbers).
pub(crate) fn run_and_record(ctx: &Ctx, lesson: &Lesson, args: &RunArgs) -> Result<()> {
    if lesson.spec.exercise.is_none() {
        println!("{}", ctx.ui_with("no_exercise", &[("id", &lesson.meta.id)]));
        return Ok(());
    }
    let (path, _, code) = current_exercise(lesson)?;
    let report = run_exercise(ctx, lesson, &path, &request(lesson, args))?;
    // A lesson that measures the host's graph building shows it on every run.
    let measured = lesson.spec.measure.iter();
    if measured
        .flat_map(|m| std::iter::once(&m.metric).chain(&m.also))
        .any(|m| *m == quest::course::Metric::BuildUsPerLayer)
    {
        if let Some(us) = report.metric(quest::course::Metric::BuildUsPerLayer) {
            println!(
                "{}",
                ctx.ui_with(
                    "build_per_layer",
                    &[
                        ("us", &format!("{us:.1}")),
                        ("layers", &report.layers.to_string())
                    ]
                )
            );
            if let Some(text) = inside_over_clock_text(ctx, &report) {
                println!("  ✗ {text}");
            }
        }
    }
    // A lesson that counts a step's ops shows them, and what they predict, on every run.
    if lesson
        .spec
        .measure
        .iter()
        .any(|m| m.metric == quest::course::Metric::OpsPerStep)
    {
        if let Some(ms) = report.metric(quest::course::Metric::HostMsPredicted) {
            println!(
                "{}",
                ctx.ui_with(
                    "ops_per_step",
                    &[
                        ("ops", &report.ops_per_step.to_string()),
                        ("us", &format!("{:.2}", report.us_per_op)),
                        ("ms", &format!("{ms:.2}"))
                    ]
                )
            );
        }
    }
    let checked = super::values::check(ctx, lesson, &report)?;
    let mut run = run_record(&report, code, ctx.lang);
    if let Some(checked) = &checked {
        run.metrics.extend(checked.quest.0.clone());
    }
    let mut learner = Learner::open(ctx)?;
    learner.update(ctx, |state| {
        state.lesson_mut(&lesson.meta.id).runs.push(run);
        Ok(())
    })?;
    if checked.is_some_and(|checked| !checked.ok) {
        println!("{}", ctx.ui_with("values_fix", &[("id", &lesson.meta.id)]));
    }
    invite_predictions(ctx, lesson, &learner);
    Ok(())
}

/// Before the lesson's first measurement, and before any answer: how to predict its quiz.
fn invite_predictions(ctx: &Ctx, lesson: &Lesson, learner: &Learner) {
    let id = lesson.meta.id.as_str();
    let record = learner.lesson(id);
    if lesson.spec.quiz.is_empty()
        || !record.attempts.is_empty()
        || quest::judge::measured_already(&record)
    {
        return;
    }
    let mut command = format!("quest submit {id}");
    for question in &lesson.spec.quiz {
        command.push_str(&format!(
            " --predict {}=<{}>",
            question.id,
            question.choices.join("|")
        ));
    }
    println!(
        "\n{}",
        ctx.ui_with("predict_invite", &[("command", &command)])
    );
}

/// Builds and runs the learner's exercise once, printing what it measured.
fn run_exercise(ctx: &Ctx, lesson: &Lesson, source: &Path, request: &RunRequest) -> Result<Report> {
    eprintln!("\n{}", ctx.ui("building"));
    let binary = build(ctx, source, false)?;
    // A lesson whose code is a piece of the model: the piece against quest's own first,
    // in seconds; the model runs only once there is a piece to run.
    let judged = super::piece::check(ctx, lesson, &binary, request, false)?;
    if judged.is_some_and(|judged| !matches!(judged, PieceJudged::Passed | PieceJudged::Wrong)) {
        bail!(ctx.ui_with("piece_run_stopped", &[("id", &lesson.meta.id)]));
    }
    let backend = quest::device::Backend::detect();
    let device = if backend == quest::device::Backend::Cpu {
        ctx.ui("device_cpu")
    } else {
        ctx.ui("device_gpu")
    };
    eprintln!(
        "{} ({}, {})",
        ctx.ui_with("running_on", &[("device", device)]),
        backend.name(),
        request.model
    );
    let report = run_binary(ctx, &binary, request)?;
    print_report(ctx, &report);
    if let Some(text) = super::piece::calls_text(ctx, lesson, &report) {
        println!("  ✗ {text}");
    }
    Ok(report)
}

/// Where a figure timed inside the exercise (a step's graph building) is more than
/// quest's clock allows (the whole step, timed from outside), said; `None` where it fits.
pub(crate) fn inside_over_clock_text(ctx: &Ctx, r: &Report) -> Option<String> {
    let (build, step) = quest::judge::inside_over_clock(r)?;
    Some(inside_over_clock_said(ctx, build, step))
}

/// A step's graph building (`build` ms, timed inside) over the whole step (`step` ms, by
/// quest's clock), said.
pub(crate) fn inside_over_clock_said(ctx: &Ctx, build: f64, step: f64) -> String {
    ctx.ui_with(
        "inside_over_clock",
        &[
            ("build", &format!("{build:.2}")),
            ("step", &format!("{step:.2}")),
        ],
    )
}

/// Where the exercise's own timer and quest's clock disagree, said in the learner's
/// language with what it means; `None` where they agree.
pub(crate) fn disagreement_text(ctx: &Ctx, r: &Report) -> Option<String> {
    Some(disagreement_said(ctx, r.disagreement.as_ref()?))
}

/// What the exercise's own timer and quest's clock disagree on, and what it means.
pub(crate) fn disagreement_said(ctx: &Ctx, disagreement: &Disagreement) -> String {
    let rate = |x: f64| format!("{x:.2}");
    match disagreement {
        Disagreement::StoppedEarly {
            timer_tok_s,
            clock_tok_s,
        } => ctx.ui_with(
            "clock_stopped_early",
            &[
                ("timer", &rate(*timer_tok_s)),
                ("clock", &rate(*clock_tok_s)),
            ],
        ),
        Disagreement::Rewritten {
            reported_tok_s,
            clock_tok_s,
            ..
        } => ctx.ui_with(
            "clock_rewritten",
            &[
                ("reported", &rate(*reported_tok_s)),
                ("clock", &rate(*clock_tok_s)),
            ],
        ),
    }
}

/// A first token that reached quest's clock after the decode had begun, said with what
/// quest timed instead.
pub(crate) fn held_back_said(ctx: &Ctx, held: &HeldBack) -> String {
    let between = format!("{:.1}", held.between_ms);
    let decode = format!("{:.1}", held.decode_ms);
    let clock = format!("{:.2}", held.clock_tok_s);
    let ttft = format!("{:.1}", held.ttft_ms);
    match held.asked_before {
        Some(asked) => ctx.ui_with(
            "clock_held_back",
            &[
                ("ttft", &ttft),
                ("asked", &asked.to_string()),
                ("between", &between),
                ("decode", &decode),
                ("clock", &clock),
            ],
        ),
        None => ctx.ui_with(
            "clock_held_back_unmarked",
            &[
                ("ttft", &ttft),
                ("between", &between),
                ("decode", &decode),
                ("clock", &clock),
            ],
        ),
    }
}

fn print_report(ctx: &Ctx, r: &Report) {
    let tokens = |n: usize| ctx.ui_with("tokens", &[("n", &n.to_string())]);
    println!();
    println!("{}: {}", ctx.ui("output"), r.text.trim());
    if r.weights.is_empty() {
        println!("{}: {} ({})", ctx.ui("model"), r.model, r.backend);
    } else {
        println!(
            "{}: {} ({}, {} weights, {:.0} MB/token)",
            ctx.ui("model"),
            r.model,
            r.backend,
            r.weights,
            r.weight_bytes_per_token as f64 / 1e6
        );
    }
    if !r.blas.is_empty() {
        println!("{}: {}", ctx.ui("blas"), r.blas);
    }
    if r.backend == quest::device::Backend::Cuda {
        println!("{}: {}", ctx.ui("quest_kernels"), kernels_said(ctx, r));
    }
    if !r.values.is_empty() {
        // It timed no decode of its own: its values are checked next.
        return;
    }
    println!(
        "{}: {}   {}: {}",
        ctx.ui("prompt_tokens"),
        tokens(r.prompt_tokens),
        ctx.ui("generated_tokens"),
        tokens(r.generated_tokens)
    );
    // quest's clock's numbers, the exercise's own timer's beside them.
    let reading = r.timer.as_ref();
    let timer_ms = reading.map_or(String::new(), |reading| {
        format!(
            "   {}",
            ctx.ui_with(
                "your_timer_ms",
                &[("ms", &format!("{:.1}", reading.ttft_ms))]
            )
        )
    });
    // A fresh process's first forward, paid before the prompt: said apart from the prefill.
    if r.warm_up_ms > 0.0 {
        println!(
            "{}",
            ctx.ui_with(
                "load_and_warm_up",
                &[
                    ("load", &format!("{:.1}", r.load_ms)),
                    ("warm_up", &format!("{:.1}", r.warm_up_ms))
                ]
            )
        );
    } else if r.load_ms > 0.0 {
        // A lazy load (or a decoder of the learner's): no warm-up, its first forward in
        // the time to first token.
        println!(
            "{}",
            ctx.ui_with("load_only", &[("load", &format!("{:.1}", r.load_ms))])
        );
    }
    if let Some(served) = &r.served {
        // A served trace: each request timed from its arrival, on quest's clock.
        let q = |values: &[f64], q: f64| {
            format!("{:.0}", quest::lab::clock::ServedTimes::quantile(values, q))
        };
        let line = if r.levels.is_empty() {
            "served_line"
        } else {
            "server_line"
        };
        println!(
            "{}",
            ctx.ui_with(
                line,
                &[
                    ("requests", &r.requests.to_string()),
                    ("tokens", &r.generated_tokens.to_string()),
                    ("tok_s", &format!("{:.2}", served.tok_s)),
                    ("ttft_p50", &q(&served.ttft_ms, 0.5)),
                    ("ttft_p99", &q(&served.ttft_ms, 0.99)),
                    ("latency_p50", &q(&served.latency_ms, 0.5)),
                    ("latency_p99", &q(&served.latency_ms, 0.99)),
                ]
            )
        );
        for (clients, times) in &r.levels {
            println!(
                "{}",
                ctx.ui_with(
                    "server_level_line",
                    &[
                        ("clients", &clients.to_string()),
                        ("ttft_p50", &q(&times.ttft_ms, 0.5)),
                        ("ttft_p99", &q(&times.ttft_ms, 0.99)),
                        ("itl_p50", &q(&times.itl_ms, 0.5)),
                        ("itl_p99", &q(&times.itl_ms, 0.99)),
                        ("tok_s", &format!("{:.2}", times.tok_s)),
                    ]
                )
            );
        }
    } else {
        print_decode(ctx, r, &timer_ms);
    }
}

/// The time to first token and the decode rate of one decode (or one batch).
fn print_decode(ctx: &Ctx, r: &Report, timer_ms: &str) {
    let reading = r.timer.as_ref();
    println!(
        "{}: {:.1} {}{timer_ms}",
        ctx.ui("ttft"),
        r.ttft_ms,
        ctx.ui("ms")
    );
    if r.generated_tokens < 2 {
        // The first token is the prefill's: decode is timed from the second on.
        println!("{}: {}", ctx.ui("decode"), ctx.ui("decode_unmeasured"));
    } else {
        let timer_tok_s = reading.map_or(String::new(), |reading| {
            format!(
                "   {}",
                ctx.ui_with(
                    "your_timer_tok_s",
                    &[("tok_s", &format!("{:.2}", reading.decode_tok_s))]
                )
            )
        });
        println!(
            "{}: {:.2} {}{timer_tok_s}",
            ctx.ui("decode"),
            r.decode_tok_s,
            ctx.ui("tok_per_s")
        );
    }
    // A loop that keeps several tokens a call: the calls as quest's clock counted them.
    if let Some(per_call) = r.metric(quest::course::Metric::TokensPerForward) {
        println!(
            "{}",
            ctx.ui_with(
                "forward_calls",
                &[
                    ("calls", &r.forward_calls.to_string()),
                    ("tokens", &r.generated_tokens.to_string()),
                    ("per_call", &format!("{per_call:.2}"))
                ]
            )
        );
    }
    if let Some(peak_mb) = r.metric(quest::course::Metric::PrefillPeakMb) {
        println!(
            "{}",
            ctx.ui_with(
                "prefill_peak",
                &[
                    ("mb", &format!("{peak_mb:.1}")),
                    ("tokens", &r.prompt_tokens.to_string())
                ]
            )
        );
    }
    if let Some(text) = disagreement_text(ctx, r) {
        println!("{text}");
    }
    if let Some(held) = &r.held_back {
        println!("{}", held_back_said(ctx, held));
    }
    if r.batch > 1 {
        let per_seq = r
            .metric(quest::course::Metric::PerSeqTokS)
            .unwrap_or_default();
        println!(
            "{}",
            ctx.ui_with(
                "batch_line",
                &[
                    ("n", &r.batch.to_string()),
                    ("tok_s", &format!("{per_seq:.2}"))
                ]
            )
        );
    }
    if let (Some(per_token), Some(growth)) = (
        r.metric(quest::course::Metric::MsPerToken),
        r.metric(quest::course::Metric::MsPerTokenGrowth),
    ) {
        println!(
            "{}",
            ctx.ui_with(
                "per_token",
                &[
                    ("ms", &format!("{per_token:.1}")),
                    ("growth", &format!("{growth:+.1}"))
                ]
            )
        );
    }
    if cfg!(not(target_os = "macos")) || r.backend != quest::device::Backend::Metal {
        println!("{}", ctx.ui("numbers_differ"));
    }
    if r.backend == quest::device::Backend::Cuda {
        println!("{}", ctx.ui("cuda_first_run"));
    }
}

/// Which of quest's CUDA kernels the run used, and why the others did not run.
fn kernels_said(ctx: &Ctx, r: &Report) -> String {
    let kernels = if r.quest_kernels.is_empty() && r.quest_kernels_for_pieces {
        ctx.ui("quest_kernels_pieces").to_owned()
    } else if r.quest_kernels.is_empty() && r.quest_kernels_kept {
        ctx.ui("quest_kernels_off").to_owned()
    } else if r.quest_kernels.is_empty() {
        ctx.ui("quest_kernels_none").to_owned()
    } else if r.quest_kernels_kept {
        format!(
            "{} ({})",
            r.quest_kernels.join(", "),
            ctx.ui("quest_kernels_kept")
        )
    } else {
        format!(
            "{} ({})",
            r.quest_kernels.join(", "),
            ctx.ui("quest_kernels_compiled_here")
        )
    };
    // Some run, some are off for the learner's piece (`lm::fast`); a kernel can be both,
    // off for the piece's calls and still computing others (the matvec, the output head).
    if r.quest_kernels.is_empty() || r.quest_kernels_off.is_empty() {
        return kernels;
    }
    let off = r.quest_kernels_off.join(", ");
    let mut said = format!(
        "{kernels}; {}",
        ctx.ui_with("quest_kernels_others_off", &[("kernels", &off)])
    );
    let partly: Vec<&str> = r
        .quest_kernels_off
        .iter()
        .filter(|k| r.quest_kernels.contains(k))
        .map(String::as_str)
        .collect();
    if !partly.is_empty() {
        said.push_str("; ");
        said.push_str(&ctx.ui_with("quest_kernels_partly", &[("kernels", &partly.join(", "))]));
    }
    said
}

pub(crate) fn reset(ctx: &Ctx, id: &str, yes: bool) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let path = exercise_path(&lesson)?;
    let original = lesson.starting_code()?;
    if std::fs::read_to_string(&path).is_ok_and(|now| now == original) {
        println!(
            "{}",
            ctx.ui_with("reset_nothing", &[("path", &path.display().to_string())])
        );
        return Ok(());
    }
    // A missing file holds no edits to lose.
    if !yes && path.exists() {
        print!(
            "{} ",
            ctx.ui_with("reset_confirm", &[("path", &path.display().to_string())])
        );
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        // What counts as yes is the course's, per language (`confirm_yes`).
        let yes = ctx.ui("confirm_yes").split(',').map(str::trim);
        if !yes
            .into_iter()
            .any(|word| word.eq_ignore_ascii_case(answer.trim()))
        {
            println!("{}", ctx.ui("reset_cancelled"));
            return Ok(());
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
    }
    std::fs::write(&path, original)
        .with_context(|| format!("could not write {}", path.display()))?;
    println!(
        "{}",
        ctx.ui_with("reset_done", &[("path", &path.display().to_string())])
    );
    Ok(())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

pub(crate) fn watch(ctx: &Ctx, id: &str, args: &RunArgs) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let path = exercise_path(&lesson)?;
    let mut last = None;
    loop {
        let now = modified(&path);
        if now != last {
            last = now;
            if let Err(e) = run_and_record(ctx, &lesson, args) {
                if e.downcast_ref::<runner::BuildFailed>().is_none() {
                    eprintln!("quest: {e:#}");
                }
            }
            eprintln!(
                "\n{}",
                ctx.ui_with("watching", &[("path", &path.display().to_string())])
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
