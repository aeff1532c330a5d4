//! A card's claims: a measured number is accepted only when quest recorded something
//! close for that code; a quiz answer is checked against the lesson's answer, fixed or
//! computed from what quest measured on this machine. `card` judges the card with them.

use std::collections::BTreeMap;

use crate::course::spec::{Answer, MeasuredAnswer, Question, EFFECT_SHOWS_RATIO};

/// Why a claimed number was refused: what was claimed and what quest had measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRefused {
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
) -> Result<(), ClaimRefused> {
    let close = |m: &f64| claimed.is_finite() && (claimed - m).abs() <= tolerance * m.abs();
    if measured.iter().any(close) {
        Ok(())
    } else {
        Err(ClaimRefused {
            which,
            claimed,
            measured: measured.to_vec(),
        })
    }
}

/// What quest measured on this machine for the learner's code, as the measured
/// answers need it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Evidence<'a> {
    /// The learner's improvement on the lesson's metric (see [`Metric::improvement`])
    /// in the interleaved measurement of this code.
    pub improvement: Option<f64>,
    /// Megabytes of weights per token: (the baseline's, the learner's).
    pub weight_mb: Option<(f64, f64)>,
    /// quest's own values from the learner's latest checked run of this code (`values:`).
    pub values: Option<&'a BTreeMap<String, f64>>,
}

/// The right answer to `question` here, from what was measured. `None`: the answer
/// depends on a measurement that was not made yet.
pub fn correct_answer(question: &Question, evidence: &Evidence) -> Option<String> {
    let yes_no = |yes: bool| Some(if yes { "yes" } else { "no" }.to_owned());
    match &question.answer {
        Answer::Is(answer) => Some(answer.clone()),
        Answer::Measured {
            measured: MeasuredAnswer::EffectShows,
            ..
        } => yes_no(evidence.improvement? >= EFFECT_SHOWS_RATIO),
        Answer::Measured {
            measured: MeasuredAnswer::Improvement,
            from,
        } => {
            let ratio = evidence.improvement?;
            from.iter()
                .filter(|(_, &least)| ratio >= least)
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(choice, _)| choice.clone())
        }
        Answer::Measured {
            measured: MeasuredAnswer::FewerBytesFaster,
            ..
        } => {
            let (ratio, (before, after)) = (evidence.improvement?, evidence.weight_mb?);
            // The improvement of the code that read fewer bytes over the other one.
            let fewer_gained = if after < before {
                ratio
            } else if before < after {
                1.0 / ratio
            } else {
                return yes_no(false);
            };
            yes_no(fewer_gained >= EFFECT_SHOWS_RATIO)
        }
        Answer::Measured {
            measured: MeasuredAnswer::Largest(of),
            ..
        } => {
            let values = evidence.values?;
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

    fn improved(ratio: f64) -> Evidence<'static> {
        Evidence {
            improvement: Some(ratio),
            ..Evidence::default()
        }
    }

    #[test]
    fn measured_answers_come_from_the_measurement() {
        let question: Question = serde_yaml::from_str(
            "{id: shows, choices: [yes, no], answer: {measured: effect_shows}}",
        )
        .unwrap();
        assert_eq!(
            correct_answer(&question, &improved(1.3)).as_deref(),
            Some("yes")
        );
        assert_eq!(
            correct_answer(&question, &improved(1.02)).as_deref(),
            Some("no")
        );
        assert_eq!(correct_answer(&question, &Evidence::default()), None);
        let fixed: Question =
            serde_yaml::from_str("{id: term, choices: [fixed, bytes], answer: fixed}").unwrap();
        assert_eq!(
            correct_answer(&fixed, &Evidence::default()).as_deref(),
            Some("fixed")
        );
    }

    #[test]
    fn fewer_bytes_faster_asks_the_code_that_read_fewer() {
        let question: Question = serde_yaml::from_str(
            "{id: q, choices: [yes, no], answer: {measured: fewer_bytes_faster}}",
        )
        .unwrap();
        let answer = |ratio: f64, before: f64, after: f64| {
            let evidence = Evidence {
                improvement: Some(ratio),
                weight_mb: Some((before, after)),
                values: None,
            };
            correct_answer(&question, &evidence)
        };
        // The learner's code reads fewer bytes: its own gain counts.
        assert_eq!(answer(1.5, 538.0, 84.0).as_deref(), Some("yes"));
        assert_eq!(answer(0.45, 538.0, 84.0).as_deref(), Some("no"));
        assert_eq!(answer(1.05, 538.0, 151.0).as_deref(), Some("no"));
        // The baseline reads fewer: it must be the faster one.
        assert_eq!(answer(0.5, 84.0, 538.0).as_deref(), Some("yes"));
        assert_eq!(answer(1.2, 84.0, 538.0).as_deref(), Some("no"));
        // No fewer bytes on either side: the premise fails.
        assert_eq!(answer(2.0, 538.0, 538.0).as_deref(), Some("no"));
        // Either measurement missing: not known yet.
        assert_eq!(correct_answer(&question, &improved(1.5)), None);
        let bytes_only = Evidence {
            weight_mb: Some((538.0, 84.0)),
            ..Evidence::default()
        };
        assert_eq!(correct_answer(&question, &bytes_only), None);
    }

    #[test]
    fn an_improvement_answer_is_the_band_it_falls_in() {
        let question: Question = serde_yaml::from_str(
            "{id: gain, choices: [none, some, big], \
              answer: {measured: improvement, from: {big: 3.0, some: 1.5, none: 0}}}",
        )
        .unwrap();
        let answer = |ratio| correct_answer(&question, &improved(ratio));
        assert_eq!(answer(3.6).as_deref(), Some("big"));
        assert_eq!(answer(3.0).as_deref(), Some("big"));
        assert_eq!(answer(2.9).as_deref(), Some("some"));
        assert_eq!(answer(1.0).as_deref(), Some("none"));
        assert_eq!(answer(0.4).as_deref(), Some("none"));
        assert_eq!(correct_answer(&question, &Evidence::default()), None);
    }

    #[test]
    fn the_largest_value_is_the_answer() {
        let question: Question = serde_yaml::from_str(
            "{id: larger, choices: [fixed, bytes], answer: {measured: {largest: {fixed: f, bytes: b}}}}",
        )
        .unwrap();
        let values = |f: f64, b: f64| BTreeMap::from([("f".to_owned(), f), ("b".to_owned(), b)]);
        let here = |v| Evidence {
            values: Some(v),
            ..Evidence::default()
        };
        // A GPU: a 3.8 ms fixed term against 2.4 ms of bytes; a CPU: the other way round.
        let (gpu, cpu) = (values(3.8, 2.4), values(20.0, 700.0));
        assert_eq!(
            correct_answer(&question, &here(&gpu)).as_deref(),
            Some("fixed")
        );
        assert_eq!(
            correct_answer(&question, &here(&cpu)).as_deref(),
            Some("bytes")
        );
        let missing = BTreeMap::from([("f".to_owned(), 1.0)]);
        assert_eq!(correct_answer(&question, &here(&missing)), None);
        assert_eq!(correct_answer(&question, &Evidence::default()), None);
    }
}
