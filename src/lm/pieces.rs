//! The learner's piece inside quest's model: one small seam where the model calls its
//! parts, as mlx-lm's model files call `mx.fast.*` (the model reaches them through
//! [`crate::lm::fast::Fast`], which chooses between them and quest's own). Every method has quest's own
//! implementation as its default (MLX's fused op); an exercise overrides one and hands
//! its pieces to the model:
//!
//! ```text
//! struct MyNorm;
//! impl Pieces for MyNorm {
//!     fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> { … }
//! }
//! let (model, tokenizer) = lm::load(&run.model)?;
//! let model = model.with_pieces(MyNorm); // every norm of every layer is now MyNorm's
//! ```
//!
//! What runs through the seam: every `RmsNorm` of the model — each block's
//! `input_layernorm` and `post_attention_layernorm`, Qwen3's per-head `q_norm` and
//! `k_norm`, the final `model.norm` — every block's whole MLP (`mlp`, handed the block's
//! own projections) and its SwiGLU gate (`act_fn(gate) * up` in mlx-lm's `MLP`, inside
//! quest's MLP), and, in a model held quantized, every projection of every
//! attention and MLP block (q/k/v, o, gate/up, down: `quantized_matmul`). Everything
//! else is quest's, unchanged (the tied head too). Qwen3.5's gated-delta layers run
//! their recurrence through the pieces (`gated_delta`); their norms (inside the layer,
//! without a learned weight per call site) and their own projections stay quest's.

use anyhow::Result;
use mlx_rs::fast::ScaledDotProductAttentionMask;
use mlx_rs::Array;
use serde::{Deserialize, Serialize};

/// The model's parts a learner may write. A default method is quest's own.
pub trait Pieces: Send + Sync {
    /// `x · rsqrt(mean(x², last axis) + eps) · weight`, mlx-lm's `nn.RMSNorm`: by default
    /// MLX's fused kernel (`mlx_rs::fast::rms_norm`), one op in the graph.
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        quest_ran(Piece::RmsNorm);
        Ok(mlx_rs::fast::rms_norm(x, Some(weight), eps)?)
    }

    /// `silu(gate) · up`, the SwiGLU feed-forward's gate between its up and down
    /// projections (mlx-lm's `swiglu`): by default quest's, compiled once per thread into
    /// one element-wise kernel ([`crate::lm::models::activations::swiglu`]).
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        quest_ran(Piece::Swiglu);
        // quest's gate is part of quest's MLP: called from a learner's `mlp`, it is not theirs.
        quest_ran(Piece::Mlp);
        Ok(crate::lm::models::activations::swiglu(gate, up)?)
    }

    /// A block's whole feed-forward, `down_proj(silu(gate_proj(x)) · up_proj(x))` (mlx-lm's
    /// `MLP.__call__`): `x` `[B, L, hidden]`, the block's normed input; `layers` the block's
    /// own three projections, dense or quantized as the model holds them. Returns
    /// `[B, L, hidden]` in `x`'s dtype. By default quest's: the projections, its compiled
    /// gate, the down projection.
    fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
        quest_ran(Piece::Mlp);
        layers.quest_mlp(x)
    }

    /// Rotary position embedding of `x` (`[B, heads, L, head_dim]`, the L positions starting
    /// at `offset`, the cache's position of the first): the first `dims` channels of each
    /// head turned by `position · base^(-2i/dims)`, pairs taken as neighbours (`traditional`)
    /// or as the two halves. mlx-lm's `nn.RoPE`; by default MLX's fused kernel
    /// (`mlx_rs::fast::rope`).
    fn rope(
        &self,
        x: &Array,
        dims: i32,
        traditional: bool,
        base: f32,
        offset: i32,
    ) -> Result<Array> {
        quest_ran(Piece::Rope);
        Ok(mlx_rs::fast::rope(
            x,
            dims,
            traditional,
            base,
            1.0,
            offset,
            None,
        )?)
    }

    /// `softmax(q·kᵀ·scale + mask) · v` per head: `queries` `[B, heads, L, D]`, `keys` and
    /// `values` the cache's view `[B, kv_heads, S, D]` (all S positions so far; `heads` a
    /// multiple of `kv_heads`, each key head shared by `heads / kv_heads` query heads). With
    /// [`Mask::Causal`] query `i` sees keys `0..=S-L+i`: the whole cached prefix and the
    /// prompt up to itself. By default MLX's fused kernel
    /// (`mlx_rs::fast::scaled_dot_product_attention`).
    fn attention(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<Mask>,
    ) -> Result<Array> {
        quest_ran(Piece::Attention);
        let mask = mask.map(|Mask::Causal| ScaledDotProductAttentionMask::Causal);
        Ok(mlx_rs::fast::scaled_dot_product_attention(
            queries, keys, values, scale, mask, None,
        )?)
    }

    /// Qwen3.5's gated delta rule over `L` tokens, one at a time (mlx-lm's
    /// `gated_delta_ops`): per value head, the state `S` (`[Dv, Dk]`) decays by `g`, the
    /// delta rule writes `v` at key `k` with strength `β` — `S += β (v − S k) ⊗ k` — and
    /// the query reads `y = S q`. `queries`, `keys`: `[B, L, Hk, Dk]` (already normed and
    /// scaled); `values`: `[B, L, Hv, Dv]`, `Hv` a multiple of `Hk` (each key head shared by
    /// `Hv / Hk` value heads); `g`, `beta`: `[B, L, Hv]`; `state`: `[B, Hv, Dv, Dk]` in
    /// float32, the cache's. Returns `y` (`[B, L, Hv, Dv]`, in the queries' dtype) and the
    /// new state. By default quest's, MLX's ops in mlx-lm's order.
    fn gated_delta(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        g: &Array,
        beta: &Array,
        state: Array,
    ) -> Result<(Array, Array)> {
        quest_ran(Piece::GatedDelta);
        crate::lm::models::gated_delta_ops::recurrence(queries, keys, values, g, beta, state)
    }

    /// `x · Wᵀ` for a matrix held in MLX's affine quantization (mlx-lm's `QuantizedLinear`):
    /// `weight` `[out, in·bits/32]` packs `32/bits` values of `bits` bits into each `uint32`,
    /// the first in the lowest bits; each run of `group_size` values along a row shares one
    /// of `scales` and `biases` (`[out, in/group_size]`), so a value `q` stands for
    /// `scale · q + bias`. By default MLX's quantized matmul (`mlx_rs::ops::quantized_matmul`),
    /// which never writes the dense matrix out. Every projection of every block runs
    /// through it when the model's matrices are held quantized (`lm::Hold::Quantized`).
    fn quantized_matmul(
        &self,
        x: &Array,
        weight: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        quest_ran(Piece::QuantizedMatmul);
        Ok(mlx_rs::ops::quantized_matmul(
            x, weight, scales, biases, true, group_size, bits,
        )?)
    }
}

