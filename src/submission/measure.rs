//! The measurement: the starting code (or quest's own pieces) and the code judged,
//! interleaved round by round, medians; then what must move and the effect, decided by
//! `grade`.

use std::path::Path;

use anyhow::Result;

use crate::course::spec::{Baseline, Measure};
use crate::course::Metric;
use crate::grade::{self, Effect};
use crate::lab::runner;
use crate::lab::Report;
use crate::progress::{CodeRef, Measurement};
use crate::stats::median;

use super::outcome::{Heading, Outcome, Passed, Progress, Refused, Stopped};
use super::runner::{build, ran, Judge, Subject};
use super::sources::starting_code_file;

/// What the interleaved rounds measured.
#[derive(Clone)]
pub struct Rounds {
    /// Every report, with the code it ran (the baseline's and the judged code's, in turn).
    pub reports: Vec<(Report, CodeRef)>,
    /// The metric's values, baseline and judged code, round by round.
    pub taken: Measurement,
    pub metric: Metric,
    pub median_before: f64,
    pub median_after: f64,
    /// The medians' improvement (`None`: not measurable).
    pub improvement: Option<f64>,
    /// The lesson's other metrics (`measure.also`): their medians, baseline and judged.
    pub also: Vec<(Metric, f64, f64)>,
}

impl Rounds {
    /// The median of `metric` over the runs of `code` (`None`: none reported it).
    fn median_of(&self, metric: Metric, code: &CodeRef) -> Option<f64> {
        let values: Vec<f64> = self
            .reports
            .iter()
            .filter(|(_, c)| c == code)
            .filter_map(|(r, _)| r.metric(metric))
            .collect();
        (!values.is_empty()).then(|| median(&values))
    }
}

/// The measurement of `binary` (the subject's) against the lesson's baseline; refused
/// where what the change is about did not move or the effect does not show.
pub(super) fn measure<'l>(
    judge: &Judge<'l>,
    binary: &Path,
    subject: &Subject,
    say: &mut dyn FnMut(Progress),
) -> Result<Outcome<'l>> {
    let lesson = judge.lesson;
    let Some(measure) = &lesson.spec.measure else {
        return Ok(Outcome::Passed(Passed::NotAsked));
    };
    let (starting, original_code) = starting_code_file(lesson)?;
    let baseline = (starting.as_path(), &original_code);
    let rounds = measure_rounds(judge, measure, baseline, (binary, &subject.code), say)?;
    let unmoved = grade::unmoved(&measure.moves, |metric, yours| {
        rounds.median_of(metric, if yours { &subject.code } else { &original_code })
    });
    if !unmoved.is_empty() {
        return Ok(Outcome::Refused(Refused::Unmoved { rounds, unmoved }));
    }
    let backend = subject
        .first_run
        .as_ref()
        .map_or("", |run| run.backend.as_str());
    Ok(
        match grade::effect(&lesson.spec, backend, rounds.improvement) {
            Effect::Missing { ratio, at_least } => Outcome::Refused(Refused::EffectMissing {
                rounds,
                ratio,
                at_least,
            }),
            effect => Outcome::Passed(Passed::Measure {
                rounds,
                effect,
                backend: backend.to_owned(),
            }),
        },
    )
}

/// The interleaved rounds, each round said as it is measured: the baseline (the
/// starting code's file and its code) against the judged binary and its code.
fn measure_rounds(
    judge: &Judge,
    measure: &Measure,
    (starting, original_code): (&Path, &CodeRef),
    (yours, code): (&Path, &CodeRef),
    say: &mut dyn FnMut(Progress),
) -> Result<Rounds> {
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
    let rounds = judge.rounds.unwrap_or(measure.rounds).max(1);
    say(Progress::Checking(Heading::Measure {
        rounds,
        against_quest,
        sampler: judge.lesson.spec.draws.is_some(),
        metric,
    }));
    let request = &judge.request;
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
