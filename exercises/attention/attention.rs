// attention: every layer's scaled dot-product attention over the KV cache, written by you
// with MLX's ops.
// Your task (see the lesson): write `attention` so the model computes what MLX's fused
// attention computes. quest checks it alone first, on random tensors, then in the model.
//
// `queries` is [B, H, L, D]: L new positions. `keys` and `values` are the cache's view,
// [B, KV, S, D]: all S positions so far, the L new ones last. Grouped-query attention:
// H is a multiple of KV, and key head j serves query heads j·(H/KV) … (j+1)·(H/KV) − 1
// (SmolLM2: 9 query heads, 3 key/value heads).
//
//   scores  = q · kᵀ · scale                      [B, H, L, S], the query heads grouped
//                                                  by their key head (copy no key or value)
//   mask    = Some(Mask::Causal): query i sits at position S − L + i and sees keys 0..=S−L+i
//             (the whole cached prefix and the new positions up to itself); None: every key
//   weights = softmax(scores, over the keys)       in float32; a hidden key gets weight 0
//   out     = weights · v                          [B, H, L, D], in the queries' dtype

use anyhow::Result;
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
        todo!("group the key/value heads, score, mask, softmax, weigh the values")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer attends with MyAttention from here on.
    let model = model.with_pieces(MyAttention);
    run.decode(&model, &tokenizer)
}