/// One block's MLP projections, as [`Pieces::mlp`] is handed them: each a layer of the
/// model (`x · Wᵀ`, through MLX's matmul or quantized matmul, quest's kernels where they
/// run), so the learner calls a projection and never sees how its matrix is held.
pub struct MlpLayers<'a> {
    /// The block's input: gate and up of it are one stacked product, computed once.
    input: &'a Array,
    /// `[gate, up]` of an input.
    gate_up: Projection<'a, Vec<Array>>,
    down: Projection<'a, Array>,
    /// quest's own gate, `silu(gate) · up`, for quest's own MLP.
    gate: Gate<'a>,
    parts_of_input: std::cell::RefCell<Option<Vec<Array>>>,
}

type Projection<'a, T> = Box<dyn Fn(&Array) -> Result<T> + 'a>;
type Gate<'a> = Box<dyn Fn(&Array, &Array) -> Result<Array> + 'a>;

impl<'a> MlpLayers<'a> {
    pub(crate) fn new(
        input: &'a Array,
        gate_up: Projection<'a, Vec<Array>>,
        down: Projection<'a, Array>,
        gate: Gate<'a>,
    ) -> Self {
        MlpLayers {
            input,
            gate_up,
            down,
            gate,
            parts_of_input: std::cell::RefCell::new(None),
        }
    }

    /// `x · W_gateᵀ`: `[B, L, hidden]` to `[B, L, intermediate]`.
    pub fn gate_proj(&self, x: &Array) -> Result<Array> {
        self.part(x, 0)
    }

