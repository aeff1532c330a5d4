//! `qwen3` (dense Qwen3), as mlx-lm's `models/qwen3.py`: the config it reads, its
//! attention (an RMS norm on each query and key head before RoPE: `q_norm`, `k_norm`), its
//! MLP and its block. The blocks sit in the shared embedding → blocks → final norm → head
//! ([`super::decoder`]); every norm, RoPE, attention and projection is computed by
//! [`Fast`] (mlx-lm's `mx.fast`).
//!
//! ```text
//! h = h + self_attn(input_layernorm(h), cache)     # q_norm, k_norm per head, then RoPE
//! h = h + mlp(post_attention_layernorm(h))
//! ```

use std::rc::Rc;

use anyhow::{bail, Result};
use mlx_rs::{Array, Dtype};
use serde::Deserialize;

use super::decoder::{from_heads, to_heads, Decoder, Layer};
use super::{check_rope_scaling, Shape};
use crate::kernels::HeadsSpec;
use crate::lm::cache::{KvCache, LayerCache};
use crate::lm::fast::{Fast, Residual, Rope, Sublayer};
use crate::lm::pieces::Mask;
use crate::lm::weights::{Fused, Linear, Quantization, RmsNorm, Weights};
use crate::lm::Layout;

/// Builds a Qwen3 decoder from a `config.json` and its weights.
pub fn build(config: &serde_json::Value, mut weights: Weights, fast: &Rc<Fast>) -> Result<Decoder> {
    super::drop_rotary_frequencies(&mut weights);
    let shape = shape(config)?;
    Decoder::load(weights, &shape, fast, |w, p, _| {
        Block::load(w, p, &shape, fast)
    })
}

/// The model's shape, as `config.json` says it.
pub fn shape(config: &serde_json::Value) -> Result<Shape> {
    super::read_config::<Config>(config, "qwen3")?.shape()
}

/// The keys of a Hugging Face `config.json` this architecture reads (mlx-lm's `ModelArgs`).
#[derive(Debug, Deserialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: usize,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub num_key_value_heads: i32,
    pub head_dim: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub rope_theta: f32,
    pub rope_scaling: Option<serde_json::Value>,
    pub tie_word_embeddings: bool,
    pub quantization: Option<Quantization>,
}

impl Config {
    pub fn shape(&self) -> Result<Shape> {
        check_rope_scaling(self.rope_scaling.as_ref())?;
        Ok(Shape {
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            vocab_size: self.vocab_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
            rms_norm_eps: self.rms_norm_eps,
            rope_theta: self.rope_theta,
            rope_traditional: false,
            tie_word_embeddings: self.tie_word_embeddings,
            qk_norm: true,
            rope_dims: self.head_dim,
            attention_output_gate: false,
            linear_attention: None,
            quantization: self.quantization,
        })
    }
}

/// Attention with grouped-query heads, per-head q/k norms, RoPE from the cache's position
/// and a KV cache (mlx-lm's `Attention`); q/k/v one stacked matmul.
pub struct Attention {
    qkv_proj: Fused,
    o_proj: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    heads: i32,
    kv_heads: i32,
    head_dim: i32,
    rope: Rope,
    fast: Rc<Fast>,
}

impl Attention {
    fn load(w: &mut Weights, p: &str, s: &Shape, fast: &Rc<Fast>) -> Result<Self> {
        let q = s.quantization;
        let q_norm = RmsNorm::load(w, &format!("{p}.q_norm"), s.rms_norm_eps)?;
        let k_norm = RmsNorm::load(w, &format!("{p}.k_norm"), s.rms_norm_eps)?;
        let parts = ["q_proj", "k_proj", "v_proj"].map(|name| w.linear(&format!("{p}.{name}"), q));
        Ok(Self {
            qkv_proj: Fused::build(parts.into_iter().collect::<Result<_>>()?, !w.lazy)?,
            o_proj: w.linear(&format!("{p}.o_proj"), q)?,
            q_norm,
            k_norm,
            heads: s.heads,
            kv_heads: s.kv_heads,
            head_dim: s.head_dim,
            rope: s.rope(),
            fast: fast.clone(),
        })
    }

    /// `o_proj(attention(q, k, v))` of the sublayer's input, the cache extended by its
    /// keys and values.
    fn forward(&self, x: &Sublayer, cache: &mut KvCache) -> Result<Residual> {
        let (b, l) = x.batch_and_length();
        let qkv = self.fast.first_projection(x, &self.qkv_proj)?;
        // A decode step on CUDA may do all of attention, the cache write too, in one kernel
        // (not for rows of different requests: their padding needs the rows' mask).
        if cache.rows().is_none() {
            if let Some(out) = self.fast.attend(&qkv, &self.heads_spec(), cache)? {
                return self.fast.last_projection(x, &out, &self.o_proj);
            }
        }
        let rows = cache.rows().map(|rows| rows.positions.clone());
        let fused = match rows {
            // Rows of different requests turn each at its own position: by ops.
            Some(_) => None,
            None => self.fast.heads(&qkv, &self.heads_spec(), cache.offset)?,
        };
        let [q, k, v] = match fused {
            Some(heads) => heads,
            None => self.heads_by_ops(&qkv.parts()?, b, l, cache.offset, rows.as_ref())?,
        };
        let (keys, values) = cache.update_and_fetch(&k, &v)?;
        let scale = (self.head_dim as f32).powf(-0.5);
        let out = match cache.rows() {
            // Rows of different requests: each query sees its own row's positions alone.
            Some(rows) => self
                .fast
                .attention_over_rows(&q, &keys, &values, scale, &rows.mask)?,
            None => {
                // One query attends to everything; a prompt needs the causal mask.
                let mask = (l > 1).then_some(Mask::Causal);
                self.fast
                    .scaled_dot_product_attention(&q, &keys, &values, scale, mask)?
            }
        };
        self.fast
            .last_projection(x, &from_heads(&out, b, l)?, &self.o_proj)
    }

