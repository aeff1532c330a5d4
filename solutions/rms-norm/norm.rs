// rms-norm: the norm every layer of the model calls, written with MLX's ops.
//
// RMSNorm scales each position's hidden vector to a root mean square of one, then by a
// learned weight per channel: x · rsqrt(mean(x²) + eps) · weight, over the last axis.
// As MLX's own fallback (mlx/fast.cpp): the mean and the scaling in float32, the result
// cast back to x's dtype before the weight.

use anyhow::Result;
use mlx_rs::{Array, Dtype};
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyNorm;

impl Pieces for MyNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        // The model's dtype: float32 on the CPU, float16 on a GPU. The result goes back to it.
        let dtype = x.dtype();
        // The squares summed in float32: in float16 a value past 256 squares past 65504.
        let x = x.as_dtype(Dtype::Float32)?;
        let squares = x.square()?;
        // One mean square per position, over the channels (the last axis): [.., 1].
        let mean_square = squares.mean_axis(-1, true)?;
        let inverse_rms = mean_square.add(Array::from_f32(eps))?.rsqrt()?;
        // Each position scaled to a root mean square of one, then back in the model's dtype.
        let normed = x.multiply(&inverse_rms)?;
        let normed = normed.as_dtype(dtype)?;
        // Then each channel by its learned weight, as MLX's fallback does after the cast.
        Ok(normed.multiply(weight)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every norm of every layer, and the final one, is MyNorm's from here on.
    let model = model.with_pieces(MyNorm);
    run.decode(&model, &tokenizer)
}
