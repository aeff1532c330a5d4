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
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm;
use quest::lm::blocks::{BlockAttention, Partial};

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
        todo!("one block's max, sum and weighted values: the lesson's tasks say how")
    }

    fn combine(&self, partials: Vec<Partial>) -> Result<Array> {
        todo!("the partials into the attention [B, H, L, D]: the lesson's tasks say how")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer attends through MyBlocks from here on: quest cuts a decode
    // step's cache into blocks, your code computes each and combines them.
    run.decode_in_blocks(model, &tokenizer, MyBlocks)
}