    /// `x · W_upᵀ`: `[B, L, hidden]` to `[B, L, intermediate]`.
    pub fn up_proj(&self, x: &Array) -> Result<Array> {
        self.part(x, 1)
    }

    /// `x · W_downᵀ`: `[B, L, intermediate]` to `[B, L, hidden]`.
    pub fn down_proj(&self, x: &Array) -> Result<Array> {
        (self.down)(x)
    }

    /// Part `i` of `[gate, up]` of `x`. The model holds gate and up stacked, one matmul:
    /// for the block's own input it runs once, whichever projection asks first.
    fn part(&self, x: &Array, i: usize) -> Result<Array> {
        if !std::ptr::eq(x, self.input) {
            return Ok((self.gate_up)(x)?.swap_remove(i));
        }
        let mut memo = self.parts_of_input.borrow_mut();
        if let Some(parts) = memo.as_ref() {
            return Ok(parts[i].clone());
        }
        let parts = (self.gate_up)(x)?;
        let part = parts[i].clone();
        *memo = Some(parts);
        Ok(part)
    }

    /// quest's own MLP of `x`: [`Pieces::mlp`]'s default.
    pub(crate) fn quest_mlp(&self, x: &Array) -> Result<Array> {
        let hidden = (self.gate)(&self.gate_proj(x)?, &self.up_proj(x)?)?;
        self.down_proj(&hidden)
    }
}

/// The mask [`Pieces::attention`] is given: none for one query (it sees every key), causal
/// for several (a prompt, or a prompt's next chunk after a cached prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Query `i` of `L` sees keys `0..=S-L+i` of `S`.
    Causal,
}

/// quest's own pieces: every default. A model holds none until [`Model::with_pieces`]
/// (until then its `Fast` calls MLX's fused ops directly).
///
/// [`Model::with_pieces`]: crate::lm::Model::with_pieces
pub struct QuestPieces;

impl Pieces for QuestPieces {}

use crate::course::spec::Piece;

/// How often the model called a piece through the seam, and how often quest's own op ran
/// for it (a trait default, or quest's pieces called from inside the learner's), counted
/// by quest's code in the exercise's process since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calls {
    /// Calls the model made into the pieces it was handed (`Model::with_pieces`).
    pub seam: u64,
    /// Times quest's own implementation of the piece ran.
    pub quest: u64,
    /// Calls whose output one of MLX's fused ops that the piece replaces computed, read
    /// off the output's graph ([`crate::lm::graph`]), and the first such op.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fused: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused_op: Option<crate::lm::graph::Fused>,
    /// Calls whose output came back already evaluated: what computed it is not in the
    /// graph.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub evaluated: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

// Counted per thread: a model runs its forward on the thread that holds its stream (MLX's
// work of one stream stays on one thread), and tests running side by side do not count
// each other's calls.
thread_local! {
    static SEAM_CALLS: std::cell::Cell<[u64; Piece::ALL.len()]> = const { std::cell::Cell::new([0; Piece::ALL.len()]) };
    static QUEST_RAN: std::cell::Cell<[u64; Piece::ALL.len()]> = const { std::cell::Cell::new([0; Piece::ALL.len()]) };
    static SEEN: std::cell::Cell<[Graphs; Piece::ALL.len()]> = const { std::cell::Cell::new([Graphs::NONE; Piece::ALL.len()]) };
}

/// What the graphs of the learner's outputs showed, for one piece.
#[derive(Clone, Copy, Debug)]
struct Graphs {
    fused: u64,
    fused_op: Option<crate::lm::graph::Fused>,
    evaluated: u64,
}

impl Graphs {
    const NONE: Graphs = Graphs {
        fused: 0,
        fused_op: None,
        evaluated: 0,
    };
}

/// Reads the graph of the learner's `out` for `piece`, called on `inputs`, and counts what
/// it shows. A walk that fails counts nothing: the logits still judge the output.
fn observe(piece: Piece, out: &Array, inputs: &[&Array]) {
    use crate::lm::graph::Seen;
    let seen = crate::lm::graph::seen(piece, out, inputs);
    SEEN.with(|cell| {
        let mut all = cell.get();
        let graphs = &mut all[piece.index()];
        match seen {
            Ok(Seen::Fused { op, .. }) => {
                graphs.fused += 1;
                graphs.fused_op.get_or_insert(op);
            }
            Ok(Seen::Evaluated) => graphs.evaluated += 1,
            Ok(Seen::Plain) | Err(_) => {}
        }
        cell.set(all);
    });
}

