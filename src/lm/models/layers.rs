//! The pieces every architecture is built from, as mlx-lm's model files name them: the
//! RMS norm, attention over a KV cache, the SwiGLU feed-forward, and the shapes an
//! architecture reads from its config. How a token flows through them is each
//! architecture's file (`llama.rs`, `qwen3.rs`, `qwen3_5.rs`).
//!
//! Where quest's CUDA kernels can take over part of a piece, the piece asks
//! [`Kernels`] at one named point and runs MLX's ops when it answers "not here".

use std::sync::Arc;

use anyhow::Result;
use mlx_rs::fast::{rms_norm, rope, scaled_dot_product_attention, ScaledDotProductAttentionMask};
use mlx_rs::ops::sigmoid;
use mlx_rs::{Array, Dtype};

use super::activations::swiglu;
use super::gated_delta::GatedDeltaShape;
use crate::kernels::{Fold, HeadsSpec, Kernels};
use crate::lm::cache::KvCache;
use crate::lm::pieces::{Mask, Pieces};
use crate::lm::weights::{Fused, Linear, Quantization, Weights};
use crate::lm::Layout;

/// Shapes and constants of a decoder, after each architecture has read its config.
#[derive(Clone, Debug)]
pub struct DecoderShape {
    pub layers: usize,
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_traditional: bool,
    pub tie_word_embeddings: bool,
    /// Qwen3 normalizes queries and keys per head before RoPE.
    pub qk_norm: bool,
    /// How many leading dimensions of each head RoPE rotates (Qwen3.5: a quarter).
    pub rope_dims: i32,
    /// Qwen3.5: `q_proj` also yields a gate, and the output is scaled by its sigmoid.
    pub attention_output_gate: bool,
    /// Qwen3.5: gated delta layers, with full attention only every few layers.
    pub linear_attention: Option<LinearAttention>,
    pub quantization: Option<Quantization>,
}

/// Which layers of a hybrid model are gated delta layers, and their shape.
#[derive(Clone, Debug)]
pub struct LinearAttention {
    /// Layer `i` has full attention when `(i + 1) % full_attention_interval == 0`.
    pub full_attention_interval: usize,
    pub shape: GatedDeltaShape,
}

impl DecoderShape {
    /// The gated delta shape when layer `i` is a linear-attention layer.
    pub fn linear_layer(&self, i: usize) -> Option<&GatedDeltaShape> {
        let linear = self.linear_attention.as_ref()?;
        ((i + 1) % linear.full_attention_interval != 0).then_some(&linear.shape)
    }
}

/// `x / rms(x) · weight` over the last axis (mlx-lm's `nn.RMSNorm`, MLX's fused
/// `fast::rms_norm`), or the learner's norm where the model was given pieces
/// ([`crate::lm::Pieces`]).
pub struct RmsNorm {
    pub weight: Array,
    pub eps: f32,
    /// `None`: MLX's fused op called directly, the path every model takes by default.
    pub pieces: Option<Arc<dyn Pieces>>,
}

impl RmsNorm {
    pub fn load(w: &mut Weights, name: &str, eps: f32) -> Result<Self> {
        Ok(Self {
            weight: w.take(&format!("{name}.weight"))?,
            eps,
            pieces: None,
        })
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        match &self.pieces {
            Some(pieces) => pieces.rms_norm(x, &self.weight, self.eps),
            None => Ok(rms_norm(x, Some(&self.weight), self.eps)?),
        }
    }
}

/// Whether a sublayer folds its norm and residual add into quest's matvec: a decode step
/// (one position) where that kernel runs.
fn folds(h: &Array, kernels: &Kernels) -> bool {
    h.shape().get(1) == Some(&1) && kernels.folds()
}

/// Attention with grouped-query heads, RoPE from the cache's position and a KV cache
/// (mlx-lm's `Attention`); Qwen3's per-head q/k norms and Qwen3.5's output gate and
/// partial RoPE where the shape has them.
pub struct Attention {
    /// q_proj, k_proj and v_proj as one matmul.
    qkv_proj: Fused,
    o_proj: Linear,
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    output_gate: bool,
    heads: i32,
    kv_heads: i32,
    head_dim: i32,
    rope_dims: i32,
    rope_theta: f32,
    rope_traditional: bool,
    /// The learner's RoPE and attention, where the model was given pieces
    /// ([`crate::lm::Pieces`]).
    pub pieces: Option<Arc<dyn Pieces>>,
}

