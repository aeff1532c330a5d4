//! The learner's card: before/after decode tok/s and which term of the decode-ceiling
//! formula changed. Numbers are accepted only when quest measured something close.

use crate::progress::{CodeKind, Run};

/// A claimed number must be within this fraction of a run quest recorded for that code.
pub const CARD_TOLERANCE: f64 = 0.15;

/// The decode-ceiling formula's terms: time per token = fixed + bytes / bandwidth.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Term {
    /// The per-step cost that does not depend on the bytes read: syncs, launches, the host.
    Fixed,
    /// Bytes read per token over memory bandwidth.
    Bytes,
}

impl Term {
    pub fn as_str(self) -> &'static str {
        match self {
            Term::Fixed => "fixed",
            Term::Bytes => "bytes",
        }
    }
}

/// Removing the per-token sync changes the fixed term; the weights read per token stay.
pub const CORRECT_TERM: Term = Term::Fixed;

/// Why a claimed number was refused: what was claimed and what quest had measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    pub which: &'static str,
    pub claimed: f64,
    pub measured: Vec<f64>,
}

/// Checks a claimed tok/s against recorded runs of one kind of code.
pub fn check_claim(
    which: &'static str,
    claimed: f64,
    runs: &[Run],
    kind: CodeKind,
) -> Result<(), Refused> {
    let measured: Vec<f64> = runs
        .iter()
        .filter(|r| r.code.kind == kind)
        .map(|r| r.decode_tok_s)
        .collect();
    let close = |m: &f64| claimed.is_finite() && (claimed - m).abs() <= CARD_TOLERANCE * m;
    if measured.iter().any(close) {
        Ok(())
    } else {
        Err(Refused {
            which,
            claimed,
            measured,
        })
    }
}

/// The median of a non-empty list.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}
