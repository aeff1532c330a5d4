// attention: every layer's scaled dot-product attention over the KV cache, written with
// MLX's ops.
//
// Each query scores every key it may see, q · kᵀ · scale; the causal mask hides the keys
// after it; a softmax over the keys makes the scores weights; the output is the weighted
// sum of the values. SmolLM2 has 9 query heads and 3 key/value heads: each key head serves
// 3 query heads (grouped-query attention).

use anyhow::Result;
use mlx_rs::ops::{arange, broadcast_to, le, matmul, softmax_axis};
use mlx_rs::Array;
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
        let (b, heads, l) = (q[0], q[1], q[2]);
        let (kv_heads, s, d) = (k[1], k[2], k[3]);
        // Key head j serves query heads j·n … j·n + n − 1: [B, KV, 1, S, D] -> [B, H, S, D].
        let grouped = |t: &Array| -> Result<Array> {
            let wide = broadcast_to(t.expand_dims(2)?, &[b, kv_heads, heads / kv_heads, s, d])?;
            Ok(wide.reshape(&[b, heads, s, d])?)
        };
        let (keys, values) = (grouped(keys)?, grouped(values)?);
        // [B, H, L, S]: one score per query and key.
        let scores = matmul(
            queries.multiply(Array::from_f32(scale))?,
            keys.swap_axes(-1, -2)?,
        )?;
        let scores = match mask {
            // Query i is at position S − L + i: it sees the cached prefix and itself.
            Some(Mask::Causal) => {
                let query = arange::<_, i32>(s - l, s, None)?.reshape(&[l, 1])?;
                let key = arange::<_, i32>(0, s, None)?.reshape(&[1, s])?;
                // Additive: 0 where a key is seen, a large negative where it is not.
                let seen = le(&key, &query)?.as_dtype(scores.dtype())?;
                let penalty = seen.subtract(Array::from_f32(1.0))?.multiply(Array::from_f32(1e9))?;
                scores.add(penalty)?
            }
            None => scores,
        };
        let weights = softmax_axis(&scores, -1, true)?;
        Ok(matmul(&weights, &values)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer attends with MyAttention from here on.
    let model = model.with_pieces(MyAttention);
    run.decode(&model, &tokenizer)
}