impl Attention {
    pub fn load(w: &mut Weights, p: &str, s: &DecoderShape) -> Result<Self> {
        let q = s.quantization;
        let qk_norm = if s.qk_norm {
            Some((
                RmsNorm::load(w, &format!("{p}.q_norm"), s.rms_norm_eps)?,
                RmsNorm::load(w, &format!("{p}.k_norm"), s.rms_norm_eps)?,
            ))
        } else {
            None
        };
        Ok(Self {
            qkv_proj: Fused::build(
                vec![
                    w.linear(&format!("{p}.q_proj"), q)?,
                    w.linear(&format!("{p}.k_proj"), q)?,
                    w.linear(&format!("{p}.v_proj"), q)?,
                ],
                !w.lazy,
            )?,
            o_proj: w.linear(&format!("{p}.o_proj"), q)?,
            qk_norm,
            output_gate: s.attention_output_gate,
            heads: s.heads,
            kv_heads: s.kv_heads,
            head_dim: s.head_dim,
            rope_dims: s.rope_dims,
            rope_theta: s.rope_theta,
            rope_traditional: s.rope_traditional,
            pieces: None,
        })
    }

    /// `h + attention(norm(h))`: the residual stream `h` read through the sublayer's input
    /// norm, attention's output added back. A decode step with quest's matvec folds the
    /// norm into the projection that reads it and the add into the one that ends it
    /// ([`Kernels::project`]); anything else runs MLX's ops in that order.
    pub fn residual(
        &self,
        h: &Array,
        norm: &RmsNorm,
        cache: &mut KvCache,
        kernels: &Kernels,
    ) -> Result<Array> {
        if folds(h, kernels) {
            return self.forward_with(h, Some(norm), Some(h), cache, kernels);
        }
        Ok(h.add(self.forward(&norm.forward(h)?, cache, kernels)?)?)
    }

    /// Attention of `x` over the cache, `x`'s keys and values added to it.
    pub fn forward(&self, x: &Array, cache: &mut KvCache, kernels: &Kernels) -> Result<Array> {
        self.forward_with(x, None, None, cache, kernels)
    }

    /// Attention of `x` — normed first by `input_norm`, and added to `residual`, when given:
    /// in quest's matvec where it folds them in, else by MLX's ops.
    fn forward_with(
        &self,
        x: &Array,
        input_norm: Option<&RmsNorm>,
        residual: Option<&Array>,
        cache: &mut KvCache,
        kernels: &Kernels,
    ) -> Result<Array> {
        let (b, l) = (x.shape()[0], x.shape()[1]);
        let pieces = self.pieces.as_deref();
        let fold_in = Fold {
            norm: input_norm.map(|n| (&n.weight, n.eps)),
            ..Fold::default()
        };
        // The stacked projection's output, with the input norm folded in where quest's
        // matvec runs; a decode step on CUDA takes its heads from it in one kernel of
        // quest's (Kernels::heads), anything else splits it for MLX's ops.
        let joined = match &self.qkv_proj {
            Fused::One { linear, .. } => Some(project(linear, x, &fold_in, kernels, pieces)?),
            Fused::Separate(_) => None,
        };
        let fold_out = Fold {
            residual,
            ..Fold::default()
        };
        // A decode step on CUDA may do all of attention in one kernel of quest's.
        if let Some(qkv) = &joined {
            if let Some(out) = kernels.attend(qkv, &self.heads_spec(), cache)? {
                return project(&self.o_proj, &out, &fold_out, kernels, pieces);
            }
        }
        let by_kernel = match &joined {
            Some(qkv) => kernels.heads(qkv, &self.heads_spec(), cache.offset)?,
            None => None,
        };
        let (q, k, v, gate) = match by_kernel {
            Some([q, k, v]) => (q, k, v, None),
            None => {
                let parts = match (&joined, input_norm) {
                    (Some(qkv), _) => self.qkv_proj.split(qkv)?,
                    (None, Some(norm)) => {
                        self.qkv_proj
                            .forward_in(&norm.forward(x)?, kernels, pieces)?
                    }
                    (None, None) => self.qkv_proj.forward_in(x, kernels, pieces)?,
                };
                self.heads_by_ops(&parts, b, l, cache.offset)?
            }
        };
        let (keys, values) = cache.update_and_fetch(&k, &v)?;
        let scale = (self.head_dim as f32).powf(-0.5);
        // One query attends to everything; a prompt needs the causal mask.
        let out = match &self.pieces {
            Some(pieces) => {
                let mask = (l > 1).then_some(Mask::Causal);
                pieces.attention(&q, &keys, &values, scale, mask)?
            }
            None => {
                let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
                scaled_dot_product_attention(&q, &keys, &values, scale, mask, None)?
            }
        };
        // [B, H, L, D] -> [B, L, H*D]; again one reshape for one position.
        let out = if l == 1 {
            out.reshape(&[b, 1, -1])?
        } else {
            out.transpose_axes(&[0, 2, 1, 3])?.reshape(&[b, l, -1])?
        };
        let out = match gate {
            Some(gate) => out.multiply(sigmoid(&gate)?)?,
            None => out,
        };
        project(&self.o_proj, &out, &fold_out, kernels, pieces)
    }

