//! The measurement: the starting code (or quest's own pieces) and the code judged,
//! interleaved round by round, medians; then what must move and the effect, decided by
//! `grade`.

use std::path::Path;

use anyhow::Result;

use super::Effect;
use crate::course::spec::{Baseline, Measure};
use crate::course::Lesson;
use crate::lab::runner::{self, RunRequest};
use crate::lab::Report;
use crate::progress::{CodeRef, Measurement};
use crate::stats::median;

use super::outcome::{ran, Heading, Outcome, Passed, Progress, Refused, Rounds, Stopped};
use super::sources::{build, starting_code_file};

/// The measurement of `yours` (the judged binary and its code) against the lesson's
/// baseline, run with `request` for `rounds` rounds (the lesson's own number when
/// `None`); refused where what the change is about did not move or the effect does not
/// show on `backend`, where the judged code's first run ran.
pub(super) fn measure<'l>(
    lesson: &'l Lesson,
    request: &RunRequest,
    rounds: Option<usize>,
    (yours, code): (&Path, &CodeRef),
    backend: crate::device::Backend,
    say: &mut dyn FnMut(Progress),
) -> Result<Outcome<'l>> {
    let Some(measure) = &lesson.spec.measure else {
        return Ok(Outcome::Passed(Passed::NotAsked));
    };
    let (starting, original_code) = starting_code_file(lesson)?;
    let baseline = (starting.as_path(), &original_code);
    let asked = Asked {
        lesson,
        measure,
        request,
        rounds: rounds.unwrap_or(measure.rounds).max(1),
    };
    let rounds = measure_rounds(&asked, baseline, (yours, code), say)?;
    let unmoved = super::unmoved(&measure.moves, |metric, judged| {
        rounds.median_of(metric, if judged { code } else { &original_code })
    });
    if !unmoved.is_empty() {
        return Ok(Outcome::Refused(Refused::Unmoved { rounds, unmoved }));
    }
    Ok(
        match super::effect(&lesson.spec, backend, rounds.improvement) {
            Effect::Missing { ratio, at_least } => Outcome::Refused(Refused::EffectMissing {
                rounds,
                ratio,
                at_least,
            }),
            effect => Outcome::Passed(Passed::Measure {
                rounds,
                effect,
                backend,
            }),
        },
    )
}

/// What the lesson asks measured, and how many rounds.
struct Asked<'a> {
    lesson: &'a Lesson,
    measure: &'a Measure,
    request: &'a RunRequest,
    rounds: usize,
}

/// The interleaved rounds, each round said as it is measured: the baseline (the
/// starting code's file and its code) against the judged binary and its code.
fn measure_rounds(
    asked: &Asked,
    (starting, original_code): (&Path, &CodeRef),
    (yours, code): (&Path, &CodeRef),
    say: &mut dyn FnMut(Progress),
) -> Result<Rounds> {
    let (measure, request, rounds) = (asked.measure, asked.request, asked.rounds);
    // Against quest's own pieces: the judged binary again, told to keep quest's.
    let against_quest = measure.against == Baseline::QuestPieces;
    let before_binary = if against_quest {
        yours.to_path_buf()
    } else {
        build(starting)?
    };
    let before_env: &[(&str, &str)] = if against_quest {
        &[(crate::settings::PIECES.name, "quest")]
    } else {
        &[]
    };
    let metric = measure.metric;
    say(Progress::Checking(Heading::Measure {
        rounds,
        against_quest,
        piece: asked.lesson.spec.piece,
        metric,
    }));
    let mut reports: Vec<(Report, CodeRef)> = Vec::new();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let b = ran(runner::run_with_env(&before_binary, request, before_env))?;
        let a = ran(runner::run(yours, request))?;
        let value = |r: &Report| r.metric(metric).ok_or(Stopped::MetricMissing(metric));
        let (vb, va) = (value(&b)?, value(&a)?);
        say(Progress::Round {
            round: round + 1,
            before: vb,
            after: va,
            metric,
        });
        before.push(vb);
        after.push(va);
        reports.push((b, original_code.clone()));
        reports.push((a, code.clone()));
    }
    let (median_before, median_after) = (median(&before), median(&after));
    let mut measured = Rounds {
        reports,
        taken: Measurement {
            metric: metric.key().into(),
            before,
            after,
        },
        metric,
        median_before,
        median_after,
        improvement: metric.improvement(median_before, median_after),
        also: Vec::new(),
    };
    // The medians of the lesson's other metrics, NaN where no run reported one.
    let of = |rounds: &Rounds, metric, code| rounds.median_of(metric, code).unwrap_or(f64::NAN);
    measured.also = measure
        .also
        .iter()
        .map(|&also| {
            let before = of(&measured, also, original_code);
            (also, before, of(&measured, also, code))
        })
        .collect();
    Ok(measured)
}
