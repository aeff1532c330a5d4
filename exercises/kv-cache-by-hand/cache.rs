// kv-cache-by-hand: the KV cache every attention layer of the model calls, written by you.
// Your task (see the lesson): write `update_and_fetch`, `offset` and `trim` so the model
// decodes as it does with quest's cache. quest checks your cache alone first, on a few
// sequences of calls, then in the model.
//
// Keys and values are [B, H, L, D] (SmolLM2: [1, 3, L, 64] in each of 30 layers).
//
//   update_and_fetch(k, v): write the L new positions after the `offset` held, in place,
//     into buffers that grow by STEP positions at a time (zeros, joined on axis 2);
//     offset += L; return keys[.., .., ..offset, ..] and values[.., .., ..offset, ..].
//   offset(): how many positions are held.
//   trim(n): drop the last min(n, offset) positions; return how many went.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, KvStore};

/// Grow the buffers by this many positions at a time (mlx-lm's `KVCache.step`).
const STEP: i32 = 256;

#[derive(Clone, Default)]
struct MyCache {
    keys: Option<Array>,
    values: Option<Array>,
    offset: i32,
}

impl KvStore for MyCache {
    fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
        todo!("grow the buffers by STEP if the new positions do not fit, write them at offset, return every position held")
    }

    fn offset(&self) -> i32 {
        todo!("how many positions are held")
    }

    fn trim(&mut self, n: i32) -> i32 {
        todo!("drop the last n positions, no more than are held; return how many went")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer keeps its keys and values in a MyCache from here on.
    let model = model.with_cache(MyCache::default);
    run.decode(&model, &tokenizer)
}
