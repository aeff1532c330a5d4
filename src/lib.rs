//! quest: a Rust workbook for LLM inference on MLX.
pub mod bench;
pub mod check;
pub mod course;
pub mod device;
pub mod grade;
pub mod kernels;
pub mod lab;
pub mod lm;
pub mod physics;
pub mod progress;
pub mod render;
pub mod settings;
pub mod stats;
