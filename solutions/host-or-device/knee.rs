// host-or-device, solved: where a decode step stops being the host's work.
//
// quest measures each shape's time per token here (random weights in public models'
// shapes) and counts the bytes each step reads; the line through the points is
// time per token = fixed + bytes / bandwidth, as the decode-ceiling lesson fitted it.
// You compute the knee — the bytes at which the bytes term has grown as large as the
// fixed term — and, for every shape, the fixed term's share of its step on the line.
// quest recomputes both from the same inputs and says which one differs.
// Solved: the knee and the shares.

use anyhow::Result;
use quest::lab::{Exercise, Values};
use quest::physics::{self, DecodeInputs, DecodePoint};

/// The shapes measured when the exercise runs by hand (`quest run` names the lesson's).
const SHAPES: &str = "SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B";

/// Bytes one decode step of a shape reads: its weights and its KV cache, counted by quest
/// (the decode-ceiling lesson counts them by hand).
fn bytes_per_token(inputs: &DecodeInputs, p: &DecodePoint) -> f64 {
    physics::reference_weight_bytes(&p.config, &inputs.layout)
        + physics::reference_kv_bytes_per_position(&p.config, inputs.layout.float_bytes)
            * p.context as f64
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // quest measures: each shape's ms per token, a fresh model each.
    let inputs = physics::measure_decode(&run, SHAPES)?;
    let mut values = Values::new();
    let mut points = Vec::new();
    for p in &inputs.points {
        let bytes = bytes_per_token(&inputs, p);
        values.set_for("bytes_per_token", &p.shape.name, bytes);
        points.push((bytes, p.ms_per_token));
    }
    // time per token = fixed_ms + bytes × ms_per_byte.
    let (fixed_ms, ms_per_byte) = quest::stats::least_squares(&points);
    // The knee: bytes × ms_per_byte = fixed_ms, so bytes = fixed_ms / ms_per_byte; in MB.
    let knee_mb = fixed_ms / ms_per_byte / 1e6;
    values.set("knee_mb", knee_mb);
    for (p, &(bytes, _)) in inputs.points.iter().zip(&points) {
        // On the line, a step is fixed_ms + bytes × ms_per_byte: the fixed term's part.
        let share = fixed_ms / (fixed_ms + bytes * ms_per_byte);
        values.set_for("fixed_share", &p.shape.name, share);
    }
    let text = format!(
        "time per token = {fixed_ms:.2} ms + bytes / {:.2} GB/s; the knee at {knee_mb:.0} MB",
        1e-6 / ms_per_byte
    );
    run.report_values(&inputs, &values, &text)
}
