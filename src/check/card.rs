//! The learner's card and quiz: measured numbers are accepted only when quest
//! recorded something close for that code; answers are checked against the lesson's
//! answer, fixed or computed from what quest measured on this machine.

use std::collections::BTreeMap;

use crate::course::spec::{Answer, MeasuredAnswer, Question, EFFECT_SHOWS_RATIO};

/// What quest measured for the learner's code here, as measured answers need it.
#[derive(Clone, Copy, Debug, Default)]
pub struct MeasuredHere<'a> {
    /// The learner's improvement (see `Metric::improvement`) from quest's interleaved
    /// measurement.
    pub improvement: Option<f64>,
    /// quest's own values (`values:`) from the learner's latest checked run.
    pub values: Option<&'a BTreeMap<String, f64>>,
}

/// Why a claimed number was refused: what was claimed and what quest had measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    /// `before` or `after`.
    pub which: &'static str,
    pub claimed: f64,
    pub measured: Vec<f64>,
}

/// Accepts `claimed` when it is within `tolerance` (relative) of a measured value.
pub fn check_claim(
    which: &'static str,
    claimed: f64,
    measured: &[f64],
    tolerance: f64,
) -> Result<(), Refused> {
    let close = |m: &f64| claimed.is_finite() && (claimed - m).abs() <= tolerance * m.abs();
    if measured.iter().any(close) {
        Ok(())
    } else {
        Err(Refused {
            which,
            claimed,
            measured: measured.to_vec(),
        })
    }
}

/// The right answer to `question` here, from what quest measured for the learner's
/// code. `None`: the answer depends on a measurement that was not made yet.
pub fn correct_answer(question: &Question, measured: MeasuredHere) -> Option<String> {
    match &question.answer {
        Answer::Is(answer) => Some(answer.clone()),
        Answer::Measured {
            measured: MeasuredAnswer::EffectShows,
        } => measured.improvement.map(|ratio| {
            if ratio >= EFFECT_SHOWS_RATIO {
                "yes".into()
            } else {
                "no".into()
            }
        }),
        Answer::Measured {
            measured: MeasuredAnswer::Largest(of),
        } => {
            let values = measured.values?;
            let mut largest: Option<(&String, f64)> = None;
            for (choice, name) in of {
                let value = *values.get(name)?;
                if largest.is_none_or(|(_, best)| value > best) {
                    largest = Some((choice, value));
                }
            }
            largest.map(|(choice, _)| choice.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::Metric;

    #[test]
    fn claims_within_tolerance_of_a_measurement_pass() {
        assert!(check_claim("before", 10.1, &[8.0, 10.0], 0.15).is_ok());
        let refused = check_claim("after", 20.0, &[10.0], 0.15).unwrap_err();
        assert_eq!(refused.measured, [10.0]);
        assert!(check_claim("after", f64::NAN, &[10.0], 0.15).is_err());
        assert!(check_claim("after", 10.0, &[], 0.15).is_err());
    }

    #[test]
    fn improvement_follows_the_metric_direction() {
        assert_eq!(Metric::DecodeTokS.improvement(10.0, 15.0), Some(1.5));
        assert_eq!(Metric::TtftMs.improvement(300.0, 200.0), Some(1.5));
        assert_eq!(Metric::TtftMs.improvement(0.0, 200.0), None);
    }

    #[test]
    fn measured_answers_come_from_the_measurement() {
        let question: Question = serde_yaml::from_str(
            "{id: shows, choices: [yes, no], answer: {measured: effect_shows}}",
        )
        .unwrap();
        let ratio = |improvement| MeasuredHere {
            improvement,
            values: None,
        };
        assert_eq!(
            correct_answer(&question, ratio(Some(1.3))).as_deref(),
            Some("yes")
        );
        assert_eq!(
            correct_answer(&question, ratio(Some(1.02))).as_deref(),
            Some("no")
        );
        assert_eq!(correct_answer(&question, ratio(None)), None);
        let fixed: Question =
            serde_yaml::from_str("{id: term, choices: [fixed, bytes], answer: fixed}").unwrap();
        assert_eq!(
            correct_answer(&fixed, MeasuredHere::default()).as_deref(),
            Some("fixed")
        );
    }

    #[test]
    fn the_largest_value_is_the_answer() {
        let question: Question = serde_yaml::from_str(
            "{id: larger, choices: [fixed, bytes], answer: {measured: {largest: {fixed: f, bytes: b}}}}",
        )
        .unwrap();
        let values = |f: f64, b: f64| BTreeMap::from([("f".to_owned(), f), ("b".to_owned(), b)]);
        let here = |v| MeasuredHere {
            improvement: None,
            values: Some(v),
        };
        // A GPU: a 3.8 ms fixed term against 2.4 ms of bytes; a CPU: the other way round.
        let (gpu, cpu) = (values(3.8, 2.4), values(20.0, 700.0));
        assert_eq!(
            correct_answer(&question, here(&gpu)).as_deref(),
            Some("fixed")
        );
        assert_eq!(
            correct_answer(&question, here(&cpu)).as_deref(),
            Some("bytes")
        );
        let missing = BTreeMap::from([("f".to_owned(), 1.0)]);
        assert_eq!(correct_answer(&question, here(&missing)), None);
        assert_eq!(correct_answer(&question, MeasuredHere::default()), None);
    }
}
