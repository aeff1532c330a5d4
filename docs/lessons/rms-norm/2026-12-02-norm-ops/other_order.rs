// rms-norm, measured: another honest ordering (sum / n, sqrt, divide).
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
        // The mean of the squares over the channels (the last axis), one per position.
        let n = *x.shape().last().unwrap() as f32;
        let mean_square = x.multiply(x)?.sum_axis(-1, true)?.divide(Array::from_f32(n))?;
        let rms = mean_square.add(Array::from_f32(eps))?.sqrt()?;
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