fn bump(
    counter: &'static std::thread::LocalKey<std::cell::Cell<[u64; Piece::ALL.len()]>>,
    piece: Piece,
) {
    counter.with(|cell| {
        let mut counts = cell.get();
        counts[piece.index()] += 1;
        cell.set(counts);
    });
}

/// Marks that quest's own implementation of `piece` ran: every default of [`Pieces`] and
/// of the sampler starts with it.
pub(crate) fn quest_ran(piece: Piece) {
    bump(&QUEST_RAN, piece);
}

/// Marks a call of the model into the learner's `piece`.
pub(crate) fn seam_called(piece: Piece) {
    bump(&SEAM_CALLS, piece);
}

/// Runs `f` with neither counter moving: what it calls is not the run quest judges (the
/// warm-up a model with pieces runs before the prompt). Counted there, a warm-up alone
/// would give the calls a decode on another model never made.
pub(crate) fn uncounted<T>(f: impl FnOnce() -> T) -> T {
    let seam = SEAM_CALLS.with(|c| c.get());
    let quest = QUEST_RAN.with(|c| c.get());
    let seen = SEEN.with(|c| c.get());
    let out = f();
    SEAM_CALLS.with(|c| c.set(seam));
    QUEST_RAN.with(|c| c.set(quest));
    SEEN.with(|c| c.set(seen));
    out
}

/// Every piece's calls so far on this thread, the one the model ran on (pieces never
/// called left out).
pub fn calls() -> std::collections::BTreeMap<Piece, Calls> {
    Piece::ALL
        .iter()
        .map(|&piece| {
            let graphs = SEEN.with(|c| c.get()[piece.index()]);
            let calls = Calls {
                seam: SEAM_CALLS.with(|c| c.get()[piece.index()]),
                quest: QUEST_RAN.with(|c| c.get()[piece.index()]),
                fused: graphs.fused,
                fused_op: graphs.fused_op,
                evaluated: graphs.evaluated,
            };
            (piece, calls)
        })
        .filter(|(_, calls)| *calls != Calls::default())
        .collect()
}

/// Times quest's own `piece` ran so far on this thread.
pub(crate) fn quest_runs(piece: Piece) -> u64 {
    QUEST_RAN.with(|c| c.get()[piece.index()])
}

/// The learner's pieces as the model holds them: each call counted on its way in, by
/// quest's code, so the report can say the learner's code ran (and how often).
pub(crate) struct Counted(pub Box<dyn Pieces>);

