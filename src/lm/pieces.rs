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
//! `k_norm`, the final `model.norm` — and every MLP's SwiGLU gate (`act_fn(gate) * up`
//! in mlx-lm's `MLP`), and, in a model held quantized, every projection of every
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
        Ok(crate::lm::models::activations::swiglu(gate, up)?)
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
}

// Counted per thread: a model runs its forward on the thread that holds its stream (MLX's
// work of one stream stays on one thread), and tests running side by side do not count
// each other's calls.
thread_local! {
    static SEAM_CALLS: std::cell::Cell<[u64; Piece::ALL.len()]> = const { std::cell::Cell::new([0; Piece::ALL.len()]) };
    static QUEST_RAN: std::cell::Cell<[u64; Piece::ALL.len()]> = const { std::cell::Cell::new([0; Piece::ALL.len()]) };
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
    let out = f();
    SEAM_CALLS.with(|c| c.set(seam));
    QUEST_RAN.with(|c| c.set(quest));
    out
}

/// Every piece's calls so far on this thread, the one the model ran on (pieces never
/// called left out).
pub fn calls() -> std::collections::BTreeMap<Piece, Calls> {
    Piece::ALL
        .iter()
        .map(|&piece| {
            let calls = Calls {
                seam: SEAM_CALLS.with(|c| c.get()[piece.index()]),
                quest: QUEST_RAN.with(|c| c.get()[piece.index()]),
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
        self.0.rms_norm(x, weight, eps)
    }

    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        seam_called(Piece::Swiglu);
        self.0.swiglu(gate, up)
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
        self.0.rope(x, dims, traditional, base, offset)
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
        self.0.attention(queries, keys, values, scale, mask)
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
        self.0
            .quantized_matmul(x, weight, scales, biases, group_size, bits)
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
            for (what, ours, right) in [
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
                let diff = max_diff(&quest, &ours);
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
