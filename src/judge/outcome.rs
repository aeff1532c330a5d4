//! What a check found: passed with what it measured, refused with why (and the
//! numbers), or stopped before it could judge. Data only: the CLI says it.

use super::rules::Finding;
use super::{CallsProblem, Effect, FeedProblem, LayersVerdict, LogitsGap, StepDraws};
use crate::course::spec::Move;
use crate::course::Metric;
use crate::lab::clock::Disagreement;
use crate::lab::{Report, Values};
use crate::lm::piece_check::Verdict;
use crate::lm::Sampling;
use crate::physics::arithmetic;
use crate::progress::{CodeRef, Measurement};
use crate::stats::median;

/// A check's end: passed, or refused (the submission stops there).
pub enum Outcome<'l> {
    Passed(Passed),
    Refused(Refused<'l>),
}

/// What a passed check found, for the learner to read.
pub enum Passed {
    /// The lesson asks nothing of this check.
    NotAsked,
    Rules,
    Copied,
    Build,
    /// Every shape of the piece right.
    Piece(Verdict),
    /// Every step's logits within `tolerance` of quest's: the largest difference, its
    /// step, and the steps where the argmax differs all the same (near ties).
    Logits {
        steps: usize,
        largest: f32,
        at_step: usize,
        near_ties: Vec<usize>,
        tolerance: f32,
    },
    /// The draws' mean distance from the distribution, honest draws' and their spread.
    Draws {
        distance: f64,
        honest: f64,
        spread: f64,
    },
    /// The first run kept the rules of the process; where its first token reached quest's
    /// clock after the decode had begun, that is named (its numbers are quest's all the
    /// same, the hold gaining nothing).
    Behaviour {
        held_back: Option<crate::lab::clock::HeldBack>,
    },
    Feeds,
    /// The same seed gave the same `n` tokens again.
    Repeat {
        n: usize,
    },
    Tokens(TokensAgreed),
    Values(ValuesCompared),
    /// The rounds measured, and the effect: shown, or expected on another backend than
    /// `backend`, where the first run ran.
    Measure {
        rounds: Rounds,
        effect: Effect,
        backend: crate::device::Backend,
    },
}

/// How the first run's tokens agreed with the solution's.
pub enum TokensAgreed {
    /// Nothing to compare: no solution run.
    NotCompared,
    /// The first `n` agree.
    Same { n: usize },
    /// They part at a near tie of the logits check (at this step), where the run's
    /// tokens are still quest's computation.
    NearTie(usize),
    /// They part from the solution's, but are quest's own greedy tokens.
    Quests,
}

/// The values a run computed beside quest's own computation from its inputs.
pub struct ValuesCompared {
    /// Each checked value, the run's and quest's.
    pub checked: Vec<arithmetic::Checked>,
    /// Everything quest computed (recorded with the run, for measured quiz answers).
    pub quest: Values,
}

impl ValuesCompared {
    /// Every checked value within the tolerance.
    pub fn agree(&self) -> bool {
        self.checked.iter().all(|c| c.ok)
    }
}

/// How the piece check judged a piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceJudged {
    /// Every shape right.
    Passed,
    /// Some shape wrong.
    Wrong,
    /// The exercise never handed the piece to the model.
    NotHanded,
    /// Still `todo!()` everywhere.
    NotWritten,
    /// quest's own ran on every shape (a trait default left in place).
    QuestRan,
    /// MLX's fused op the piece replaces computed some shape, or some output came back
    /// evaluated (its graph shows nothing): read off the output's graph.
    Fused,
}