    fn heads_spec(&self) -> HeadsSpec<'_> {
        HeadsSpec {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            rope_dims: self.rope_dims,
            rope_theta: self.rope_theta,
            rope_traditional: self.rope_traditional,
            qk_norm: self
                .qk_norm
                .as_ref()
                .map(|(q, k)| (&q.weight, &k.weight, q.eps)),
        }
    }

    /// q, k (normed and rotated to the cache's position), v as `[B, H, L, D]`, and the
    /// output gate, from the projection's parts, with MLX's ops.
    fn heads_by_ops(
        &self,
        qkv: &[Array],
        b: i32,
        l: i32,
        offset: i32,
    ) -> Result<(Array, Array, Array, Option<Array>)> {
        let d = self.head_dim;
        // [B, L, H*D] -> [B, H, L, D]. With one position both orders hold the same memory, so
        // a decode step needs one reshape, not a reshape and a transpose: every op in the
        // graph costs the host time each step, kernel or not.
        let to_heads = |t: &Array, heads: i32| {
            if l == 1 {
                t.reshape(&[b, heads, 1, d])
            } else {
                t.reshape(&[b, l, heads, d])?.transpose_axes(&[0, 2, 1, 3])
            }
        };
        let (mut q, gate) = if self.output_gate {
            // Per head: the first head_dim channels are the query, the next head_dim the gate.
            let both = qkv[0].reshape(&[b, l, self.heads, 2 * d])?;
            let halves = both.split_equal(2, -1)?;
            (
                halves[0].transpose_axes(&[0, 2, 1, 3])?,
                Some(halves[1].reshape(&[b, l, -1])?),
            )
        } else {
            (to_heads(&qkv[0], self.heads)?, None)
        };
        let mut k = to_heads(&qkv[1], self.kv_heads)?;
        let v = to_heads(&qkv[2], self.kv_heads)?;
        // Per head, over head_dim: the same in either order of the axes.
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            q = q_norm.forward(&q)?;
            k = k_norm.forward(&k)?;
        }
        if b * l > 1 && self.qk_norm.is_none() {
            // q and k are strided views into the fused projection's output (a norm would have
            // made new arrays). MLX 0.32.2's CUDA RoPE gets such a view wrong when it spans
            // several positions: against the CPU, relative error 0.57–0.66 for a prompt's q and
            // k, and at times an illegal memory access (docs/gpu/2026-12-01-smollm2-rope/probe.txt;
            // a batch of one-position rows takes the same kernel path). SmolLM2 wrote garbage
            // there. So a contiguous copy first; one position of one sequence already is one.
            q = q.contiguous()?;
            k = k.contiguous()?;
        }
        // Positions continue where the cache ends: that is what makes one-token steps work.
        let rotate = |t: &Array| -> Result<Array> {
            if let Some(pieces) = &self.pieces {
                return pieces.rope(
                    t,
                    self.rope_dims,
                    self.rope_traditional,
                    self.rope_theta,
                    offset,
                );
            }
            Ok(rope(
                t,
                self.rope_dims,
                self.rope_traditional,
                self.rope_theta,
                1.0,
                offset,
                None,
            )?)
        };
        Ok((rotate(&q)?, rotate(&k)?, v, gate))
    }

    /// Qwen3's per-head q and k norms, where it has them.
    pub fn norms_mut(&mut self) -> Vec<&mut RmsNorm> {
        match &mut self.qk_norm {
            Some((q, k)) => vec![q, k],
            None => Vec::new(),
        }
    }

    /// Its matrices in `layout` (the q/k norms stay float).
    pub fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.qkv_proj = self.qkv_proj.requantize(layout, dtype)?;
        self.o_proj = self.o_proj.requantize(layout, dtype)?;
        Ok(())
    }

    pub fn nbytes(&self) -> usize {
        let norms = self
            .qk_norm
            .as_ref()
            .map_or(0, |(q, k)| q.weight.nbytes() + k.weight.nbytes());
        self.qkv_proj.nbytes() + self.o_proj.nbytes() + norms
    }
}

/// The SwiGLU feed-forward: `down(silu(gate(x)) * up(x))` (mlx-lm's `MLP`).
pub struct Mlp {
    /// gate_proj and up_proj as one matmul.
    gate_up_proj: Fused,
    down_proj: Linear,
    /// The learner's SwiGLU, where the model was given pieces ([`crate::lm::Pieces`]).
    pub pieces: Option<Arc<dyn Pieces>>,
}

