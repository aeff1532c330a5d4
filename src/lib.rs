//! quest: a Rust workbook for LLM inference on MLX.
pub mod lab;
pub mod lm;
