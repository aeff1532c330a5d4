// rms-norm: the norm every layer of the model calls, written with MLX's ops.
//
// RMSNorm scales each position's hidden vector to a root mean square of one, then by a
// learned weight per channel: x · rsqrt(mean(x²) + eps) · weight, over the last axis.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyNorm;

impl Pieces for MyNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        // My order: the sum of squares over the width, divided by it, its root, then divide.
        let width = x.shape()[x.ndim() - 1] as f32;
        let ms = x.square()?.sum_axis(-1, true)?.divide(Array::from_f32(width))?;
        let rms = ms.add(Array::from_f32(eps))?.sqrt()?;
        Ok(x.divide(&rms)?.multiply(weight)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every norm of every layer, and the final one, is MyNorm's from here on.
    let model = model.with_pieces(MyNorm);
    run.decode(&model, &tokenizer)
}
