//! quest's integration tests, as one test binary (like mdBook's testsuite): every
//! extra binary would link MLX again, which costs real CI time on two cores.

mod all_lessons;
mod bad_models;
mod batch;
mod bench;
mod bits;
mod blas;
mod cli;
mod common;
mod data_lessons;
mod golden;
mod kernels;
mod lessons;
mod lm_helpers;
mod openai_client;
mod parser_robustness;
mod paths;
mod prebuilt;
mod progress_course;
mod progress_processes;
mod progress_store;
mod qwen3_5;
mod render_snapshots;
mod serve;
mod slope;
