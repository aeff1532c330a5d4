//! The per-layer caches. Attention layers keep every position's keys and values
//! ([`KvCache`], preallocated in steps and written in place, as mlx-lm's `KVCache`, so a
//! decode step does not copy the whole history). Gated delta layers (Qwen3.5's linear
//! attention) keep a fixed-size state instead ([`RecurrentCache`], mlx-lm's `ArraysCache`).

use std::sync::Arc;

use mlx_rs::ops::indexing::{IndexOp, TryIndexMutOp};
use mlx_rs::ops::{concatenate, zeros_dtype};
use mlx_rs::{Array, Dtype};

/// Grow the buffers by this many positions at a time.
pub const CACHE_STEP: i32 = 256;

/// Keys and values of one layer, shaped `[batch, kv_heads, positions, head_dim]`.
/// A clone shares the arrays (MLX arrays are values: writing to one copy leaves the other
/// as it was), so a filled cache can be decoded from more than once.
///
/// quest's decode attention kernel (crate::kernels::attend) writes a step's key and value into the
/// buffers itself, outside MLX's graph; it may only do so while no clone shares them
/// ([`KvCache::buffers_to_write`]), so a clone keeps its contents either way.
#[derive(Clone, Default)]
pub struct KvCache {
    keys: Option<Array>,
    values: Option<Array>,
    /// How many positions hold real entries (the rest of the buffer is spare room).
    pub offset: i32,
    /// Shared by the clones of a cache until one of them gets buffers of its own: while
    /// it is shared, nothing may be written into the buffers in place.
    owner: Arc<()>,
    /// The last step written in place (crate::kernels::attend): evaluated with the cache's state, so
    /// evaluating the cache performs the write, as it does for MLX's `slice_update`.
    pending: Option<Array>,
    /// A cache the learner wrote, handed to the model ([`crate::lm::Model::with_cache`]):
    /// every call goes to it, counted on its way in, and `offset` follows its own.
    handed: Option<Handed>,
    /// Rows of different requests in one batch (`crate::lm::batching`), set for a step
    /// and only for it.
    rows: Option<RowsStep>,
}

/// A step of rows of different requests, each padded on the left to the batch's
/// positions (`crate::lm::batching`).
#[derive(Clone)]
pub struct RowsStep {
    /// Which positions each row's query may see, `[B, 1, 1, offset + 1]` booleans (false
    /// over the row's padding).
    pub mask: Array,
    /// Each row's own position of the step's token, `[B]` int32: its RoPE position (the
    /// batch's offset less the row's padding, as the row's keys were turned alone).
    pub positions: Array,
}

/// One layer's keys and values as a learner writes them, mlx-lm's `KVCache`: the model
/// calls `update_and_fetch` once a layer each forward and reads `offset` for the next
/// positions (RoPE's); `trim(n)` drops the last `n` positions, returning how many went.
/// Derive `Clone` (a filled cache may be decoded from more than once).
pub trait KvStore: KvStoreClone + Send {
    /// Writes `keys`/`values` (`[B, H, L, D]`) after the positions held and returns
    /// every position held, them included: `[B, H, offset, D]` each.
    fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> anyhow::Result<(Array, Array)>;
    /// How many positions it holds.
    fn offset(&self) -> i32;
    /// Drops the last `n` positions (no more than it holds); returns how many it dropped.
    fn trim(&mut self, n: i32) -> i32;
}

/// A boxed copy of a [`KvStore`], for any that is `Clone`.
pub trait KvStoreClone {
    fn clone_box(&self) -> Box<dyn KvStore>;
}

impl<T: KvStore + Clone + 'static> KvStoreClone for T {
    fn clone_box(&self) -> Box<dyn KvStore> {
        Box::new(self.clone())
    }
}

/// Makes one layer's learner's cache ([`crate::lm::Model::with_cache`]).
pub type MakeStore = std::rc::Rc<dyn Fn() -> Box<dyn KvStore>>;

/// `cache` with a learner's store from `make` in each attention layer's place.
pub fn hand_over(cache: Vec<LayerCache>, make: &MakeStore) -> Vec<LayerCache> {
    cache
        .into_iter()
        .map(|layer| match layer {
            LayerCache::Kv(_) => LayerCache::Kv(KvCache::handed(make())),
            other => other,
        })
        .collect()
}

/// The learner's cache inside quest's: one per layer.
struct Handed(Box<dyn KvStore>);

impl Clone for Handed {
    fn clone(&self) -> Self {
        Handed(self.0.clone_box())
    }
}