impl Pieces for Counted {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        seam_called(Piece::RmsNorm);
        let out = self.0.rms_norm(x, weight, eps)?;
        observe(Piece::RmsNorm, &out, &[x, weight]);
        Ok(out)
    }

    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        seam_called(Piece::Swiglu);
        let out = self.0.swiglu(gate, up)?;
        observe(Piece::Swiglu, &out, &[gate, up]);
        Ok(out)
    }

    fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
        seam_called(Piece::Mlp);
        self.0.mlp(x, layers)
    }

    fn rope(
        &self,
        x: &Array,
        dims: i32,
        traditional: bool,
        base: f32,
        offset: i32,
    ) -> Result<Array> {
        seam_called(Piece::Rope);
        let out = self.0.rope(x, dims, traditional, base, offset)?;
        observe(Piece::Rope, &out, &[x]);
        Ok(out)
    }

    fn attention(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<Mask>,
    ) -> Result<Array> {
        seam_called(Piece::Attention);
        let out = self.0.attention(queries, keys, values, scale, mask)?;
        observe(Piece::Attention, &out, &[queries, keys, values]);
        Ok(out)
    }

    fn gated_delta(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        g: &Array,
        beta: &Array,
        state: Array,
    ) -> Result<(Array, Array)> {
        seam_called(Piece::GatedDelta);
        self.0.gated_delta(queries, keys, values, g, beta, state)
    }

    fn quantized_matmul(
        &self,
        x: &Array,
        weight: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        seam_called(Piece::QuantizedMatmul);
        let out = self
            .0
            .quantized_matmul(x, weight, scales, biases, group_size, bits)?;
        observe(Piece::QuantizedMatmul, &out, &[x, weight, scales, biases]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::{random, tokens_array};
    use mlx_rs::ops::{abs, mean_axis, rsqrt, subtract};

    /// RMSNorm written with MLX's ops, as the lesson's solution writes it.
    struct ByOps;
    impl Pieces for ByOps {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let mean_square = mean_axis(x.square()?, -1, true)?;
            let eps = Array::from_f32(eps);
            Ok(x.multiply(rsqrt(mean_square.add(eps)?)?)?
                .multiply(weight)?)
        }
    }

    /// No norm at all: the model must notice (the seam reaches every norm).
    struct NoNorm;
    impl Pieces for NoNorm {
        fn rms_norm(&self, x: &Array, _weight: &Array, _eps: f32) -> Result<Array> {
            Ok(x.clone())
        }
    }

    /// RoPE with MLX's ops, as the rope lesson's solution writes it; `restart` counts the
    /// positions of every call from 0 (the offset forgotten), `flip` takes the other layout.
    struct RopeByOps {
        restart: bool,
        flip: bool,
    }
    impl Pieces for RopeByOps {
        fn rope(
            &self,
            x: &Array,
            dims: i32,
            traditional: bool,
            base: f32,
            offset: i32,
        ) -> Result<Array> {
            use mlx_rs::ops::{arange, concatenate, split_at_indices, stack};
            let traditional = traditional != self.flip;
            let shape = x.shape().to_vec();
            let (l, half) = (shape[2], dims / 2);
            let start = if self.restart { 0 } else { offset };
            let positions = arange::<_, f32>(start, start + l, None)?.reshape(&[l, 1])?;
            let pair =
                arange::<_, f32>(0, half, None)?.multiply(Array::from_f32(-2.0 / dims as f32))?;
            let angle = pair
                .multiply(Array::from_f32(base.ln()))?
                .exp()?
                .multiply(&positions)?;
            let (cos, sin) = (angle.cos()?, angle.sin()?);
            let parts = split_at_indices(x, &[dims], -1)?;
            let (a, b) = if traditional {
                let pairs = parts[0].reshape(&[shape[0], shape[1], l, half, 2])?;
                let ab = split_at_indices(&pairs, &[1], -1)?;
                (ab[0].squeeze_axes(&[-1])?, ab[1].squeeze_axes(&[-1])?)
            } else {
                let ab = split_at_indices(&parts[0], &[half], -1)?;
                (ab[0].clone(), ab[1].clone())
            };
            let ra = a.multiply(&cos)?.subtract(b.multiply(&sin)?)?;
            let rb = a.multiply(&sin)?.add(b.multiply(&cos)?)?;
            let rotated = if traditional {
                stack(&[ra, rb], -1)?.reshape(&[shape[0], shape[1], l, dims])?
            } else {
                concatenate(&[ra, rb], -1)?
            };
            Ok(concatenate(&[rotated, parts[1].clone()], -1)?)
        }
    }

    /// Attention with MLX's ops; `unmasked` leaves the causal mask out, `prefix_blind`
    /// masks as if the cache held only this call's positions.
    struct AttentionByOps {
        unmasked: bool,
        prefix_blind: bool,
    }
    impl Pieces for AttentionByOps {
        fn attention(
            &self,
            queries: &Array,
            keys: &Array,
            values: &Array,
            scale: f32,
            mask: Option<Mask>,
        ) -> Result<Array> {
            use mlx_rs::ops::{arange, broadcast_to, le, matmul, select, softmax_axis};
            let (q, k) = (queries.shape().to_vec(), keys.shape().to_vec());
            let repeat = |t: &Array| -> Result<Array> {
                let (b, kv, s, d) = (k[0], k[1], k[2], k[3]);
                let wide = broadcast_to(t.expand_dims(2)?, &[b, kv, q[1] / kv, s, d])?;
                Ok(wide.reshape(&[b, q[1], s, d])?)
            };
            let (keys, values) = (repeat(keys)?, repeat(values)?);
            let scores = matmul(
                queries.multiply(Array::from_f32(scale))?,
                keys.swap_axes(-1, -2)?,
            )?;
            let scores = match mask {
                Some(Mask::Causal) if !self.unmasked => {
                    let (l, s) = (q[2], k[2]);
                    let first = if self.prefix_blind { 0 } else { s - l };
                    let query = arange::<_, i32>(first, first + l, None)?.reshape(&[l, 1])?;
                    let key = arange::<_, i32>(0, s, None)?.reshape(&[1, s])?;
                    select(
                        le(&key, &query)?,
                        &scores,
                        Array::from_f32(f32::NEG_INFINITY),
                    )?
                }
                _ => scores,
            };
            Ok(matmul(softmax_axis(&scores, -1, true)?, &values)?)
        }
    }

    /// The 4-bit matmul through MLX's dequantize and a dense matmul; `biased: false`
    /// leaves each group's bias out.
    struct DequantizedByOps {
        biased: bool,
    }
    impl Pieces for DequantizedByOps {
        fn quantized_matmul(
            &self,
            x: &Array,
            weight: &Array,
            scales: &Array,
            biases: &Array,
            group_size: i32,
            bits: i32,
        ) -> Result<Array> {
            let zeros = mlx_rs::ops::zeros_like(biases)?;
            let biases = if self.biased { biases } else { &zeros };
            let w = mlx_rs::ops::dequantize(weight, scales, biases, group_size, bits)?;
            Ok(mlx_rs::ops::matmul(x, w.transpose()?)?)
        }
    }

    /// The delta rule written with matmuls over the grouped heads; `decay: false`
    /// forgets nothing (g left out).
    struct DeltaByMatmul {
        decay: bool,
    }
    impl Pieces for DeltaByMatmul {
        fn gated_delta(
            &self,
            queries: &Array,
            keys: &Array,
            values: &Array,
            g: &Array,
            beta: &Array,
            mut state: Array,
        ) -> Result<(Array, Array)> {
            use mlx_rs::ops::indexing::IndexOp;
            use mlx_rs::ops::{matmul, repeat_axis, stack};
            let group = values.shape()[2] / keys.shape()[2];
            let (q, k) = (
                repeat_axis::<f32>(queries.clone(), group, 2)?,
                repeat_axis::<f32>(keys.clone(), group, 2)?,
            );
            let mut ys = Vec::new();
            for t in 0..q.shape()[1] {
                let column = |a: &Array| a.index((.., t)).expand_dims(-1); // [B, H, D, 1]
                let (q_t, k_t, v_t) = (column(&q)?, column(&k)?, column(values)?);
                if self.decay {
                    state = state.multiply(g.index((.., t)).expand_dims(-1)?.expand_dims(-1)?)?;
                }
                let beta_t = beta.index((.., t)).expand_dims(-1)?.expand_dims(-1)?;
                let delta = v_t.subtract(matmul(&state, &k_t)?)?.multiply(beta_t)?;
                state = state.add(matmul(&delta, k_t.swap_axes(-1, -2)?)?)?;
                ys.push(
                    matmul(&state, &q_t)?
                        .squeeze_axes(&[-1])?
                        .as_dtype(queries.dtype())?,
                );
            }
            Ok((stack(&ys, 1)?, state))
        }
    }

    /// The whole MLP by MLX's ops through the block's projections; `gated: false` leaves
    /// silu out (`gate · up`).
    struct MlpByOps {
        gated: bool,
    }
    impl Pieces for MlpByOps {
        fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
            let (gate, up) = (layers.gate_proj(x)?, layers.up_proj(x)?);
            let one = Array::from_f32(1.0).as_dtype(gate.dtype())?;
            let silu = gate.divide(one.add(gate.negative()?.exp()?)?)?;
            let gated = if self.gated { silu } else { gate };
            layers.down_proj(&gated.multiply(&up)?)
        }
    }

    /// Its own norm for the first `honest` calls, MLX's fused one after.
    struct FusedAfter {
        honest: std::sync::atomic::AtomicUsize,
    }
    impl Pieces for FusedAfter {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            use std::sync::atomic::Ordering::Relaxed;
            if self.honest.load(Relaxed) > 0 {
                self.honest.fetch_sub(1, Relaxed);
                return ByOps.rms_norm(x, weight, eps);
            }
            Ok(mlx_rs::fast::rms_norm(x, Some(weight), eps)?)
        }
    }

    /// The model's real run reads every output's graph: a norm honest on its first calls
    /// and MLX's after is counted as fused from the call it changed, named; an honest one
    /// never is.
    #[test]
    fn the_models_run_reads_each_outputs_graph() {
        use crate::lm::graph::Fused;
        let run = |pieces: FusedAfter| {
            let before = calls().get(&Piece::RmsNorm).copied().unwrap_or_default();
            logits(
                &random::model(&random::tiny_llama(), 7)
                    .unwrap()
                    .with_pieces(pieces),
            );
            let after = calls().get(&Piece::RmsNorm).copied().unwrap_or_default();
            (
                after.seam - before.seam,
                after.fused - before.fused,
                after.fused_op,
                after.evaluated - before.evaluated,
            )
        };
        let (seam, fused, op, evaluated) = run(FusedAfter {
            honest: usize::MAX.into(),
        });
        assert!(
            seam > 0 && fused == 0 && evaluated == 0,
            "{seam} {fused} {op:?}"
        );
        let (seam, fused, op, _) = run(FusedAfter { honest: 6.into() });
        assert_eq!(fused, seam - 6, "{seam}");
        assert_eq!(op, Some(Fused::RmsNorm));
    }

    /// A prompt, one decode step, then a second prompt chunk after that cached prefix.
    fn logits(model: &crate::lm::Model) -> Array {
        let mut cache = model.make_cache();
        let first = model
            .forward(&tokens_array(&[1, 2, 3, 4, 5]), &mut cache)
            .unwrap();
        let step = model.forward(&tokens_array(&[9]), &mut cache).unwrap();
        let chunk = model
            .forward(&tokens_array(&[7, 8, 6]), &mut cache)
            .unwrap();
        mlx_rs::ops::concatenate(&[first, step, chunk], 1).unwrap()
    }

    fn max_diff(a: &Array, b: &Array) -> f32 {
        abs(subtract(a, b).unwrap())
            .unwrap()
            .max(None)
            .unwrap()
            .item_exact::<f32>()
    }

    /// The ops-written norm gives the fused norm's logits, on llama and on Qwen3 (q/k
    /// norms too); a model without norms does not: the pieces are really called.
    #[test]
    fn the_models_norms_run_through_the_pieces() {
        let qwen3 = serde_json::json!({"model_type": "qwen3", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "intermediate_size": 128, "vocab_size": 256,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true});
        for config in [random::tiny_llama(), qwen3] {
            let quest = logits(&random::model(&config, 7).unwrap());
            let by_ops = logits(&random::model(&config, 7).unwrap().with_pieces(ByOps));
            let none = logits(&random::model(&config, 7).unwrap().with_pieces(NoNorm));
            let same = max_diff(&quest, &by_ops);
            assert!(same <= 1e-4, "{}: {same}", config["model_type"]);
            let off = max_diff(&quest, &none);
            assert!(off > 1e-2, "{}: {off}", config["model_type"]);
        }
        // A model with pieces runs none of quest's kernels, and says why.
        let with = random::model(&random::tiny_llama(), 7)
            .unwrap()
            .with_pieces(ByOps);
        let kernels = with.kernels();
        assert!(kernels.for_pieces() && kernels.running().is_empty() && !kernels.kept());
        assert!(!random::model(&random::tiny_llama(), 7)
            .unwrap()
            .kernels()
            .for_pieces());
    }

    /// Ops-written RoPE and attention give quest's logits on llama and Qwen3 (grouped
    /// heads, a prefill after a cached prefix); a forgotten offset, the other layout, a
    /// missing mask or one blind to the prefix do not.
    #[test]
    fn the_models_rope_and_attention_run_through_the_pieces() {
        let qwen3 = serde_json::json!({"model_type": "qwen3", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 32, "intermediate_size": 128, "vocab_size": 256,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true});
        for config in [random::tiny_llama(), qwen3] {
            let name = &config["model_type"];
            let model = || random::model(&config, 7).unwrap();
            let quest = logits(&model());
            let rope = |restart, flip| logits(&model().with_pieces(RopeByOps { restart, flip }));
            let attention = |unmasked, prefix_blind| {
                logits(&model().with_pieces(AttentionByOps {
                    unmasked,
                    prefix_blind,
                }))
            };
            for (what, yours, right) in [
                ("rope", rope(false, false), true),
                ("rope restarting at 0", rope(true, false), false),
                ("rope, other layout", rope(false, true), false),
                ("attention", attention(false, false), true),
                ("attention unmasked", attention(true, false), false),
                (
                    "attention blind to the prefix",
                    attention(false, true),
                    false,
                ),
            ] {
                let diff = max_diff(&quest, &yours);
                if right {
                    assert!(diff <= 1e-4, "{name} {what}: {diff}");
                } else {
                    // Random weights make small logits: a wrong RoPE moved llama's by 3.8e-3.
                    assert!(diff > 1e-3, "{name} {what}: {diff}");
                }
            }
        }
    }

    /// In a model held 4-bit every projection multiplies through the pieces: a dequantize
    /// and a matmul give quest's logits, the biases left out do not; in a dense model the
    /// piece is never called.
    #[test]
    fn the_models_quantized_projections_run_through_the_pieces() {
        let quantized = || {
            let mut model = random::model(&random::tiny_llama(), 7).unwrap();
            model
                .requantize(crate::lm::Layout::q4(32).unwrap())
                .unwrap();
            model
        };
        let quest = logits(&quantized());
        let by_ops = logits(&quantized().with_pieces(DequantizedByOps { biased: true }));
        let unbiased = logits(&quantized().with_pieces(DequantizedByOps { biased: false }));
        let same = max_diff(&quest, &by_ops);
        assert!(same <= 1e-4, "{same}");
        let off = max_diff(&quest, &unbiased);
        assert!(off > 1e-3, "{off}");
        let dense = || random::model(&random::tiny_llama(), 7).unwrap();
        let untouched = logits(&dense().with_pieces(DequantizedByOps { biased: false }));
        assert_eq!(max_diff(&logits(&dense()), &untouched), 0.0);
    }

    /// Every block's MLP runs through the pieces, its projections dense or 4-bit: an
    /// ops-written MLP gives quest's logits on llama and Qwen3, one without silu does not,
    /// and each block calls it once a forward.
    #[test]
    fn the_models_mlps_run_through_the_pieces() {
        let qwen3 = serde_json::json!({"model_type": "qwen3", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "intermediate_size": 128, "vocab_size": 256,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true});
        for config in [random::tiny_llama(), qwen3] {
            for quantized in [false, true] {
                let name = format!("{} quantized {quantized}", config["model_type"]);
                let model = || {
                    let mut model = random::model(&config, 7).unwrap();
                    if quantized {
                        model
                            .requantize(crate::lm::Layout::q4(32).unwrap())
                            .unwrap();
                    }
                    model
                };
                let quest = logits(&model());
                let before = calls().get(&Piece::Mlp).copied().unwrap_or_default();
                let by_ops = logits(&model().with_pieces(MlpByOps { gated: true }));
                let after = calls().get(&Piece::Mlp).copied().unwrap_or_default();
                let same = max_diff(&quest, &by_ops);
                assert!(same <= 1e-4, "{name}: {same}");
                // Two layers, three forward calls; the warm-up is not counted.
                assert_eq!(after.seam - before.seam, 6, "{name}");
                assert_eq!(after.quest, before.quest, "{name}");
                let ungated = logits(&model().with_pieces(MlpByOps { gated: false }));
                let off = max_diff(&quest, &ungated);
                assert!(off > 1e-3, "{name}: {off}");
            }
        }
    }

    /// Qwen3.5's gated delta layers run their recurrence through the pieces: the same rule
    /// by matmuls gives quest's logits (a prompt, a step, a chunk after it: the state
    /// carried), one that forgets nothing does not.
    #[test]
    fn the_models_gated_delta_runs_through_the_pieces() {
        let hybrid = serde_json::json!({"model_type": "qwen3_5", "hidden_size": 64,
            "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-6,
            "linear_num_key_heads": 1, "linear_num_value_heads": 2,
            "linear_key_head_dim": 16, "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
            "tie_word_embeddings": true, "rope_parameters": {"rope_type": "default",
            "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}});
        let model = || random::model(&hybrid, 7).unwrap();
        let quest = logits(&model());
        let same = max_diff(
            &quest,
            &logits(&model().with_pieces(DeltaByMatmul { decay: true })),
        );
        assert!(same <= 1e-4, "{same}");
        let off = max_diff(
            &quest,
            &logits(&model().with_pieces(DeltaByMatmul { decay: false })),
        );
        assert!(off > 1e-3, "{off}");
    }
}
