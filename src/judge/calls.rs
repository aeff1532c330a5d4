//! What quest's line says of the learner's code: the seam's call counts (the piece was
//! called, quest's own was not) and a figure timed inside the judged process against
//! quest's clock.

/// A figure timed inside the judged process (a decode step's graph building, the host's
/// part of it) checked against what quest's own clock timed from outside: the whole step.
/// Building is part of a step, so a median build time over the median step's wall time
/// (beyond `slack`, a share of the step) cannot be: `Some((build_ms, step_ms))` where it
/// is over. quest trusts the clock; the inside figure only within it.
pub fn inside_figure_over_clock(
    build_ms: &[f64],
    step_ms: &[f64],
    slack: f64,
) -> Option<(f64, f64)> {
    if build_ms.is_empty() || step_ms.is_empty() {
        return None;
    }
    let (build, step) = (
        crate::stats::median(build_ms),
        crate::stats::median(step_ms),
    );
    (build > step * (1.0 + slack)).then_some((build, step))
}

/// Why a run's counts of calls into the learner's piece do not show the learner's code
/// made its numbers ([`piece_calls_problem`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallsProblem {
    /// The run sent no counts on quest's line: it never reached the lab's report.
    NotCounted,
    /// The model never called the learner's piece: the pieces were not handed to it.
    NeverCalled,
    /// quest's own implementation of the piece ran `quest` times in the learner's
    /// process, against `seam` calls: a trait default, or quest's pieces called inside.
    QuestRan { quest: u64, seam: u64 },
    /// Fewer calls than the model has layers: some layer ran something else.
    TooFew { seam: u64, layers: usize },
    /// One of MLX's fused ops that the piece replaces computed `fused` of the `seam`
    /// outputs, read off their graphs (`op`: the first seen).
    Fused {
        op: crate::lm::graph::Fused,
        fused: u64,
        seam: u64,
    },
    /// `evaluated` of the `seam` outputs came back already evaluated: what computed them
    /// is not in the graph.
    Evaluated { evaluated: u64, seam: u64 },
}

/// Whether `calls` (quest's seam's counts, from quest's line) show that the model called
/// the learner's `piece` in every layer and quest's own never ran: `None` where they do.
pub fn piece_calls_problem(
    piece: crate::course::spec::Piece,
    calls: Option<&std::collections::BTreeMap<crate::course::spec::Piece, crate::lm::Calls>>,
    layers: usize,
) -> Option<CallsProblem> {
    let Some(calls) = calls else {
        return Some(CallsProblem::NotCounted);
    };
    let counted = calls.get(&piece).copied().unwrap_or_default();
    if let (Some(op), fused @ 1..) = (counted.fused_op, counted.fused) {
        return Some(CallsProblem::Fused {
            op,
            fused,
            seam: counted.seam,
        });
    }
    if counted.evaluated > 0 {
        return Some(CallsProblem::Evaluated {
            evaluated: counted.evaluated,
            seam: counted.seam,
        });
    }
    if counted.quest > 0 {
        return Some(CallsProblem::QuestRan {
            quest: counted.quest,
            seam: counted.seam,
        });
    }
    if counted.seam == 0 {
        return Some(CallsProblem::NeverCalled);
    }
    // A sampler and a speculator are called once a step, a prefill once: not a layer each.
    use crate::course::spec::Piece;
    let layers = if matches!(
        piece,
        Piece::Sample | Piece::Speculate | Piece::Prefill | Piece::Batching | Piece::Server
    ) {
        1
    } else {
        layers
    };
    (counted.seam < layers as u64).then_some(CallsProblem::TooFew {
        seam: counted.seam,
        layers,
    })
}