/// Whether quest's own cache counts as quest's piece here: only where the lesson has the
/// learner write the cache (anywhere else every model runs quest's).
fn counts_as_quests() -> bool {
    crate::line::lesson_piece() == Some(crate::course::spec::Piece::KvCache)
}

impl KvCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache whose every call goes to the learner's `store` (counted as the seam's).
    pub fn handed(store: Box<dyn KvStore>) -> Self {
        Self {
            offset: store.offset(),
            handed: Some(Handed(store)),
            ..Self::default()
        }
    }

    /// A cache holding `keys` and `values` (`[B, H, T, D]`, every position real), with
    /// room to grow as [`KvCache::update_and_fetch`] would have left it: one copy, so the
    /// steps after it write in place.
    pub fn holding(keys: &Array, values: &Array) -> anyhow::Result<Self> {
        let [b, h, t, dk] = dims4(keys);
        let [vb, vh, vt, dv] = dims4(values);
        anyhow::ensure!(
            (vb, vh, vt) == (b, h, t),
            "keys {:?} and values {:?} must hold the same rows, heads and positions",
            keys.shape(),
            values.shape()
        );
        let mut cache = Self::new();
        cache.reserve(t, [b, h, dk, dv], keys.dtype())?;
        cache.offset = t;
        let (k, v) = (cache.keys.as_mut().unwrap(), cache.values.as_mut().unwrap());
        k.try_index_mut((.., .., ..t, ..), keys)?;
        v.try_index_mut((.., .., ..t, ..), values.as_dtype(keys.dtype())?)?;
        Ok(cache)
    }

    /// The keys and values of every position held, `[B, H, offset, D]` each (`None`
    /// before anything was written).
    pub fn held(&self) -> Option<(Array, Array)> {
        if self.handed.is_some() {
            return None;
        }
        let (k, v) = (self.keys.as_ref()?, self.values.as_ref()?);
        let n = self.offset;
        Some((k.index((.., .., ..n, ..)), v.index((.., .., ..n, ..))))
    }

    /// The next step's rows, where rows of different requests share the cache.
    pub fn rows(&self) -> Option<&RowsStep> {
        self.rows.as_ref()
    }

    /// Sets (or clears) the next step's rows ([`KvCache::rows`]).
    pub(crate) fn set_rows(&mut self, rows: Option<RowsStep>) {
        self.rows = rows;
    }

    /// Whether the learner's cache is in it.
    pub fn is_handed(&self) -> bool {
        self.handed.is_some()
    }

    /// Writes `keys`/`values` (`[B, H, L, D]`) after the current entries and returns views
    /// of everything cached so far, including them.
    pub fn update_and_fetch(
        &mut self,
        keys: &Array,
        values: &Array,
    ) -> anyhow::Result<(Array, Array)> {
        if let Some(Handed(store)) = self.handed.as_mut() {
            crate::lm::pieces::seam_called(crate::course::spec::Piece::KvCache);
            let fetched = store.update_and_fetch(keys, values)?;
            self.offset = store.offset();
            return Ok(fetched);
        }
        if counts_as_quests() {
            crate::lm::pieces::quest_ran(crate::course::spec::Piece::KvCache);
        }
        Ok(self.quests_update_and_fetch(keys, values)?)
    }

    /// Drops the last `n` positions (no more than it holds), mlx-lm's `trim`: the buffers
    /// stay, the next write lands over them. Returns how many positions went.
    pub fn trim(&mut self, n: i32) -> i32 {
        if let Some(Handed(store)) = self.handed.as_mut() {
            let trimmed = store.trim(n);
            self.offset = store.offset();
            return trimmed;
        }
        let n = n.clamp(0, self.offset);
        self.offset -= n;
        n
    }

    fn quests_update_and_fetch(
        &mut self,
        keys: &Array,
        values: &Array,
    ) -> mlx_rs::error::Result<(Array, Array)> {
        let [b, h, new_len, dk] = dims4(keys);
        let previous = self.offset;
        let needed = previous + new_len;
        self.reserve(needed, [b, h, dk, values.shape()[3]], keys.dtype())?;
        self.offset = needed;
        let (cached_k, cached_v) = (self.keys.as_mut().unwrap(), self.values.as_mut().unwrap());
        cached_k.try_index_mut((.., .., previous..needed, ..), keys)?;
        cached_v.try_index_mut((.., .., previous..needed, ..), values)?;
        // MLX's `slice_update` writes in place only a buffer nothing else holds; else it
        // copies. Either way the buffers are this cache's own from here on.
        if Arc::strong_count(&self.owner) > 1 {
            self.owner = Arc::new(());
        }
        Ok((
            cached_k.index((.., .., ..needed, ..)),
            cached_v.index((.., .., ..needed, ..)),
        ))
    }

    /// Room for `needed` positions: the buffers grow by [`CACHE_STEP`]s, for `[b, h]` heads
    /// of `[dk, dv]` channels in `dtype`.
    fn reserve(
        &mut self,
        needed: i32,
        [b, h, dk, dv]: [i32; 4],
        dtype: Dtype,
    ) -> mlx_rs::error::Result<()> {
        let previous = self.offset;
        let capacity = self.keys.as_ref().map_or(0, |k| k.shape()[2]);
        if needed <= capacity {
            return Ok(());
        }
        let grow = ((needed - previous + CACHE_STEP - 1) / CACHE_STEP) * CACHE_STEP;
        let more_k = zeros_dtype(&[b, h, grow, dk], dtype)?;
        let more_v = zeros_dtype(&[b, h, grow, dv], dtype)?;
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
        // New buffers, held by this cache alone.
        self.owner = Arc::new(());
        Ok(())
    }

    /// The key and value buffers with room for one more position of `[b, h]` heads of `d`
    /// channels in `dtype`, for a kernel to write that position in place — or `None` where
    /// it must not: the buffers are shared with a clone, hold another batch or dtype, or
    /// are not there yet (the prompt makes them, through [`KvCache::update_and_fetch`]).
    pub fn buffers_to_write(
        &mut self,
        [b, h, d]: [i32; 3],
        dtype: Dtype,
    ) -> mlx_rs::error::Result<Option<(Array, Array)>> {
        let fits = |a: &Array| {
            let s = a.shape();
            a.dtype() == dtype && s[0] == b && s[1] == h && s[3] == d
        };
        if self.handed.is_some() {
            return Ok(None);
        }
        match (&self.keys, &self.values) {
            (Some(k), Some(v)) if fits(k) && fits(v) && Arc::strong_count(&self.owner) == 1 => {}
            _ => return Ok(None),
        }
        self.reserve(self.offset + 1, [b, h, d, d], dtype)?;
        Ok(self.keys.clone().zip(self.values.clone()))
    }

    /// One position was written into the buffers from [`KvCache::buffers_to_write`] by
    /// the kernel that computes `step` (evaluating the cache evaluates it).
    pub fn wrote_one(&mut self, step: &Array) {
        self.offset += 1;
        self.pending = Some(step.clone());
    }

    /// The cache's arrays, to evaluate together with a step's output.
    pub fn state(&self) -> impl Iterator<Item = &Array> {
        self.keys
            .iter()
            .chain(self.values.iter())
            .chain(self.pending.iter())
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

/// Drops the last `n` positions of every layer's cache, mlx-lm's `trim_prompt_cache`: what
/// a speculative decoder does with the positions the model did not keep. Only KV caches
/// can go back; a recurrent state cannot, and then nothing is trimmed. Returns how many
/// positions went.
pub fn trim_prompt_cache(cache: &mut [LayerCache], n: i32) -> i32 {
    if cache.iter().any(|c| matches!(c, LayerCache::Recurrent(_))) {
        return 0;
    }
    let mut trimmed = 0;
    for layer in cache.iter_mut() {
        if let LayerCache::Kv(kv) = layer {
            trimmed = kv.trim(n);
        }
    }
    trimmed
}

fn dims4(a: &Array) -> [i32; 4] {
    let s = a.shape();
    [s[0], s[1], s[2], s[3]]
}

/// quest's own cache as a [`KvStore`]: the reference the learner's is checked against
/// (each call counted as quest's where the lesson is the cache's).
impl KvStore for KvCache {
    fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> anyhow::Result<(Array, Array)> {
        KvCache::update_and_fetch(self, keys, values)
    }
    fn offset(&self) -> i32 {
        self.offset
    }
    fn trim(&mut self, n: i32) -> i32 {
        KvCache::trim(self, n)
    }
}

impl crate::kernels::CacheWrite for KvCache {
    fn offset(&self) -> i32 {
        self.offset
    }
    fn buffers_to_write(
        &mut self,
        bhd: [i32; 3],
        dtype: Dtype,
    ) -> anyhow::Result<Option<(Array, Array)>> {
        Ok(KvCache::buffers_to_write(self, bhd, dtype)?)
    }
    fn wrote_one(&mut self, step: &Array) {
        KvCache::wrote_one(self, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_moves_the_offset_back_and_the_next_write_lands_over_it() {
        let mut cache = vec![
            LayerCache::Kv(KvCache::new()),
            LayerCache::Kv(KvCache::new()),
        ];
        for layer in cache.iter_mut() {
            if let LayerCache::Kv(kv) = layer {
                kv.update_and_fetch(&positions(5), &positions(5)).unwrap();
            }
        }
        assert_eq!(trim_prompt_cache(&mut cache, 2), 2);
        assert_eq!(trim_prompt_cache(&mut cache, 9), 3);
        let LayerCache::Kv(kv) = &mut cache[0] else {
            unreachable!()
        };
        assert_eq!(kv.offset, 0);
        let (k, _) = kv.update_and_fetch(&positions(1), &positions(1)).unwrap();
        assert_eq!(k.shape(), [1, 2, 1, 8]);
        let mut recurrent = vec![LayerCache::Recurrent(RecurrentCache::new())];
        assert_eq!(trim_prompt_cache(&mut recurrent, 1), 0);
    }

    fn positions(n: i32) -> Array {
        Array::ones::<f32>(&[1, 2, n, 8])
            .unwrap()
            .as_dtype(Dtype::Float16)
            .unwrap()
    }

    const SHAPE: [i32; 3] = [1, 2, 8];

    #[test]
    fn only_a_cache_no_clone_shares_hands_out_its_buffers_to_write() {
        let mut cache = KvCache::new();
        // Nothing to write into before the prompt made the buffers.
        assert!(cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_none());
        cache
            .update_and_fetch(&positions(3), &positions(3))
            .unwrap();
        let (k, _) = cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .unwrap();
        assert_eq!(k.shape(), [1, 2, CACHE_STEP, 8]);
        // Another batch, head count or dtype is not these buffers' to take.
        assert!(cache
            .buffers_to_write([2, 2, 8], Dtype::Float16)
            .unwrap()
            .is_none());
        assert!(cache
            .buffers_to_write([1, 4, 8], Dtype::Float16)
            .unwrap()
            .is_none());
        assert!(cache
            .buffers_to_write(SHAPE, Dtype::Float32)
            .unwrap()
            .is_none());

        // A clone shares the buffers: neither may write into them in place.
        let mut clone = cache.clone();
        assert!(cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_none());
        assert!(clone
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_none());
        // Once the clone writes through MLX's ops (which copy a shared buffer), each holds
        // its own again.
        clone
            .update_and_fetch(&positions(1), &positions(1))
            .unwrap();
        assert!(clone
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_some());
        assert!(cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_some());
        assert_eq!((cache.offset, clone.offset), (3, 4));
    }

    #[test]
    fn a_position_written_in_place_moves_the_offset_and_is_evaluated_with_the_state() {
        let mut cache = KvCache::new();
        cache
            .update_and_fetch(&positions(2), &positions(2))
            .unwrap();
        let step = Array::from_slice(&[1.0f32], &[1]);
        cache.wrote_one(&step);
        assert_eq!(cache.offset, 3);
        assert_eq!(
            cache.state().count(),
            3,
            "keys, values and the step that wrote them"
        );
    }

    #[test]
    fn the_buffers_grow_for_the_position_after_the_last() {
        let mut cache = KvCache::new();
        let full = CACHE_STEP;
        cache
            .update_and_fetch(&positions(full), &positions(full))
            .unwrap();
        let (k, v) = cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .unwrap();
        assert_eq!(k.shape(), [1, 2, 2 * CACHE_STEP, 8]);
        assert_eq!(v.shape(), [1, 2, 2 * CACHE_STEP, 8]);
        // The history is kept, the new room is zeros.
        let kept = k
            .index((.., .., ..full, ..))
            .sum(None)
            .unwrap()
            .as_dtype(Dtype::Float32)
            .unwrap()
            .item_exact::<f32>();
        let room = k
            .index((.., .., full.., ..))
            .sum(None)
            .unwrap()
            .as_dtype(Dtype::Float32)
            .unwrap()
            .item_exact::<f32>();
        assert_eq!((kept, room), ((2 * full * 8) as f32, 0.0));
        // The grown buffers are the cache's own.
        assert!(cache
            .buffers_to_write(SHAPE, Dtype::Float16)
            .unwrap()
            .is_some());
    }
}
