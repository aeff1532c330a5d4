// The one binary every exercise is built as. quest sets QUEST_LAB_SOURCE to the file
// to compile (a learner's exercise, a lesson's starting code, a solution) and this
// build's script includes it here; its `main` is this binary's. See ../src/lab.rs.
include!(concat!(env!("OUT_DIR"), "/exercise.rs"));
