// The one binary every exercise is built as. quest sets QUEST_LAB_SOURCE to the file
// to compile (a learner's exercise, a lesson's starting code, a solution) and this
// build's script includes it here; its `main` is this binary's. See ../src/lab.rs.
//
// The package forbids `unsafe` (lab/Cargo.toml) and has no mlx-sys: the exercise reaches
// MLX through mlx-rs and quest alone, and quest's line only through the lab's API.
//
// A starting exercise is a signature and `todo!()`: its parameters and helpers are unused
// until the learner writes the body. Those warnings would bury the compiler's real ones.
#![allow(unused_variables, dead_code, unreachable_code)]
include!(concat!(env!("OUT_DIR"), "/exercise.rs"));