impl Mlp {
    pub fn load(w: &mut Weights, p: &str, q: Option<Quantization>) -> Result<Self> {
        Ok(Self {
            gate_up_proj: Fused::build(
                vec![
                    w.linear(&format!("{p}.gate_proj"), q)?,
                    w.linear(&format!("{p}.up_proj"), q)?,
                ],
                !w.lazy,
            )?,
            down_proj: w.linear(&format!("{p}.down_proj"), q)?,
            pieces: None,
        })
    }

    /// `h + mlp(norm(h))`, folded into quest's matvec in a decode step where it runs (as
    /// [`Attention::residual`]), SwiGLU too.
    pub fn residual(&self, h: &Array, norm: &RmsNorm, kernels: &Kernels) -> Result<Array> {
        if folds(h, kernels) {
            return self.forward_with(h, Some(norm), Some(h), kernels);
        }
        Ok(h.add(self.forward(&norm.forward(h)?, kernels)?)?)
    }

    pub fn forward(&self, x: &Array, kernels: &Kernels) -> Result<Array> {
        self.forward_with(x, None, None, kernels)
    }

    /// The feed-forward of `x` — normed first by `input_norm`, and added to `residual`, when
    /// given: in quest's matvec where it folds them in, SwiGLU too, else by MLX's ops.
    fn forward_with(
        &self,
        x: &Array,
        input_norm: Option<&RmsNorm>,
        residual: Option<&Array>,
        kernels: &Kernels,
    ) -> Result<Array> {
        if let Some(pieces) = &self.pieces {
            // The learner's SwiGLU between MLX's ops: norm, [gate | up], gate, down, add.
            let x = match input_norm {
                Some(norm) => norm.forward(x)?,
                None => x.clone(),
            };
            let gate_up = self
                .gate_up_proj
                .forward_in(&x, kernels, Some(pieces.as_ref()))?;
            let gated = pieces.swiglu(&gate_up[0], &gate_up[1])?;
            let y = self
                .down_proj
                .forward_in(&gated, kernels, Some(pieces.as_ref()))?;
            return Ok(match residual {
                Some(r) => r.add(&y)?,
                None => y,
            });
        }
        if let Fused::One { linear, .. } = &self.gate_up_proj {
            let fold_in = Fold {
                norm: input_norm.map(|n| (&n.weight, n.eps)),
                ..Fold::default()
            };
            let gate_up = project(linear, x, &fold_in, kernels, None)?;
            let fold_out = Fold {
                swiglu: true,
                residual,
                ..Fold::default()
            };
            return project(&self.down_proj, &gate_up, &fold_out, kernels, None);
        }
        // Parts that could not be stacked: MLX's ops, in the same order.
        let normed;
        let x = match input_norm {
            Some(norm) => {
                normed = norm.forward(x)?;
                &normed
            }
            None => x,
        };
        let gate_up = self.gate_up_proj.forward(x, kernels)?;
        let y = self
            .down_proj
            .forward(&swiglu(&gate_up[0], &gate_up[1])?, kernels)?;
        Ok(match residual {
            Some(r) => r.add(&y)?,
            None => y,
        })
    }

    /// Its matrices in `layout`.
    pub fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.gate_up_proj = self.gate_up_proj.requantize(layout, dtype)?;
        self.down_proj = self.down_proj.requantize(layout, dtype)?;
        Ok(())
    }

    pub fn nbytes(&self) -> usize {
        self.gate_up_proj.nbytes() + self.down_proj.nbytes()
    }
}

/// `x` through `linear` with `fold`'s ops around it: one kernel of quest's where it
/// applies ([`Kernels::project`]), else MLX's ops one by one — SwiGLU of `[gate | up]`,
/// the norm, the product, the residual add — with the same values.
fn project(
    linear: &Linear,
    x: &Array,
    fold: &Fold,
    kernels: &Kernels,
    pieces: Option<&dyn Pieces>,
) -> Result<Array> {
    if let Some(y) = linear.folded(x, fold, kernels)? {
        return Ok(y);
    }
    let mut x = x.clone();
    if fold.swiglu {
        let halves = x.split_equal(2, -1)?;
        x = swiglu(&halves[0], &halves[1])?;
    }
    if let Some((weight, eps)) = fold.norm {
        x = rms_norm(&x, Some(weight), eps)?;
    }
    let y = linear.forward_in(&x, kernels, pieces)?;
    Ok(match fold.residual {
        Some(r) => r.add(&y)?,
        None => y,
    })
}
