// dequant-matvec: the 4-bit matrix-vector product every projection of the model runs,
// written with MLX's ops from the packed weights, their scales and their biases.
//
// A quantized row keeps each weight as a small integer q (4 bits: 0..=15), eight of them
// packed into one uint32, the first in the lowest bits. Each run of `group_size` weights
// along the row shares one scale and one bias: the weight is scale · q + bias.

use anyhow::Result;
use mlx_rs::ops::matmul;
use quest::lab::bits::{bitwise_and, right_shift};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyMatvec;

impl Pieces for MyMatvec {
    fn quantized_matmul(
        &self,
        x: &Array,
        weight: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        // Values packed in one uint32. The j-th sits bits·j bits up: divide by 2^(bits·j)
        // to bring it down, keep the remainder by 2^bits to drop the values above it.
        let per_word = 32 / bits;
        // Shifted down by bits·j, masked to its own bits.
        let shifts: Vec<u32> = (0..per_word).map(|j| (bits * j) as u32).collect();
        let shifts = Array::from_slice(&shifts, &[1, 1, per_word]);
        let mask = Array::from_slice(&[(1u32 << bits) - 1], &[1]);
        let q = bitwise_and(&right_shift(&weight.expand_dims(-1)?, &shifts)?, &mask)?;
        // [out, in / per_word, per_word] -> [out, groups, group_size], in the scales' dtype.
        let rows = weight.shape()[0];
        let q = q.reshape(&[rows, -1, group_size])?.as_dtype(scales.dtype())?;
        let w = q
            .multiply(scales.expand_dims(-1)?)?
            .add(biases.expand_dims(-1)?)?
            .reshape(&[rows, -1])?;
        // x · Wᵀ: each output is one row of W against x.
        Ok(matmul(x, w.transpose()?)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // The matrices as the file stores them, 4 bits a weight: by default quest's CPU
    // expands them to float32 at load, and your matvec would never be called.
    let (model, tokenizer) = lm::load_with(&run.model, lm::Hold::Quantized)?;
    // Every projection of every layer multiplies through MyMatvec from here on.
    let model = model.with_pieces(MyMatvec);
    run.decode(&model, &tokenizer)
}