/// Why a check refused the code, with what it measured.
pub enum Refused<'l> {
    /// The rules the code breaks.
    Rules(Vec<Finding>),
    /// The code is the solution's.
    Copied,
    /// The piece check's verdict (`None`: never handed to the model).
    Piece {
        judged: PieceJudged,
        verdict: Option<Verdict>,
    },
    /// quest's count of the seam's calls does not show the learner's piece ran.
    Calls(CallsProblem),
    /// The first step whose logits left quest's beyond `tolerance`, and the first layer
    /// apart there where both models said theirs.
    LogitsBeyond {
        gap: LogitsGap,
        tolerance: f32,
        apart: LayersApart,
    },
    /// The run wrote logits for `steps` steps of `expected`.
    LogitsMissing { steps: usize, expected: usize },
    /// The draws beyond the tolerance: their distance, honest draws', the spread, and the
    /// furthest step.
    DrawsBeyond {
        distance: f64,
        honest: f64,
        spread: f64,
        worst: StepDraws,
    },
    /// The run wrote draws for `steps` steps of `expected`.
    DrawsMissing { steps: usize, expected: usize },
    /// A figure timed inside the process is over quest's clock: the build and step ms.
    InsideOverClock { build: f64, step: f64 },
    /// The exercise's own timer and quest's clock disagree.
    ClockDisagrees(Disagreement),
    /// The run decoded `got` sequences, the lesson asks for `batch`.
    Batch { got: usize, batch: usize },
    /// The feed rules the run broke.
    Feeds(Vec<FeedProblem<'l>>),
    /// The same seed gave other tokens at `at`: both runs' texts.
    Repeat {
        at: usize,
        first: String,
        again: String,
    },
    /// The tokens part from the solution's at `at`: the solution's text and the run's.
    Tokens {
        at: usize,
        expected: String,
        got: String,
    },
    /// Some value is not quest's: the comparison, and the run it came from.
    Values {
        compared: ValuesCompared,
        run: Box<Report>,
    },
    /// What the change is about did not move: each such metric's medians, starting code
    /// and this code.
    Unmoved {
        rounds: Rounds,
        unmoved: Vec<(&'l Move, Option<f64>, Option<f64>)>,
    },
    /// The effect did not show where the lesson says it does.
    EffectMissing {
        rounds: Rounds,
        ratio: Option<f64>,
        at_least: f64,
    },
}

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
    pub(super) fn median_of(&self, metric: Metric, code: &CodeRef) -> Option<f64> {
        let values: Vec<f64> = self
            .reports
            .iter()
            .filter(|(_, c)| c == code)
            .filter_map(|(r, _)| r.metric(metric))
            .collect();
        (!values.is_empty()).then(|| median(&values))
    }
}

/// Where a refused step's hidden states first left quest's.
pub enum LayersApart {
    /// Not compared: a model that reported no layers (a decoder of the learner's own), or
    /// not asked.
    Unknown,
    /// The refused step's layers compared; `layers` quest's count.
    Compared {
        step: usize,
        layers: usize,
        verdict: LayersVerdict,
    },
}

/// What a check says while it runs, before its outcome.
pub enum Progress {
    /// A check begins.
    Checking(Heading),
    /// One interleaved round measured: the starting code's value and this code's.
    Round {
        round: usize,
        before: f64,
        after: f64,
        metric: Metric,
    },
}

/// The heading a check begins with.
pub enum Heading {
    Rules,
    Piece(crate::course::spec::Piece),
    /// `measured`: whether the lesson's tolerance was measured in this float type.
    Logits {
        tolerance: f32,
        measured: bool,
    },
    Draws {
        per_step: usize,
        sampling: Sampling,
    },
    Feeds,
    Repeat,
    Tokens,
    Values,
    /// `rounds` interleaved rounds of `metric`, against quest's own pieces (in a sampler)
    /// or against the starting code.
    Measure {
        rounds: usize,
        against_quest: bool,
        /// The lesson's piece, whose baseline the heading names (a sampler, a speculator).
        piece: Option<crate::course::spec::Piece>,
        metric: Metric,
    },
}

/// Why a check could not judge at all (an error, not a refusal).
#[derive(Debug)]
pub enum Stopped {
    /// An exercise's process failed, as the runner said.
    Run(anyhow::Error),
    /// A values lesson's run reported no inputs quest computes from.
    NoInputs(anyhow::Error),
    /// A measured run did not report the lesson's metric.
    MetricMissing(Metric),
    /// The exercise does not run on this backend: its run stopped after what it checks.
    RunsElsewhere(crate::device::Backend),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Run(e) | Stopped::NoInputs(e) => write!(f, "{e:#}"),
            Stopped::MetricMissing(metric) => {
                write!(f, "the run did not report {}", metric.key())
            }
            Stopped::RunsElsewhere(backend) => {
                write!(f, "the exercise does not run on {}", backend.name())
            }
        }
    }
}

impl std::error::Error for Stopped {}

/// An exercise's run, its failure typed as one ([`Stopped::Run`]).
pub(super) fn ran<T>(result: anyhow::Result<T>) -> anyhow::Result<T> {
    result.map_err(|e| Stopped::Run(e).into())
}
