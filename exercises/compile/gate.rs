// compile: the MLP's gate, built once instead of on every call.
// Your task (see the lesson): make `swiglu` reuse one compiled function, so that building
// a decode step's graph stops tracing and compiling `silu` again in every layer.
//
// SwiGLU is the feed-forward's gate: silu(gate) · up, with silu(x) = x · sigmoid(x).
// The model calls it once per layer per step, between the up and down projections.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyGate;

impl Pieces for MyGate {
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        // mlx-rs's `silu` is a compiled function, made anew on every call: MLX traces
        // and compiles x · sigmoid(x) again each time, on the host, in every layer.
        // TODO: compile silu(gate) · up once and call that instead.
        Ok(mlx_rs::nn::silu(gate)?.multiply(up)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's gate is MyGate's from here on.
    let model = model.with_pieces(MyGate);
    run.decode(&model, &tokenizer)
}
