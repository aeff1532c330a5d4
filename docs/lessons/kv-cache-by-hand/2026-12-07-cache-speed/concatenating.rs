// kv-cache-by-hand, measured: the lesson's solution (preallocated in steps of 256), a cache that concatenates every step
// and never preallocates (`grown` left unused).
//
// Keys and values are [B, H, L, D]. The buffers grow by STEP positions at a time and each
// call writes its L new positions in place (a slice update), so a decode step does not copy
// the history. `offset` counts the positions held; `trim(n)` drops the last n of them.

use anyhow::Result;
use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::ops::{concatenate, zeros_dtype};
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

/// `buffer` with room for `needed` positions: the held ones kept, zeros after them.
fn grown(buffer: Option<&Array>, held: i32, needed: i32, new: &Array) -> Result<Array> {
    let s = new.shape();
    let capacity = buffer.map_or(0, |b| b.shape()[2]);
    match buffer {
        Some(b) if needed <= capacity => Ok(b.clone()),
        _ => {
            let more = ((needed - held + STEP - 1) / STEP) * STEP;
            let zeros = zeros_dtype(&[s[0], s[1], more, s[3]], new.dtype())?;
            match buffer {
                Some(b) => Ok(concatenate(&[b.index((.., .., ..held, ..)), zeros], 2)?),
                None => Ok(zeros),
            }
        }
    }
}

impl KvStore for MyCache {
    fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
        let previous = self.offset;
        let needed = previous + keys.shape()[2];
        let join = |held: Option<&Array>, new: &Array| -> Result<Array> {
            Ok(match held {
                Some(h) => concatenate(&[h.index((.., .., ..previous, ..)), new.clone()], 2)?,
                None => new.clone(),
            })
        };
        let (k, v) = (join(self.keys.as_ref(), keys)?, join(self.values.as_ref(), values)?);
        let _ = grown;
        self.offset = needed;
        let held = (k.index((.., .., ..needed, ..)), v.index((.., .., ..needed, ..)));
        self.keys = Some(k);
        self.values = Some(v);
        Ok(held)
    }

    fn offset(&self) -> i32 {
        self.offset
    }

    fn trim(&mut self, n: i32) -> i32 {
        let n = n.clamp(0, self.offset);
        self.offset -= n;
        n
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer keeps its keys and values in a MyCache from here on.
    let model = model.with_cache(MyCache::default);
    run.decode(&model, &tokenizer)
}
