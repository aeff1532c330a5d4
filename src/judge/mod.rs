//! The judge: everything that decides whether the learner's code, yours, does what the
//! lesson asks. One vocabulary, written in docs/ARCHITECTURE.md's glossary:
//!
//! - a **check** is one entry of the lesson's list ([`checks`], [`Check`]): rules, copied,
//!   build, piece, logits, draws, behaviour, feeds, repeat, tokens, values, measure;
//! - the [`Judge`] takes one piece of code, a [`Subject`], through the list one check at a
//!   time: binaries through `lab::runner`, every decision through the pure functions below;
//! - each check ends in one [`Outcome`]: [`Passed`] with what it found, [`Refused`] with a
//!   typed reason carrying the numbers, or [`Stopped`] where it cannot judge;
//! - the decisions are pure functions over the lesson's data and what was measured, one
//!   file per thing judged: the code's syntax (`rules`, `code`), tokens, logits, a piece's
//!   calls, feeds, draws, the effect, and a card's claims and quiz answers (`claims`,
//!   `card`).
//!
//! Nothing here prints or writes the progress file: `quest submit` says each outcome in the
//! learner's language and records it; `quest dev check` runs the same checks on a lesson's
//! starting code (which they must refuse) and its solution (which they must pass). The
//! piece check's measurement runs in the exercise's process (`lm::piece_check`); what it
//! found is judged here ([`judge_piece`]).

mod calls;
mod card;
mod claims;
mod code;
mod draws;
mod effect;
mod feeds;
mod list;
mod logits;
mod measure;
mod outcome;
pub mod rules;
mod runner;
mod sources;
mod tokens;

#[cfg(test)]
mod tests;

pub use calls::{inside_figure_over_clock, piece_calls_problem, CallsProblem};
pub use card::{
    card_attempts, card_problems, evidence, first_try_bonus, is_measured, judge_waiting,
    measured_already, predictions, CardProblem, PredictionProblem,
};
pub use claims::{ClaimRefused, Evidence};
pub use code::{lesson_code, same_as_solution};
pub use draws::{draws_compared, DrawsVerdict, StepDraws};
pub use effect::{effect, unmoved, Effect};
pub use feeds::{feed_problems, FeedProblem};
pub use list::{checks, Check};
pub use logits::{layers_compared, logits_compared, LayersVerdict, LogitsGap, LogitsVerdict};
pub use outcome::{
    Heading, LayersApart, Outcome, Passed, PieceJudged, Progress, Refused, Rounds, Stopped,
    TokensAgreed, ValuesCompared,
};
pub use runner::{
    compare_values, inside_over_clock, judge_draws, judge_piece, Judge, Judged, Subject,
};
pub use sources::{solution_path, starting_code_file};
pub use tokens::{first_difference, tokens_against_quest, tokens_compared, AgainstQuest};
