// attention-blocks: a decode query's attention over a long cache, a block of keys at a
// time, as flash-decoding computes it.
// Your task (see the lesson): write `block`, what one block of keys leaves of the
// attention, and `combine`, the blocks' partials made into the softmax over every key.
//
// For one block, with s = q · kᵀ · scale over its keys (the hidden keys at −∞):
//
//   max = max_j s_j      sum = Σ_j e^(s_j − max)      out = Σ_j e^(s_j − max) · v_j
//
// For the blocks b together, with M = max_b max_b:
//
//   attention = Σ_b e^(max_b − M) · out_b  /  Σ_b e^(max_b − M) · sum_b
//
// SmolLM2 has 9 query heads and 3 key/value heads: each key head serves 3 query heads.

use anyhow::Result;
use mlx_rs::ops::{exp, matmul, maximum, select};
use mlx_rs::{Array, Dtype};
use quest::lab::Exercise;
use quest::lm::blocks::{BlockAttention, Partial};
use quest::lm;

struct MyBlocks;

impl BlockAttention for MyBlocks {
    fn block(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<&Array>,
    ) -> Result<Partial> {
        // queries [B, H, L, D]; keys and values [B, KV, T, D]: this block's T keys.
        let (q, k) = (queries.shape().to_vec(), keys.shape().to_vec());
        let (b, heads, l, d) = (q[0], q[1], q[2], q[3]);
        let kv_heads = k[1];
        // Query heads j·n … j·n + n − 1 share key head j: [B, KV, n, L, D] against
        // [B, KV, 1, T, D], broadcast.
        let grouped = queries.reshape(&[b, kv_heads, heads / kv_heads, l, d])?;
        let (keys, values) = (keys.expand_dims(2)?, values.expand_dims(2)?);
        // [B, KV, n, L, T] in float32: exponentials of a block's scores, summed.
        let scores = matmul(&grouped, keys.swap_axes(-1, -2)?)?
            .as_dtype(Dtype::Float32)?
            .multiply(Array::from_f32(scale))?;
        let scores = match mask {
            Some(visible) => select(visible, &scores, Array::from_f32(f32::NEG_INFINITY))?,
            None => scores,
        };
        let max = scores.max_axis(-1, true)?;
        let weights = exp(scores.subtract(&max)?)?;
        let sum = weights.sum_axis(-1, true)?;
        let out = matmul(&weights, values.as_dtype(Dtype::Float32)?)?;
        Ok(Partial { out, max, sum })
    }

    fn combine(&self, partials: Vec<Partial>) -> Result<Array> {
        // The largest score of all: each block's weights rescaled to it.
        let mut top = partials[0].max.clone();
        for p in &partials[1..] {
            top = maximum(&top, &p.max)?;
        }
        let (mut out, mut sum) = (Array::from_f32(0.0), Array::from_f32(0.0));
        for p in &partials {
            let rescale = exp(p.max.subtract(&top)?)?;
            out = out.add(p.out.multiply(&rescale)?)?;
            sum = sum.add(p.sum.multiply(&rescale)?)?;
        }
        // [B, KV, n, L, D] -> [B, H, L, D].
        let out = out.divide(&sum)?;
        let s = out.shape().to_vec();
        Ok(out.reshape(&[s[0], s[1] * s[2], s[3], s[4]])?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer attends through MyBlocks from here on: quest cuts a decode
    // step's cache into blocks, your code computes each and combines them.
    run.decode_in_blocks(model, &tokenizer, MyBlocks)
}
