// dequant-matvec: the 4-bit matrix-vector product every projection of the model runs,
// written by you with MLX's ops from the packed weights, their scales and their biases.
// Your task (see the lesson): write `quantized_matmul` so the model computes what MLX's
// quantized matmul computes. quest checks it alone first, on random tensors, then in the
// model.
//
// `weight` is [out, in · bits / 32], uint32: each word packs 32 / bits values of `bits`
// bits (4 here: 0..=15), the first in the lowest bits, so value j of a word is
//
//   q_j = (word >> (bits · j)) & (2^bits − 1)
//
// Along a row, each run of `group_size` values shares one of `scales` and `biases`
// ([out, in / group_size]): the weight is w = scale · q + bias. Then, for `x` [B, L, in],
//
//   out = x · Wᵀ                                  [B, L, out], in x's dtype
//
// `quest::lab::bits::{right_shift, bitwise_and}` are MLX's shift and mask on integer
// arrays, wrapped for the exercise; `floor_divide` and `remainder` by powers of two do
// the same on unsigned words.

use anyhow::Result;
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
        todo!("your 4-bit matvec: the lesson's tasks say what to write")
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
