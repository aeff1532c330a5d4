//! `quest run` and `quest watch`: build the learner's exercise, run it on the model,
//! print what it measured, record the run; `quest reset` puts the exercise back.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use quest::course::Lesson;
use quest::lab::{self, Code, Report, RunRequest};

use super::learner::{current_exercise, run_record, Learner};
use super::Ctx;

/// Runs the exercise and records the run (its code's hash, backend, numbers).
pub(crate) fn run_and_record(
    ctx: &Ctx,
    lesson: &Lesson,
    model: Option<String>,
    max_tokens: usize,
) -> Result<()> {
    let (_, code) = current_exercise(ctx, lesson)?;
    let report = run_exercise(ctx, lesson, model, max_tokens)?;
    let mut learner = Learner::open(ctx)?;
    learner.update(ctx, |state| {
        state
            .lesson_mut(&lesson.meta.id)
            .runs
            .push(run_record(&report, code, ctx.lang));
        Ok(())
    })
}

/// Builds and runs the learner's exercise once, printing what it measured.
fn run_exercise(
    ctx: &Ctx,
    lesson: &Lesson,
    model: Option<String>,
    max_tokens: usize,
) -> Result<Report> {
    let request = RunRequest {
        model: model.unwrap_or_else(|| lesson.meta.model.clone()),
        prompt: lab::DEFAULT_PROMPT.into(),
        max_tokens,
    };
    eprintln!("\n{}", ctx.ui("building"));
    let binary =
        lab::build(&ctx.root, &lesson.meta.id, Code::Exercise, false).inspect_err(|e| {
            if e.downcast_ref::<lab::BuildFailed>().is_some() {
                eprintln!("{}", ctx.ui("build_failed"));
            }
        })?;
    let backend = quest::lm::Backend::detect();
    let device = if backend == quest::lm::Backend::Cpu {
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
    let report = lab::run(&binary, &request)
        .map_err(|e| anyhow::anyhow!(ctx.ui_with("run_failed", &[("error", &format!("{e:#}"))])))?;
    print_report(ctx, &report);
    Ok(report)
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
    println!(
        "{}: {}   {}: {}",
        ctx.ui("prompt_tokens"),
        tokens(r.prompt_tokens),
        ctx.ui("generated_tokens"),
        tokens(r.generated_tokens)
    );
    println!("{}: {:.1} {}", ctx.ui("ttft"), r.ttft_ms, ctx.ui("ms"));
    println!(
        "{}: {:.2} {}",
        ctx.ui("decode"),
        r.decode_tok_s,
        ctx.ui("tok_per_s")
    );
    if cfg!(not(target_os = "macos")) || r.backend != "metal" {
        println!("{}", ctx.ui("numbers_differ"));
    }
}

/// The exercise as the lesson gives it: its `exercise=` code block.
pub(crate) fn original_exercise(lesson: &Lesson) -> Result<String> {
    lesson
        .exercise_blocks()
        .first()
        .map(|b| b.code.clone())
        .with_context(|| format!("{} has no exercise code block", lesson.path.display()))
}

pub(crate) fn reset(ctx: &Ctx, id: &str, yes: bool) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let path = ctx.root.join(&lesson.meta.exercise);
    let original = original_exercise(&lesson)?;
    if std::fs::read_to_string(&path).is_ok_and(|now| now == original) {
        println!(
            "{}",
            ctx.ui_with("reset_nothing", &[("path", &path.display().to_string())])
        );
        return Ok(());
    }
    if !yes {
        print!(
            "{} ",
            ctx.ui_with("reset_confirm", &[("path", &path.display().to_string())])
        );
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "예" | "네") {
            println!("{}", ctx.ui("reset_cancelled"));
            return Ok(());
        }
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

pub(crate) fn watch(ctx: &Ctx, id: &str, model: Option<String>, max_tokens: usize) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let path = ctx.root.join(&lesson.meta.exercise);
    let mut last = None;
    loop {
        let now = modified(&path);
        if now != last {
            last = now;
            if let Err(e) = run_and_record(ctx, &lesson, model.clone(), max_tokens) {
                if e.downcast_ref::<lab::BuildFailed>().is_none() {
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
