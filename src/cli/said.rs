//! What several commands say alike: a run or a check that could not finish, in the
//! learner's language (`run`, `submit`, the piece check, `bench`), a metric's name and a
//! measured number as a card takes it. Every other file of `cli` may use it; it uses
//! none of theirs.

use quest::course::Metric;
use quest::judge::Stopped;
use quest::lab::runner;

use super::Ctx;

/// A failed exercise run, explained in the learner's language.
pub(crate) fn explain_run_error(ctx: &Ctx, e: anyhow::Error) -> anyhow::Error {
    if let Some(limit) = e.downcast_ref::<runner::TimedOut>() {
        anyhow::anyhow!(ctx.ui_with("run_timed_out", &[("s", &limit.0.as_secs().to_string())]))
    } else if e.downcast_ref::<runner::Killed>().is_some() {
        explain_killed(ctx, e)
    } else {
        anyhow::anyhow!(ctx.ui_with("run_failed", &[("error", &format!("{e:#}"))]))
    }
}

/// A process a signal ended, said in the learner's language: the signal first (not its
/// last log line), and for SIGILL the BLAS in use and the way out. Other errors pass.
pub(crate) fn explain_killed(ctx: &Ctx, error: anyhow::Error) -> anyhow::Error {
    let Some(killed) = error.downcast_ref::<runner::Killed>() else {
        return error;
    };
    let who = match killed.program {
        runner::Program::Exercise => ctx.ui("who_exercise"),
        runner::Program::PythonPeer => ctx.ui("who_python_peer"),
    };
    let meaning = ctx.ui(match killed.signal {
        libc::SIGILL => "signal_ill",
        libc::SIGSEGV => "signal_segv",
        libc::SIGBUS => "signal_bus",
        libc::SIGFPE => "signal_fpe",
        libc::SIGABRT => "signal_abrt",
        libc::SIGKILL => "signal_kill",
        libc::SIGTERM => "signal_term",
        _ => "signal_other",
    });
    let mut text = ctx.ui_with(
        "run_killed",
        &[
            ("who", who),
            ("signal", &killed.signal_name()),
            ("meaning", meaning),
        ],
    );
    if killed.is_illegal_instruction() {
        text += "\n";
        text += &ctx.ui_with(
            "killed_sigill_hint",
            &[("blas", &quest::device::blas::library())],
        );
    }
    let said = killed.last_lines(5);
    if !said.is_empty() {
        text += &format!("\n{}\n{said}", ctx.ui("killed_said"));
    }
    anyhow::anyhow!(text)
}

/// Why a check could not judge, in the learner's language: a run that failed, inputs
/// quest cannot compute from, a metric not reported, an exercise that runs elsewhere;
/// a build the compiler refused says so. Other errors pass as they are.
pub(crate) fn explain_check_error(ctx: &Ctx, e: anyhow::Error) -> anyhow::Error {
    if e.downcast_ref::<quest::lab::runner::BuildFailed>()
        .is_some()
    {
        eprintln!("{}", ctx.ui("build_failed"));
    }
    match e.downcast::<Stopped>() {
        Ok(Stopped::Run(e)) => explain_run_error(ctx, e),
        Ok(Stopped::NoInputs(e)) => {
            anyhow::anyhow!(ctx.ui_with("values_no_inputs", &[("error", &format!("{e:#}"))]))
        }
        Ok(Stopped::MetricMissing(metric)) => {
            anyhow::anyhow!(ctx.ui_with("metric_missing", &[("metric", &metric_name(ctx, metric))]))
        }
        Ok(Stopped::RunsElsewhere(backend)) => {
            anyhow::anyhow!(ctx.ui_with("submit_runs_elsewhere", &[("backend", backend.name())]))
        }
        Err(e) => e,
    }
}

/// A metric's name in the learner's language.
pub(crate) fn metric_name(ctx: &Ctx, metric: Metric) -> String {
    ctx.ui(&format!("metric_{}", metric.key())).to_owned()
}

/// A measured number with enough digits to stay within a card's tolerance of itself
/// (0.0042 ms would print as 0.00 with two decimals).
pub(crate) fn number(value: f64) -> String {
    let digits = if value.abs() >= 10.0 || value == 0.0 {
        2
    } else {
        (3.0 - value.abs().log10().floor()) as usize
    };
    format!("{value:.digits$}")
}
