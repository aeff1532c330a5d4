//! `quest submit`'s checks as a library: from the lesson's spec, the list of checks
//! ([`checks`]); a runner that takes a piece of code through them one at a time
//! ([`Judge::run`]: binaries through `lab::runner`, every decision through `grade`); and
//! typed outcomes ([`Outcome`]: passed with what was found, refused with why and the
//! numbers). Nothing here prints or writes the progress file: `quest submit` says each
//! outcome in the learner's language and records it, `quest dev check` runs the same
//! checks on a lesson's starting code (which they must refuse) and its solution (which
//! they must pass).

mod list;
mod measure;
mod outcome;
mod runner;
mod sources;

pub use list::{checks, Check};
pub use outcome::{
    Heading, LayersApart, Outcome, Passed, PieceJudged, Progress, Refused, Rounds, Stopped,
    TokensAgreed, ValuesCompared,
};
pub use runner::{
    compare_values, inside_over_clock, judge_draws, judge_piece, Judge, Judged, Subject,
};
pub use sources::{solution_path, starting_code_file};