    /// q and k normed per head and rotated to the cache's position, and v, as `[B, H, L, D]`.
    fn heads_by_ops(
        &self,
        qkv: &[Array],
        b: i32,
        l: i32,
        offset: i32,
        rows: Option<&Array>,
    ) -> Result<[Array; 3]> {
        let q = to_heads(&qkv[0], b, l, self.heads, self.head_dim)?;
        let k = to_heads(&qkv[1], b, l, self.kv_heads, self.head_dim)?;
        let v = to_heads(&qkv[2], b, l, self.kv_heads, self.head_dim)?;
        // Per head, over head_dim: the same in either order of the axes.
        let q = self.fast.rms_norm(&q, &self.q_norm)?;
        let k = self.fast.rms_norm(&k, &self.k_norm)?;
        // Positions continue where the cache ends: that is what makes one-token steps work.
        let (q, k) = match rows {
            Some(positions) => (
                self.fast.rope_rows(&q, &self.rope, positions)?,
                self.fast.rope_rows(&k, &self.rope, positions)?,
            ),
            None => (
                self.fast.rope(&q, &self.rope, offset)?,
                self.fast.rope(&k, &self.rope, offset)?,
            ),
        };
        Ok([q, k, v])
    }

    fn heads_spec(&self) -> HeadsSpec<'_> {
        HeadsSpec {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            rope_dims: self.rope.dims,
            rope_theta: self.rope.base,
            rope_traditional: self.rope.traditional,
            qk_norm: Some((&self.q_norm.weight, &self.k_norm.weight, self.q_norm.eps)),
        }
    }

    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.qkv_proj = self.qkv_proj.requantize(layout, dtype)?;
        self.o_proj = self.o_proj.requantize(layout, dtype)?;
        Ok(())
    }

    fn nbytes(&self) -> usize {
        self.qkv_proj.nbytes()
            + self.o_proj.nbytes()
            + self.q_norm.weight.nbytes()
            + self.k_norm.weight.nbytes()
    }
}

/// The SwiGLU feed-forward, `down_proj(silu(gate_proj(x)) · up_proj(x))` (mlx-lm's `MLP`);
/// gate and up one stacked matmul.
pub struct Mlp {
    gate_up_proj: Fused,
    down_proj: Linear,
    fast: Rc<Fast>,
}

impl Mlp {
    fn load(w: &mut Weights, p: &str, s: &Shape, fast: &Rc<Fast>) -> Result<Self> {
        let q = s.quantization;
        let parts = ["gate_proj", "up_proj"].map(|name| w.linear(&format!("{p}.{name}"), q));
        Ok(Self {
            gate_up_proj: Fused::build(parts.into_iter().collect::<Result<_>>()?, !w.lazy)?,
            down_proj: w.linear(&format!("{p}.down_proj"), q)?,
            fast: fast.clone(),
        })
    }

    /// `mlp(x)` of the sublayer's input.
    fn forward(&self, x: &Sublayer) -> Result<Residual> {
        self.fast.mlp(x, &self.gate_up_proj, &self.down_proj)
    }

    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.gate_up_proj = self.gate_up_proj.requantize(layout, dtype)?;
        self.down_proj = self.down_proj.requantize(layout, dtype)?;
        Ok(())
    }

    fn nbytes(&self) -> usize {
        self.gate_up_proj.nbytes() + self.down_proj.nbytes()
    }
}

/// mlx-lm's `TransformerBlock`: pre-norm attention, then a pre-norm MLP, each added back
/// to the residual stream.
pub struct Block {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
    fast: Rc<Fast>,
}

impl Block {
    fn load(w: &mut Weights, p: &str, shape: &Shape, fast: &Rc<Fast>) -> Result<Self> {
        let eps = shape.rms_norm_eps;
        Ok(Block {
            input_layernorm: RmsNorm::load(w, &format!("{p}.input_layernorm"), eps)?,
            self_attn: Attention::load(w, &format!("{p}.self_attn"), shape, fast)?,
            post_attention_layernorm: RmsNorm::load(
                w,
                &format!("{p}.post_attention_layernorm"),
                eps,
            )?,
            mlp: Mlp::load(w, &format!("{p}.mlp"), shape, fast)?,
            fast: fast.clone(),
        })
    }
}

impl Layer for Block {
    fn forward(&self, h: &Array, cache: &mut LayerCache) -> Result<Array> {
        let LayerCache::Kv(cache) = cache else {
            bail!("a layer got the wrong kind of cache; make the caches with lm::make_prompt_cache(&model)");
        };
        // h = h + attn(norm(h)), then h + mlp(norm(h)), as mlx-lm's block reads.
        let r = self
            .self_attn
            .forward(&self.fast.pre_norm(h, &self.input_layernorm)?, cache)?;
        let h = r.added_to(h)?;
        let r = self
            .mlp
            .forward(&self.fast.pre_norm(&h, &self.post_attention_layernorm)?)?;
        r.added_to(&h)
    }

    fn empty_cache(&self) -> LayerCache {
        LayerCache::Kv(KvCache::new())
    }

    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.self_attn.requantize(layout, dtype)?;
        self.mlp.requantize(layout, dtype)
    }

    fn nbytes(&self) -> usize {
        self.self_attn.nbytes()
            + self.mlp.nbytes()
            + self.input_layernorm.weight.nbytes()
            + self.post_attention_layernorm.weight.nbytes()
    }
}
