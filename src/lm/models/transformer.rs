//! The decoder `llama`, `qwen3` and `qwen3_5` are made of: pre-norm blocks of a token
//! mixer (attention with grouped-query heads, RoPE and a KV cache; or Qwen3.5's gated
//! delta net with a fixed-size state) and a SwiGLU feed-forward. The architecture files
//! say which pieces a model has; this file says how a token flows through them.

use anyhow::{bail, ensure, Context, Result};
use mlx_rs::fast::{rms_norm, rope, scaled_dot_product_attention, ScaledDotProductAttentionMask};
use mlx_rs::ops::sigmoid;
use mlx_rs::{Array, Dtype};

use super::activations::swiglu;
use super::gated_delta::{GatedDeltaNet, GatedDeltaShape};
use crate::lm::add_norm;
use crate::lm::attend;
use crate::lm::cache::{KvCache, LayerCache, RecurrentCache};
use crate::lm::cuda_kernel::{self, Kernel};
use crate::lm::qkv;
use crate::lm::qmv::Fold;
use crate::lm::weights::{Embedding, Fused, Linear, Quantization, Weights};
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
    fn linear_layer(&self, i: usize) -> Option<&GatedDeltaShape> {
        let linear = self.linear_attention.as_ref()?;
        ((i + 1) % linear.full_attention_interval != 0).then_some(&linear.shape)
    }
}

pub struct RmsNorm {
    weight: Array,
    eps: f32,
}

impl RmsNorm {
    fn load(w: &mut Weights, name: &str, eps: f32) -> Result<Self> {
        Ok(Self {
            weight: w.take(&format!("{name}.weight"))?,
            eps,
        })
    }
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(rms_norm(x, Some(&self.weight), self.eps)?)
    }

    /// `(h + delta, norm(h + delta))`: the residual stream goes on with the sum, the next
    /// sublayer reads its norm.
    fn add_then_norm(&self, h: &Array, delta: &Array) -> Result<(Array, Array)> {
        if let Some([sum, normed]) = add_norm::add_norm(h, delta, &self.weight, self.eps)? {
            return Ok((sum, normed));
        }
        let sum = h.add(delta)?;
        let normed = self.forward(&sum)?;
        Ok((sum, normed))
    }
}

struct Attention {
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
}

impl Attention {
    fn load(w: &mut Weights, p: &str, s: &DecoderShape) -> Result<Self> {
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
        })
    }

    fn forward(&self, x: &Array, cache: &mut KvCache) -> Result<Array> {
        self.forward_with(x, None, None, cache)
    }

    /// Attention of `x` — normed first by `input_norm`, and added to `residual`, when given:
    /// in quest's matvec where it folds them in (lm::qmv), else by MLX's ops.
    fn forward_with(
        &self,
        x: &Array,
        input_norm: Option<&RmsNorm>,
        residual: Option<&Array>,
        cache: &mut KvCache,
    ) -> Result<Array> {
        let (b, l) = (x.shape()[0], x.shape()[1]);
        let fold_in = Fold {
            norm: input_norm.map(|n| (&n.weight, n.eps)),
            ..Fold::default()
        };
        // The stacked projection's output, with the input norm folded in where quest's
        // matvec runs; a decode step on CUDA takes its heads from it in one kernel of
        // quest's (lm::qkv), anything else splits it for MLX's ops.
        let joined = match &self.qkv_proj {
            Fused::One { linear, .. } => Some(project(linear, x, &fold_in)?),
            Fused::Separate(_) => None,
        };
        let fold_out = Fold {
            residual,
            ..Fold::default()
        };
        // A decode step on CUDA may do all of attention in one kernel of quest's (lm::attend).
        if let Some(qkv) = &joined {
            if let Some(out) = attend::attend(qkv, &self.heads_spec(), cache)? {
                return project(&self.o_proj, &out, &fold_out);
            }
        }
        let by_kernel = match &joined {
            Some(qkv) => qkv::heads(qkv, &self.heads_spec(), cache.offset)?,
            None => None,
        };
        let (q, k, v, gate) = match by_kernel {
            Some([q, k, v]) => (q, k, v, None),
            None => {
                let parts = match (&joined, input_norm) {
                    (Some(qkv), _) => self.qkv_proj.split(qkv)?,
                    (None, Some(norm)) => self.qkv_proj.forward(&norm.forward(x)?)?,
                    (None, None) => self.qkv_proj.forward(x)?,
                };
                self.heads_by_ops(&parts, b, l, cache.offset)?
            }
        };
        let (keys, values) = cache.update_and_fetch(&k, &v)?;
        let scale = (self.head_dim as f32).powf(-0.5);
        // One query attends to everything; a prompt needs the causal mask.
        let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
        let out = scaled_dot_product_attention(&q, &keys, &values, scale, mask, None)?;
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
        project(&self.o_proj, &out, &fold_out)
    }

    fn heads_spec(&self) -> qkv::HeadsSpec<'_> {
        qkv::HeadsSpec {
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
            // k, and at times an illegal memory access (docs/gpu/2026-12-01-session4/probe.txt;
            // a batch of one-position rows takes the same kernel path). SmolLM2 wrote garbage
            // there. So a contiguous copy first; one position of one sequence already is one.
            q = q.contiguous()?;
            k = k.contiguous()?;
        }
        // Positions continue where the cache ends: that is what makes one-token steps work.
        let rotate = |t: &Array| {
            rope(
                t,
                self.rope_dims,
                self.rope_traditional,
                self.rope_theta,
                1.0,
                offset,
                None,
            )
        };
        Ok((rotate(&q)?, rotate(&k)?, v, gate))
    }

    fn nbytes(&self) -> usize {
        let norms = self
            .qk_norm
            .as_ref()
            .map_or(0, |(q, k)| q.weight.nbytes() + k.weight.nbytes());
        self.qkv_proj.nbytes() + self.o_proj.nbytes() + norms
    }
}

