//! The per-layer caches. Attention layers keep every position's keys and values
//! ([`KvCache`], preallocated in steps and written in place, as mlx-lm's `KVCache`, so a
//! decode step does not copy the whole history). Gated delta layers (Qwen3.5's linear
//! attention) keep a fixed-size state instead ([`RecurrentCache`], mlx-lm's `ArraysCache`).

use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::ops::{concatenate, zeros_dtype};
use mlx_rs::Array;

/// Grow the buffers by this many positions at a time.
pub const CACHE_STEP: i32 = 256;

/// Keys and values of one layer, shaped `[batch, kv_heads, positions, head_dim]`.
/// A clone shares the arrays (MLX arrays are values: writing to one copy leaves the other
/// as it was), so a filled cache can be decoded from more than once.
#[derive(Clone, Default)]
pub struct KvCache {
    keys: Option<Array>,
    values: Option<Array>,
    /// How many positions hold real entries (the rest of the buffer is spare room).
    pub offset: i32,
}

impl KvCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `keys`/`values` (`[B, H, L, D]`) after the current entries and returns views
    /// of everything cached so far, including them.
    pub fn update_and_fetch(
        &mut self,
        keys: &Array,
        values: &Array,
    ) -> mlx_rs::error::Result<(Array, Array)> {
        let new_len = keys.shape()[2];
        let previous = self.offset;
        let needed = previous + new_len;
        let capacity = self.keys.as_ref().map_or(0, |k| k.shape()[2]);
        if needed > capacity {
            let grow = ((new_len + CACHE_STEP - 1) / CACHE_STEP) * CACHE_STEP;
            let [b, h, _, dk] = dims4(keys);
            let dv = values.shape()[3];
            let more_k = zeros_dtype(&[b, h, grow, dk], keys.dtype())?;
            let more_v = zeros_dtype(&[b, h, grow, dv], values.dtype())?;
            match (self.keys.take(), self.values.take()) {
                (Some(k), Some(v)) => {
                    // Drop the unused tail before growing so the buffer stays a multiple of the step.
                    let k = k.index((.., .., ..previous, ..));
                    let v = v.index((.., .., ..previous, ..));
                    self.keys = Some(concatenate(&[k, more_k], 2)?);
                    self.values = Some(concatenate(&[v, more_v], 2)?);
                }
                _ => {
                    self.keys = Some(more_k);
                    self.values = Some(more_v);
                }
            }
        }
        self.offset = needed;
        let (cached_k, cached_v) = (self.keys.as_mut().unwrap(), self.values.as_mut().unwrap());
        cached_k.try_index_mut((.., .., previous..needed, ..), keys)?;
        cached_v.try_index_mut((.., .., previous..needed, ..), values)?;
        Ok((
            cached_k.index((.., .., ..needed, ..)),
            cached_v.index((.., .., ..needed, ..)),
        ))
    }

    /// The cache's arrays, to evaluate together with a step's output.
    pub fn state(&self) -> impl Iterator<Item = &Array> {
        self.keys.iter().chain(self.values.iter())
    }

    /// How many sequences the cache holds, once something was written to it.
    pub fn batch(&self) -> Option<i32> {
        self.keys.as_ref().map(|k| k.shape()[0])
    }

    /// Bytes the cache holds for real entries (what a decode step reads).
    pub fn nbytes_used(&self) -> usize {
        match (&self.keys, &self.values) {
            (Some(k), Some(v)) => {
                let per_position = |a: &Array| {
                    let s = a.shape();
                    (s[0] * s[1] * s[3]) as usize * a.item_size()
                };
                (per_position(k) + per_position(v)) * self.offset as usize
            }
            _ => 0,
        }
    }
}

/// A gated delta layer's memory: the same size after 10 tokens or 10,000.
#[derive(Clone, Default)]
pub struct RecurrentCache {
    /// The last `kernel - 1` inputs of the causal conv1d, `[batch, kernel - 1, channels]`.
    pub conv: Option<Array>,
    /// The recurrent state, `[batch, value_heads, value_dim, key_dim]`, float32.
    pub state: Option<Array>,
}

impl RecurrentCache {
    pub fn new() -> Self {
        Self::default()
    }
}

/// One layer's cache; which kind a layer needs is the model's business, so make them
/// with `lm::make_prompt_cache(&model)`.
#[derive(Clone)]
pub enum LayerCache {
    Kv(KvCache),
    Recurrent(RecurrentCache),
}

impl LayerCache {
    /// The cache's arrays, to evaluate together with a step's output.
    pub fn state(&self) -> Box<dyn Iterator<Item = &Array> + '_> {
        match self {
            LayerCache::Kv(kv) => Box::new(kv.state()),
            LayerCache::Recurrent(r) => Box::new(r.conv.iter().chain(r.state.iter())),
        }
    }

    /// How many sequences the cache holds (its arrays' first dimension); `None` while
    /// it is empty. A cache is made for one batch: the prefill sets it.
    pub fn batch(&self) -> Option<i32> {
        match self {
            LayerCache::Kv(kv) => kv.batch(),
            LayerCache::Recurrent(r) => r.state.as_ref().map(|s| s.shape()[0]),
        }
    }

    /// Bytes the cache holds for real entries: growing for KV, fixed for recurrent state.
    pub fn nbytes_used(&self) -> usize {
        match self {
            LayerCache::Kv(kv) => kv.nbytes_used(),
            LayerCache::Recurrent(r) => {
                r.conv.iter().chain(r.state.iter()).map(Array::nbytes).sum()
            }
        }
    }
}

fn dims4(a: &Array) -> [i32; 4] {
    let s = a.shape();
    [s[0], s[1], s[2], s[3]]
}
