// rms-norm: the norm every layer of the model calls, written by you with MLX's ops.
// Your task (see the lesson): write `rms_norm` so the model computes what MLX's fused
// norm computes. quest checks it alone first, on random tensors, then in the model.
//
// RMSNorm scales each position's hidden vector to a root mean square of one, then by a
// learned weight per channel, over the last axis (D channels):
//
//   rms_norm(x) = x · 1 / sqrt(mean(x²) + eps) · weight
//
// `x` is [.., D] (a block's [B, L, 576] in SmolLM2; Qwen3's per-head norms [B, L, heads,
// 128]) in the model's dtype (float32 on the CPU, float16 on a GPU); `weight` is [D]. The
// mean of the squares is taken in float32; the result has x's shape and dtype.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyNorm;

impl Pieces for MyNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        todo!("your norm: the lesson's tasks say what to write")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every norm of every layer, and the final one, is MyNorm's from here on.
    let model = model.with_pieces(MyNorm);
    run.decode(&model, &tokenizer)
}