struct Mlp {
    /// gate_proj and up_proj as one matmul.
    gate_up_proj: Fused,
    down_proj: Linear,
}

impl Mlp {
    fn load(w: &mut Weights, p: &str, q: Option<Quantization>) -> Result<Self> {
        Ok(Self {
            gate_up_proj: Fused::build(
                vec![
                    w.linear(&format!("{p}.gate_proj"), q)?,
                    w.linear(&format!("{p}.up_proj"), q)?,
                ],
                !w.lazy,
            )?,
            down_proj: w.linear(&format!("{p}.down_proj"), q)?,
        })
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        self.forward_with(x, None, None)
    }

    /// The feed-forward of `x` — normed first by `input_norm`, and added to `residual`, when
    /// given: in quest's matvec where it folds them in, SwiGLU too (lm::qmv), else by MLX's ops.
    fn forward_with(
        &self,
        x: &Array,
        input_norm: Option<&RmsNorm>,
        residual: Option<&Array>,
    ) -> Result<Array> {
        if let Fused::One { linear, .. } = &self.gate_up_proj {
            let fold_in = Fold {
                norm: input_norm.map(|n| (&n.weight, n.eps)),
                ..Fold::default()
            };
            let gate_up = project(linear, x, &fold_in)?;
            let fold_out = Fold {
                swiglu: true,
                residual,
                ..Fold::default()
            };
            return project(&self.down_proj, &gate_up, &fold_out);
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
        let gate_up = self.gate_up_proj.forward(x)?;
        let y = self.down_proj.forward(&swiglu(&gate_up[0], &gate_up[1])?)?;
        Ok(match residual {
            Some(r) => r.add(&y)?,
            None => y,
        })
    }

    fn nbytes(&self) -> usize {
        self.gate_up_proj.nbytes() + self.down_proj.nbytes()
    }
}

/// `x` through `linear` with `fold`'s ops around it: one kernel of quest's where it
/// applies (lm::qmv), else MLX's ops one by one — SwiGLU of `[gate | up]`, the norm, the
/// product, the residual add — with the same values.
fn project(linear: &Linear, x: &Array, fold: &Fold) -> Result<Array> {
    if let Some(y) = linear.folded(x, fold)? {
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
    let y = linear.forward(&x)?;
    Ok(match fold.residual {
        Some(r) => r.add(&y)?,
        None => y,
    })
}

/// What mixes information across positions in a block.
enum Mixer {
    Attention(Attention),
    GatedDelta(GatedDeltaNet),
}

impl Mixer {
    fn forward(&self, x: &Array, cache: &mut LayerCache) -> Result<Array> {
        match (self, cache) {
            (Mixer::Attention(attn), LayerCache::Kv(kv)) => attn.forward(x, kv),
            (Mixer::GatedDelta(delta), LayerCache::Recurrent(state)) => delta.forward(x, state),
            _ => bail!("a layer got the wrong kind of cache; make the caches with lm::make_prompt_cache(&model)"),
        }
    }

    /// `h + mixer(norm(h))`, with the norm and the add folded into quest's matvec where it
    /// can take them (attention; a gated delta layer runs MLX's ops).
    fn forward_residual(&self, h: &Array, norm: &RmsNorm, cache: &mut LayerCache) -> Result<Array> {
        match (self, cache) {
            (Mixer::Attention(attn), LayerCache::Kv(kv)) => {
                attn.forward_with(h, Some(norm), Some(h), kv)
            }
            (mixer, cache) => Ok(h.add(mixer.forward(&norm.forward(h)?, cache)?)?),
        }
    }

    fn empty_cache(&self) -> LayerCache {
        match self {
            Mixer::Attention(_) => LayerCache::Kv(KvCache::new()),
            Mixer::GatedDelta(_) => LayerCache::Recurrent(RecurrentCache::new()),
        }
    }

    fn nbytes(&self) -> usize {
        match self {
            Mixer::Attention(attn) => attn.nbytes(),
            Mixer::GatedDelta(delta) => delta.nbytes(),
        }
    }
}

struct Block {
    input_layernorm: RmsNorm,
    mixer: Mixer,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

/// Embeddings, the blocks, the final norm and the language-model head.
pub struct Decoder {
    embed_tokens: Embedding,
    layers: Vec<Block>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    pub shape: DecoderShape,
}

impl Decoder {
    /// Builds the decoder from HF/MLX-named weights (`model.layers.N.self_attn.q_proj…`).
    pub fn load(mut w: Weights, shape: DecoderShape) -> Result<Self> {
        let q = shape.quantization;
        let eps = shape.rms_norm_eps;
        let embed_tokens = w.embedding("model.embed_tokens", q)?;
        let layers = (0..shape.layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                let mixer = match shape.linear_layer(i) {
                    Some(delta) => Mixer::GatedDelta(GatedDeltaNet::load(
                        &mut w,
                        &format!("{p}.linear_attn"),
                        delta,
                        q,
                    )?),
                    None => Mixer::Attention(Attention::load(
                        &mut w,
                        &format!("{p}.self_attn"),
                        &shape,
                    )?),
                };
                Ok(Block {
                    input_layernorm: RmsNorm::load(&mut w, &format!("{p}.input_layernorm"), eps)?,
                    mixer,
                    post_attention_layernorm: RmsNorm::load(
                        &mut w,
                        &format!("{p}.post_attention_layernorm"),
                        eps,
                    )?,
                    mlp: Mlp::load(&mut w, &format!("{p}.mlp"), q)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(&mut w, "model.norm", eps)?;
        let lm_head = if shape.tie_word_embeddings {
            w.remove("lm_head.weight");
            None
        } else {
            Some(w.linear("lm_head", q)?)
        };
        w.finish()?;
        Ok(Self {
            embed_tokens,
            layers,
            norm,
            lm_head,
            shape,
        })
    }

    /// `tokens` is `[B, L]` int32; returns `[B, L, vocab]` logits, lazily.
    pub fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        ensure!(
            cache.len() == self.layers.len(),
            "the cache has {} layers but the model has {}; make it with lm::make_prompt_cache(&model)",
            cache.len(),
            self.layers.len()
        );
        ensure!(
            tokens.ndim() == 2 && tokens.shape()[1] > 0,
            "tokens must be shaped [batch, length] with at least one token, not {:?}",
            tokens.shape()
        );
        // A cache holds the sequences its prefill started; a step must bring one token for each.
        let batch = tokens.shape()[0];
        if let Some(held) = cache.iter().find_map(LayerCache::batch) {
            ensure!(
                held == batch,
                "tokens have a batch of {batch} but the cache holds {held} sequences; \
                 feed each step one token per sequence ([{held}, 1]), or make a new cache \
                 with lm::make_prompt_cache(&model) for another batch"
            );
        }
        let mut h = self.embed_tokens.forward(tokens)?;
        if tokens.shape()[1] == 1 && cuda_kernel::in_use(Kernel::Matvec)? {
            return self.forward_folded(h, cache);
        }
        // Every residual add is followed by a norm (the next sublayer's, or the final one):
        // the two are computed together, by one kernel where quest's runs (lm::add_norm).
        let first_norm = self
            .layers
            .first()
            .map_or(&self.norm, |b| &b.input_layernorm);
        let mut normed = first_norm.forward(&h)?;
        for (i, (block, layer_cache)) in self.layers.iter().zip(cache.iter_mut()).enumerate() {
            let mixed = block.mixer.forward(&normed, layer_cache)?;
            let (sum, ff_in) = block.post_attention_layernorm.add_then_norm(&h, &mixed)?;
            let ff = block.mlp.forward(&ff_in)?;
            let next_norm = self
                .layers
                .get(i + 1)
                .map_or(&self.norm, |b| &b.input_layernorm);
            (h, normed) = next_norm.add_then_norm(&sum, &ff)?;
        }
        self.logits(&normed)
    }

    /// The output head on the final norm's output (the embedding table when tied).
    fn logits(&self, normed: &Array) -> Result<Array> {
        match &self.lm_head {
            Some(head) => head.forward(normed),
            None => self.embed_tokens.as_linear(normed),
        }
    }

    /// The blocks from the embedded `h` on, each sublayer's input norm in the matvec that
    /// reads it and its residual add in the one that ends it: with quest's matvec (lm::qmv)
    /// a decode step's graph has four ops a layer fewer; elsewhere, MLX's ops in this order.
    fn forward_folded(&self, mut h: Array, cache: &mut [LayerCache]) -> Result<Array> {
        for (block, layer_cache) in self.layers.iter().zip(cache.iter_mut()) {
            h = block
                .mixer
                .forward_residual(&h, &block.input_layernorm, layer_cache)?;
            h = block
                .mlp
                .forward_with(&h, Some(&block.post_attention_layernorm), Some(&h))?;
        }
        self.logits(&self.norm.forward(&h)?)
    }

    /// One empty cache per layer, of the kind the layer needs.
    pub fn make_cache(&self) -> Vec<LayerCache> {
        self.layers
            .iter()
            .map(|block| block.mixer.empty_cache())
            .collect()
    }

    /// Every matrix in `layout` — the projections, the feed-forward, the embedding table
    /// and the head (mlx-lm's `quantize` converts the same layers); norms stay float.
    pub fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.embed_tokens = self
            .embed_tokens
            .requantize(layout, dtype)
            .context("the embedding table")?;
        for (i, block) in self.layers.iter_mut().enumerate() {
            let at = || format!("layer {i}");
            match &mut block.mixer {
                Mixer::Attention(attn) => {
                    attn.qkv_proj = attn.qkv_proj.requantize(layout, dtype).with_context(at)?;
                    attn.o_proj = attn.o_proj.requantize(layout, dtype).with_context(at)?;
                }
                Mixer::GatedDelta(delta) => delta.requantize(layout, dtype).with_context(at)?,
            }
            let mlp = &mut block.mlp;
            mlp.gate_up_proj = mlp
                .gate_up_proj
                .requantize(layout, dtype)
                .with_context(at)?;
            mlp.down_proj = mlp.down_proj.requantize(layout, dtype).with_context(at)?;
        }
        if let Some(head) = &mut self.lm_head {
            *head = head.requantize(layout, dtype).context("the output head")?;
        }
        Ok(())
    }

    /// Bytes of parameters one decode step reads (each weight once).
    pub fn weight_bytes(&self) -> usize {
        let blocks: usize = self
            .layers
            .iter()
            .map(|b| {
                b.mixer.nbytes()
                    + b.mlp.nbytes()
                    + b.input_layernorm.weight.nbytes()
                    + b.post_attention_layernorm.weight.nbytes()
            })
            .sum();
        // The embedding table is only gathered from (one row a token) unless it is also the head.
        let head = match &self.lm_head {
            Some(head) => head.nbytes(),
            None => self.embed_tokens.nbytes(),
        };
        blocks + self.norm.weight.nbytes() + head
    }
}

#[cfg(test)]
mod tests {
    use mlx_rs::ops::{abs, subtract};
    use serde_json::json;

    use crate::lm::{random, tokens_array};

    /// A two-layer Qwen3 (per-head q/k norms) for the same test as the tiny llama.
    fn tiny_qwen3() -> serde_json::Value {
        json!({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
            "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": true})
    }

    /// Off CUDA quest's matvec never runs, so the folded step is MLX's ops in the folded
    /// order (norm, product, residual add per projection): the plain step's logits.
    #[test]
    fn a_folded_decode_step_gives_the_plain_steps_logits() {
        for config in [random::tiny_llama(), tiny_qwen3()] {
            let model = random::model(&config, 7).unwrap();
            let decoder = &model.decoder;
            let (mut plain, mut folded) = (decoder.make_cache(), decoder.make_cache());
            let prompt = tokens_array(&[1, 2, 3, 4, 5]);
            decoder.forward(&prompt, &mut plain).unwrap();
            decoder.forward(&prompt, &mut folded).unwrap();
            for token in [7u32, 9, 11] {
                let input = tokens_array(&[token]);
                let a = decoder.forward(&input, &mut plain).unwrap();
                let h = decoder.embed_tokens.forward(&input).unwrap();
                let b = decoder.forward_folded(h, &mut folded).unwrap();
                let diff = abs(subtract(&a, &b).unwrap())
                    .unwrap()
                    .max(None)
                    .unwrap()
                    .item_exact::<f32>();
                assert!(
                    diff <= 1e-5,
                    "{}: logits differ by {diff}",
                    config["model_type"]
                );
            }
        }
    }
}
