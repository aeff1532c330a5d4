// decode-ceiling: time ≈ fixed + max(bytes / bandwidth, operations / compute rate), on
// this machine.
//
// quest measures, and hands you, this machine's bandwidth and compute rate and each
// shape's time per token (random weights in a public model's shape). You compute each
// shape's bytes and multiply-adds per token and the ceiling they allow, then the line
// through the measured points. quest recomputes every value from the same inputs and says
// which one differs.
// Your task (see the lesson): one matrix, the KV cache and attention are missing, and the
// line is quest's.

use anyhow::Result;
use quest::lab::{Exercise, Values};
use quest::physics::{self, ByteSizes, DecodeInputs, DecodePoint};

/// The shapes measured when the exercise runs by hand (`quest run` names the lesson's).
const SHAPES: &str = "SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B";

/// Weights of every matrix one decode step multiplies by, whole.
fn matrix_weights(point: &DecodePoint) -> f64 {
    let s = &point.shape;
    let (h, layers) = (s.hidden_size as f64, s.num_hidden_layers as f64);
    let q = (s.num_attention_heads * s.head_dim) as f64; // query width
    let kv = (s.num_key_value_heads * s.head_dim) as f64; // key (and value) width
    let ffn = s.intermediate_size as f64;
    // Each layer: q, k, v and o projections, and the MLP's gate, up and down.
    let layer_matrices = h * q + 2.0 * h * kv + q * h + 3.0 * h * ffn;
    layers * layer_matrices
}

/// Bytes one decode step reads: every weight it multiplies by, and the KV cache.
fn bytes_per_token(point: &DecodePoint, layout: &ByteSizes) -> f64 {
    let s = &point.shape;
    let (h, layers) = (s.hidden_size as f64, s.num_hidden_layers as f64);
    // Each layer's two norms, Qwen3's norms on queries and keys, the final norm.
    let qk_norm = if s.qk_norm {
        2.0 * s.head_dim as f64
    } else {
        0.0
    };
    let vectors = layers * (2.0 * h + qk_norm) + h;
    matrix_weights(point) * layout.matrix_bytes + vectors * layout.float_bytes
}

/// Multiply-adds one decode step does: one per weight of every matrix, and attention's.
fn ops_per_token(point: &DecodePoint) -> f64 {
    matrix_weights(point)
}

/// tok/s if a step took only the longer of its two terms: its bytes read at the measured
/// bandwidth, or its multiply-adds done at the measured compute rate.
fn ceiling_tok_s(bytes: f64, ops: f64, inputs: &DecodeInputs) -> f64 {
    let read_s = bytes / (inputs.bandwidth_gb_s * 1e9);
    let compute_s = ops / (inputs.compute_gmac_s * 1e9);
    1.0 / read_s.max(compute_s)
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // quest measures: this machine's two rates, and each shape's ms per token.
    let inputs = physics::measure_decode(&run, SHAPES)?;
    let mut values = Values::new();
    let mut points = Vec::new();
    for p in &inputs.points {
        let bytes = bytes_per_token(p, &inputs.layout);
        let ops = ops_per_token(p);
        values.set_for("bytes_per_token", &p.shape.name, bytes);
        values.set_for("ops_per_token", &p.shape.name, ops);
        values.set_for(
            "ceiling_tok_s",
            &p.shape.name,
            ceiling_tok_s(bytes, ops, &inputs),
        );
        points.push((bytes, p.ms_per_token));
    }
    // time per token = fixed + bytes / bandwidth: the intercept in ms, the slope in ms
    // per byte (one byte in 1/slope ms is 1e-6/slope GB/s). quest's line, for now.
    let (fixed_ms, ms_per_byte) = physics::reference_fit_line(&points);
    values.set("fixed_ms", fixed_ms);
    values.set("fit_gb_s", 1e-6 / ms_per_byte);
    let text = format!(
        "time per token = {fixed_ms:.2} ms + bytes / {:.2} GB/s (measured: {:.2} GB/s, {:.1} G multiply-adds/s)",
        1e-6 / ms_per_byte,
        inputs.bandwidth_gb_s,
        inputs.compute_gmac_s
    );
    run.report_values(&inputs, &values, &text)
}
