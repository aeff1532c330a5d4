// context-slope: every token of context adds bytes to every later step.
//
// quest measures, and hands you, this machine's bandwidth and each shape's time per
// token at growing context (random weights in a public model's shape, as `quest slope`).
// You compute each shape's KV bytes per token of context, and the slope those bytes alone
// predict; quest fits the measured slope beside it and checks your values.
// Your task (see the lesson): the bytes are counted wrong, and the time is quest's.

use anyhow::Result;
use quest::lab::{Exercise, Values};
use quest::physics::{self, ByteSizes, Shape};

/// The shapes measured when the exercise runs by hand (`quest run` names the lesson's):
/// a full-attention model and a hybrid of about the same size.
const SHAPES: &str = "Qwen3-0.6B,Qwen3.5-0.8B";
/// Tokens in the cache before each timed decode (`QUEST_CONTEXTS` overrides).
const CONTEXTS: &[usize] = &[64, 2048, 4096];

/// The bytes of KV cache one more token of context adds to every later decode step.
fn kv_bytes_per_context_token(shape: &Shape, layout: &ByteSizes) -> f64 {
    let attention_layers = shape.num_hidden_layers;
    // A key for each KV head.
    let per_layer = (shape.num_key_value_heads * shape.head_dim) as f64 * layout.float_bytes;
    attention_layers as f64 * per_layer
}

/// Extra ms per token for every 1000 tokens of context, if those bytes streamed at `gb_s`.
fn predicted_ms_per_1k(kv_bytes: f64, gb_s: f64) -> f64 {
    physics::reference_stream_ms(1000.0 * kv_bytes, gb_s)
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // quest measures: the bandwidth, and each shape's ms per token at each context.
    let inputs = physics::measure_slope(&run, SHAPES, CONTEXTS)?;
    let mut values = Values::new();
    let mut text = String::new();
    for s in &inputs.shapes {
        let kv = kv_bytes_per_context_token(&s.shape, &inputs.layout);
        let predicted = predicted_ms_per_1k(kv, inputs.bandwidth_gb_s);
        values.set_for("kv_bytes_per_context_token", &s.shape.name, kv);
        values.set_for("predicted_ms_per_1k", &s.shape.name, predicted);
        text += &format!(
            "{}: {:.1} MB of KV per 1000 tokens of context: +{predicted:.2} ms per token from bytes alone\n",
            s.shape.name,
            kv * 1000.0 / 1e6
        );
    }
    run.report_values(&inputs, &values, &text)
}
