// attention: every layer's scaled dot-product attention over the KV cache, written with
// MLX's ops.
//
// Each query scores every key it may see, q · kᵀ · scale; the causal mask hides the keys
// after it; a softmax over the keys makes the scores weights; the output is the weighted
// sum of the values. SmolLM2 has 9 query heads and 3 key/value heads: each key head serves
// 3 query heads (grouped-query attention), so the queries are grouped by their key head.

use anyhow::Result;
use mlx_rs::ops::{arange, le, matmul, select, softmax_axis};
use mlx_rs::{Array, Dtype};
use quest::lab::Exercise;
use quest::lm::{self, Mask, Pieces};

struct MyAttention;

impl Pieces for MyAttention {
    fn attention(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<Mask>,
    ) -> Result<Array> {
        // queries [B, H, L, D]; keys and values [B, KV, S, D]: all S positions so far.
        let (q, k) = (queries.shape().to_vec(), keys.shape().to_vec());
        let (b, heads, l, d) = (q[0], q[1], q[2], q[3]);
        let (kv_heads, s) = (k[1], k[2]);
        // Query heads j·n … j·n + n − 1 share key head j: group the queries, copy no key.
        // [B, H, L, D] -> [B, KV, n, L, D]; keys and values [B, KV, 1, S, D] broadcast.
        let grouped = queries.reshape(&[b, kv_heads, heads / kv_heads, l, d])?;
        let (keys, values) = (keys.expand_dims(2)?, values.expand_dims(2)?);
        // [B, KV, n, L, S]: one score per query and key, in float32 from here.
        let scores = matmul(&grouped, keys.swap_axes(-1, -2)?)?
            .as_dtype(Dtype::Float32)?
            .multiply(Array::from_f32(scale))?;
        let scores = match mask {
            // Query i is at position S − L + i: it sees the cached prefix and itself.
            Some(Mask::Causal) => {
                let query = arange::<_, i32>(s - l, s, None)?.reshape(&[l, 1])?;
                let key = arange::<_, i32>(0, s, None)?.reshape(&[1, s])?;
                let hidden = Array::from_f32(f32::NEG_INFINITY);
                select(le(&key, &query)?, &scores, hidden)?
            }
            None => scores,
        };
        // The softmax over the keys in float32; the weights back in the values' dtype.
        let weights = softmax_axis(&scores, -1, true)?.as_dtype(values.dtype())?;
        // [B, KV, n, L, D] -> [B, H, L, D]: the heads in their own order again.
        let out = matmul(&weights, &values)?;
        Ok(out.reshape(&[b, heads, l, d])?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer attends with MyAttention from here on.
    let model = model.with_pieces(MyAttention);
    run.decode(&model, &tokenizer)
}
