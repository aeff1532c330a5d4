//! The channel between quest and an exercise binary, and the timing protocol.
//!
//! quest compiles any exercise source — the learner's file, a lesson's starting code,
//! a solution — as the one binary of the `quest-lab` package (`lab/`), which
//! `include!`s the file named by `QUEST_LAB_SOURCE` at build time; built binaries are
//! kept by the hash of their source. quest starts one with `QUEST_MODEL`,
//! `QUEST_MAX_TOKENS` and `QUEST_REPORT` set and its clock at descriptor 3 ([`clock`]):
//! the exercise asks for the prompt once its model is loaded, hands each token over as
//! it reaches the host, and writes a versioned JSON [`Report`] to `QUEST_REPORT`; the
//! times quest shows and awards are its clock's, the exercise's own timer's ride along
//! ([`Report::own`]). Run by hand, it uses the defaults below and prints its numbers.
//!
//! The exercise's side: `exercise.rs`, what runs inside the exercise's process
//! ([`Exercise`], [`Timer`], [`Report`], the journey's loop), its items re-exported here so
//! that an exercise's `quest::lab::…` paths hold; `ops.rs`, what one op costs the host
//! ([`graph_ops`], [`host_cost_per_op`]); [`bits`], the bit operations a quantized
//! exercise unpacks with. quest's side: [`runner`], which builds the exercise, starts it
//! and reads back what it wrote, and [`clock`], which times what arrives. quest's side
//! uses the exercise's, never the other way.

pub mod bits;
pub mod clock;
mod exercise;
pub mod load;
mod ops;
pub mod runner;

pub use exercise::{
    base_name, greedy, key, Exercise, Greedy, NoModel, Report, Step, Timer, TimerReading, Values,
    REPORT_SCHEMA,
};
pub use ops::{export_to_dot, graph_op_kinds, graph_ops, host_cost_per_op, OpCost};
