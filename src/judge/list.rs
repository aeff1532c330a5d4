//! The list of checks a lesson's submission goes through, read from its spec.

use crate::course::spec::{LessonSpec, TokenCheck};

/// One check of a submission, in the order they run: each may refuse the code, and
/// none runs after a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The code against the lesson's rules, read from its syntax tree.
    Rules,
    /// The solution copied over the exercise.
    Copied,
    /// The code built, and where the exercise runs (`runs_on`).
    Build,
    /// A piece of the model alone against quest's own (`piece:`).
    Piece,
    /// The piece's logits in the model, step by step (`logits:`).
    Logits,
    /// A sampler's draws against its distribution (`draws:`).
    Draws,
    /// The first run (and the solution's, where tokens are compared): the piece called,
    /// the clock agreeing, the batch asked for.
    Behaviour,
    /// What the run fed the model (`feeds:`).
    Feeds,
    /// A sampler's tokens, run again with the same seed (`tokens: repeatable`).
    Repeat,
    /// The first run's tokens against the solution's (`tokens:`).
    Tokens,
    /// The values it computed against quest's (`values:`).
    Values,
    /// Starting code and this code interleaved, medians: what must move moved, the
    /// effect shows where the lesson says it does (`measure:`).
    Measure,
}

impl Check {
    /// The check's name, as an author reads it.
    pub fn name(self) -> &'static str {
        match self {
            Check::Rules => "rules",
            Check::Copied => "copied",
            Check::Build => "build",
            Check::Piece => "piece",
            Check::Logits => "logits",
            Check::Draws => "draws",
            Check::Behaviour => "behaviour",
            Check::Feeds => "feeds",
            Check::Repeat => "repeat",
            Check::Tokens => "tokens",
            Check::Values => "values",
            Check::Measure => "measure",
        }
    }

    /// Whether the check judges what the code computes (against quest's own): those a
    /// lesson's starting code must fail and its solution pass.
    pub fn judges_results(self) -> bool {
        matches!(
            self,
            Check::Piece | Check::Logits | Check::Draws | Check::Values
        )
    }
}

/// The checks a submission of this lesson goes through, in order; a lesson without an
/// exercise has none.
pub fn checks(spec: &LessonSpec) -> Vec<Check> {
    if spec.exercise.is_none() {
        return Vec::new();
    }
    let asked = [
        (Check::Rules, true),
        (Check::Copied, true),
        (Check::Build, true),
        (Check::Piece, spec.piece.is_some()),
        (Check::Logits, spec.logits.is_some()),
        (Check::Draws, spec.draws.is_some()),
        (Check::Behaviour, true),
        (Check::Feeds, !spec.feeds.is_empty()),
        (Check::Repeat, spec.tokens == TokenCheck::Repeatable),
        (
            Check::Tokens,
            matches!(spec.tokens, TokenCheck::Exact | TokenCheck::First(_)),
        ),
        (Check::Values, spec.values.is_some()),
        (Check::Measure, spec.measure.is_some()),
    ];
    asked
        .into_iter()
        .filter_map(|(check, asked)| asked.then_some(check))
        .collect()
}
