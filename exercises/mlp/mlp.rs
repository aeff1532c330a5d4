// mlp: the SwiGLU gate every layer's feed-forward calls, written by you with MLX's ops.
// Your task (see the lesson): write `swiglu` so the model computes what quest's gate
// computes. quest checks it alone first, on random tensors, then in the model.
//
// Each layer's MLP is down_proj(swiglu(gate_proj(x), up_proj(x))). quest computes both
// projections and down_proj; the gate between them is yours:
//
//   swiglu(gate, up) = silu(gate) · up,   silu(g) = g · sigmoid(g) = g / (1 + e^(−g))
//
// `gate` and `up` are [B, L, 1536] (one value per channel of the intermediate width);
// the result has their shape and dtype.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MySwiGlu;

impl Pieces for MySwiGlu {
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        todo!("silu of the gate, times up")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's gate is MySwiGlu's from here on.
    let model = model.with_pieces(MySwiGlu);
    run.decode(&model, &tokenizer)
}
