//! What sets the speed of a token, as an exercise measures it and quest checks it.
//!
//! An exercise of this kind asks quest to measure (`measure_decode`, `measure_slope`:
//! random-weights models in public shapes, as `quest fit` and `quest slope` do), computes
//! values from what it was given (bytes per token, a ceiling, a fitted line, a predicted
//! slope), and reports both: the inputs and its values ([`crate::lab::Exercise::report_values`]).
//! quest then recomputes every value from the same inputs with its own code
//! ([`arithmetic::compute`], chosen by the lesson's `values:`), and says which value differs.
//!
//! `measure` is what an exercise calls to measure and the inputs it is handed;
//! `arithmetic` is quest's own computation over them, which the checks use. This module
//! gives an exercise what it uses, as `quest::physics::…`: the measuring, and the
//! `reference_*` functions, quest's own arithmetic that a starting exercise calls and a
//! lesson's rules can forbid (they are matched by name).

pub mod arithmetic;
pub mod measure;

pub use arithmetic::{
    reference_attention_layers, reference_fit_line, reference_kv_bytes_per_position,
    reference_ops_per_token, reference_stream_ms, reference_weight_bytes,
};
pub use measure::{
    measure_decode, measure_slope, ByteSizes, DecodeInputs, DecodePoint, Shape, SlopeInputs,
    SlopePoints,
};
