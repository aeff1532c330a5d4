//! `qwen3_5` (Qwen3.5, dense), as mlx-lm's `models/qwen3_5.py`: a hybrid of Qwen3-style
//! blocks. Most layers mix tokens with a gated delta net (`gated_delta.rs`: linear
//! attention with a fixed-size state); every `full_attention_interval`-th layer has full
//! attention, with a sigmoid gate on its output and RoPE on a quarter of each head.
//!
//! A block, either kind:
//!
//! ```text
//! h = h + mixer(input_layernorm(h), cache)     # attention (KV cache) or gated delta (state)
//! h = h + mlp(post_attention_layernorm(h))
//! ```
//!
//! Qwen3.5 checkpoints are vision-language models: the text model's keys sit under
//! `text_config`, and the weights under `model.language_model` (HF) or
//! `language_model.model` (MLX). The vision tower is dropped.

use std::rc::Rc;

use anyhow::{bail, ensure, Context, Result};
use mlx_rs::ops::sigmoid;
use mlx_rs::{Array, Dtype};
use serde::Deserialize;
use serde_json::Value;

use super::decoder::{from_heads, to_heads, Decoder, Layer};
use super::gated_delta::GatedDeltaNet;
use super::{check_rope_scaling, LinearAttention, Shape};
use crate::lm::cache::{KvCache, LayerCache, RecurrentCache};
use crate::lm::fast::{Fast, Residual, Rope, Sublayer};
use crate::lm::pieces::Mask;
use crate::lm::weights::{Fused, Linear, Quantization, RmsNorm, Weights};
use crate::lm::Layout;

/// Builds a Qwen3.5 decoder from a `config.json` and its weights.
pub fn build(config: &Value, mut weights: Weights, fast: &Rc<Fast>) -> Result<Decoder> {
    sanitize(&mut weights).context("renaming the Qwen3.5 weights")?;
    let shape = shape(config)?;
    Decoder::load(weights, &shape, fast, |w, p, i| {
        Block::load(w, p, i, &shape, fast)
    })
}

/// The model's shape, as `config.json` says it.
pub fn shape(config: &Value) -> Result<Shape> {
    Config::read(config)
        .with_context(|| super::config_error("qwen3_5"))?
        .shape()
}

/// Full attention (mlx-lm's `Qwen3NextAttention`): grouped-query heads with per-head q/k
/// norms, RoPE on the first `rope.dims` channels of each head, a KV cache, and a sigmoid
/// gate on the output that `q_proj` yields beside the queries.
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

    /// `o_proj(attention(q, k, v) · sigmoid(gate))` of the sublayer's input, the cache
    /// extended by its keys and values. quest's decode kernels take no output gate (they
    /// decline a `q_proj` twice as wide), so MLX's ops make the heads.
    fn forward(&self, x: &Sublayer, cache: &mut KvCache) -> Result<Residual> {
        let (b, l) = x.batch_and_length();
        let qkv = self.fast.first_projection(x, &self.qkv_proj)?;
        let (q, k, v, gate) = self.heads_by_ops(&qkv.parts()?, b, l, cache.offset)?;
        let (keys, values) = cache.update_and_fetch(&k, &v)?;
        let scale = (self.head_dim as f32).powf(-0.5);
        // One query attends to everything; a prompt needs the causal mask.
        let mask = (l > 1).then_some(Mask::Causal);
        let out = self
            .fast
            .scaled_dot_product_attention(&q, &keys, &values, scale, mask)?;
        let out = from_heads(&out, b, l)?.multiply(sigmoid(&gate)?)?;
        self.fast.last_projection(x, &out, &self.o_proj)
    }

    /// q and k normed per head and rotated to the cache's position, v, as `[B, H, L, D]`,
    /// and the output gate `[B, L, H*D]`.
    fn heads_by_ops(
        &self,
        qkv: &[Array],
        b: i32,
        l: i32,
        offset: i32,
    ) -> Result<(Array, Array, Array, Array)> {
        let d = self.head_dim;
        // Per head: the first head_dim channels are the query, the next head_dim the gate.
        let both = qkv[0].reshape(&[b, l, self.heads, 2 * d])?;
        let halves = both.split_equal(2, -1)?;
        let q = halves[0].transpose_axes(&[0, 2, 1, 3])?;
        let gate = halves[1].reshape(&[b, l, -1])?;
        let k = to_heads(&qkv[1], b, l, self.kv_heads, d)?;
        let v = to_heads(&qkv[2], b, l, self.kv_heads, d)?;
        // Per head, over head_dim: the same in either order of the axes.
        let q = self.fast.rms_norm(&q, &self.q_norm)?;
        let k = self.fast.rms_norm(&k, &self.k_norm)?;
        // Positions continue where the cache ends: that is what makes one-token steps work.
        let q = self.fast.rope(&q, &self.rope, offset)?;
        let k = self.fast.rope(&k, &self.rope, offset)?;
        Ok((q, k, v, gate))
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

/// What mixes information across positions in a block.
enum Mixer {
    Attention(Attention),
    GatedDelta(GatedDeltaNet),
}

/// A Qwen3.5 decoder layer: its mixer, then the feed-forward.
pub struct Block {
    input_layernorm: RmsNorm,
    mixer: Mixer,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
    fast: Rc<Fast>,
}

impl Block {
    fn load(w: &mut Weights, p: &str, i: usize, shape: &Shape, fast: &Rc<Fast>) -> Result<Self> {
        let eps = shape.rms_norm_eps;
        let mixer = if shape.is_linear_layer(i) {
            Mixer::GatedDelta(GatedDeltaNet::load(
                w,
                &format!("{p}.linear_attn"),
                shape,
                fast,
            )?)
        } else {
            Mixer::Attention(Attention::load(w, &format!("{p}.self_attn"), shape, fast)?)
        };
        Ok(Block {
            input_layernorm: RmsNorm::load(w, &format!("{p}.input_layernorm"), eps)?,
            mixer,
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
        // h = h + mixer(norm(h)), then h + mlp(norm(h)), as mlx-lm's block reads.
        let h = match (&self.mixer, cache) {
            (Mixer::Attention(attn), LayerCache::Kv(kv)) => {
                let r = attn.forward(&self.fast.pre_norm(h, &self.input_layernorm)?, kv)?;
                r.added_to(h)?
            }
            (Mixer::GatedDelta(delta), LayerCache::Recurrent(state)) => {
                let normed = self.fast.rms_norm(h, &self.input_layernorm)?;
                h.add(delta.forward(&normed, state)?)?
            }
            _ => bail!("a layer got the wrong kind of cache; make the caches with lm::make_prompt_cache(&model)"),
        };
        let r = self
            .mlp
            .forward(&self.fast.pre_norm(&h, &self.post_attention_layernorm)?)?;
        r.added_to(&h)
    }

    fn empty_cache(&self) -> LayerCache {
        match self.mixer {
            Mixer::Attention(_) => LayerCache::Kv(KvCache::new()),
            Mixer::GatedDelta(_) => LayerCache::Recurrent(RecurrentCache::new()),
        }
    }

    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        match &mut self.mixer {
            Mixer::Attention(attn) => attn.requantize(layout, dtype)?,
            Mixer::GatedDelta(delta) => delta.requantize(layout, dtype)?,
        }
        self.mlp.requantize(layout, dtype)
    }

    fn nbytes(&self) -> usize {
        let mixer = match &self.mixer {
            Mixer::Attention(attn) => attn.nbytes(),
            Mixer::GatedDelta(delta) => delta.nbytes(),
        };
        mixer
            + self.mlp.nbytes()
            + self.input_layernorm.weight.nbytes()
            + self.post_attention_layernorm.weight.nbytes()
    }
}

/// The text model's keys (`text_config`, or the whole config when it is not nested).
/// Defaults are mlx-lm's, for the keys configs may leave out.
#[derive(Debug, Deserialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: usize,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub num_key_value_heads: i32,
    pub head_dim: Option<i32>,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub linear_num_value_heads: i32,
    pub linear_num_key_heads: i32,
    pub linear_key_head_dim: i32,
    pub linear_value_head_dim: i32,
    #[serde(default = "default_conv_kernel")]
    pub linear_conv_kernel_dim: i32,
    #[serde(default = "default_interval")]
    pub full_attention_interval: usize,
    /// Hugging Face's spelled-out version of the interval rule; checked against it.
    pub layer_types: Option<Vec<String>>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub num_experts: usize,
    /// Absent: mlx-lm's defaults (theta 1e5, a quarter rotated). `null` or `{}`: the flat keys below.
    #[serde(default = "default_rope_parameters")]
    pub rope_parameters: Option<serde_json::Map<String, Value>>,
    pub rope_theta: Option<f32>,
    pub partial_rotary_factor: Option<f32>,
    /// Read from the top level of the config (see [`Config::read`]).
    #[serde(skip)]
    pub quantization: Option<Quantization>,
}

fn default_eps() -> f32 {
    1e-6
}
fn default_conv_kernel() -> i32 {
    4
}
fn default_interval() -> usize {
    4
}
fn default_rope_parameters() -> Option<serde_json::Map<String, Value>> {
    serde_json::json!({"type": "default", "rope_theta": 100_000.0, "partial_rotary_factor": 0.25})
        .as_object()
        .cloned()
}

impl Config {
    /// Reads the text config the way mlx-lm does: `text_config` when there is one;
    /// `quantization` stays at the top level.
    pub fn read(config: &Value) -> Result<Self> {
        let text = config.get("text_config").unwrap_or(config);
        let mut parsed: Config = serde_json::from_value(text.clone())?;
        parsed.quantization = crate::lm::weights::Quantization::of_config(config)?;
        Ok(parsed)
    }

    pub fn shape(&self) -> Result<Shape> {
        ensure!(
            self.num_experts == 0,
            "this is a mixture-of-experts Qwen3.5 ({} experts); quest runs the dense ones only",
            self.num_experts
        );
        let positive = [
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("linear_num_key_heads", self.linear_num_key_heads),
            ("linear_num_value_heads", self.linear_num_value_heads),
            ("linear_key_head_dim", self.linear_key_head_dim),
            ("linear_value_head_dim", self.linear_value_head_dim),
            ("linear_conv_kernel_dim", self.linear_conv_kernel_dim),
        ];
        for (key, value) in positive {
            ensure!(value > 0, "`{key}` must be positive, not {value}");
        }
        ensure!(
            self.full_attention_interval > 0,
            "`full_attention_interval` must be positive"
        );
        ensure!(
            self.linear_num_value_heads % self.linear_num_key_heads == 0,
            "`linear_num_value_heads` ({}) must be a multiple of `linear_num_key_heads` ({})",
            self.linear_num_value_heads,
            self.linear_num_key_heads
        );
        self.check_layer_types()?;

        let head_dim = self
            .head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads);
        let (rope_theta, partial) = match &self.rope_parameters {
            Some(p) if !p.is_empty() => {
                check_rope_scaling(Some(&Value::Object(p.clone())))?;
                (
                    number(p, "rope_theta", 100_000.0)?,
                    number(p, "partial_rotary_factor", 0.25)?,
                )
            }
            _ => (
                self.rope_theta.unwrap_or(100_000.0),
                self.partial_rotary_factor.unwrap_or(0.25),
            ),
        };
        // Python's int(): truncates.
        let rope_dims = (head_dim as f32 * partial) as i32;
        ensure!(
            rope_dims > 0 && rope_dims <= head_dim && rope_dims % 2 == 0,
            "partial_rotary_factor {partial} of head_dim {head_dim} gives {rope_dims} rotary dimensions; \
             they must be even and between 2 and head_dim"
        );
        Ok(Shape {
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            vocab_size: self.vocab_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads,
            head_dim,
            rms_norm_eps: self.rms_norm_eps,
            rope_theta,
            rope_traditional: false,
            tie_word_embeddings: self.tie_word_embeddings,
            qk_norm: true,
            rope_dims,
            attention_output_gate: true,
            linear_attention: Some(LinearAttention {
                full_attention_interval: self.full_attention_interval,
                key_heads: self.linear_num_key_heads,
                value_heads: self.linear_num_value_heads,
                key_head_dim: self.linear_key_head_dim,
                value_head_dim: self.linear_value_head_dim,
                conv_kernel: self.linear_conv_kernel_dim,
            }),
            quantization: self.quantization,
        })
    }

    /// mlx-lm follows `full_attention_interval` and ignores `layer_types`; refuse a config
    /// where the two disagree rather than run the wrong layer kinds.
    fn check_layer_types(&self) -> Result<()> {
        let Some(types) = &self.layer_types else {
            return Ok(());
        };
        let expected = (0..self.num_hidden_layers).map(|i| {
            if (i + 1) % self.full_attention_interval == 0 {
                "full_attention"
            } else {
                "linear_attention"
            }
        });
        if types.len() != self.num_hidden_layers || !types.iter().map(String::as_str).eq(expected) {
            bail!(
                "`layer_types` does not follow `full_attention_interval` = {} over {} layers; \
                 quest (like mlx-lm) supports only that pattern",
                self.full_attention_interval,
                self.num_hidden_layers
            );
        }
        Ok(())
    }
}

/// `key` of the rope parameters as a number, or `default` when it is not there.
fn number(params: &serde_json::Map<String, Value>, key: &str, default: f32) -> Result<f32> {
    match params.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .map(|x| x as f32)
            .with_context(|| format!("rope_parameters.{key} is not a number: {v}")),
    }
}

/// mlx-lm's `sanitize`: names to the decoder's (`model.layers.N…`, `lm_head`), the vision
/// tower and the multi-token-prediction head dropped. A Hugging Face checkpoint (conv1d
/// weights as `[channels, 1, kernel]`) also gets MLX's conv layout and its RMSNorm weights
/// shifted by one: HF stores them as offsets from 1 (`x · (1 + w)`).
pub fn sanitize(weights: &mut Weights) -> Result<()> {
    let names: Vec<String> = weights.names().cloned().collect();
    for name in names {
        if name.starts_with("vision_tower")
            || name.starts_with("model.visual")
            || name.contains("mtp.")
        {
            weights.remove(&name);
            continue;
        }
        let renamed = if let Some(rest) = name.strip_prefix("model.language_model.") {
            format!("model.{rest}")
        } else if let Some(rest) = name.strip_prefix("language_model.") {
            rest.to_owned()
        } else {
            continue;
        };
        weights.rename(&name, renamed);
    }

    let conv_names: Vec<String> = weights
        .names()
        .filter(|n| n.ends_with("conv1d.weight"))
        .cloned()
        .collect();
    let mut from_hf = false;
    for name in conv_names {
        let Some(conv) = weights.remove(&name) else {
            continue;
        };
        let conv = if conv.ndim() == 3 && conv.shape()[2] != 1 {
            from_hf = true;
            conv.swap_axes(1, 2)?
        } else {
            conv
        };
        weights.insert(name, conv);
    }
    if from_hf {
        const SHIFTED: [&str; 5] = [
            ".input_layernorm.weight",
            ".post_attention_layernorm.weight",
            "model.norm.weight",
            ".q_norm.weight",
            ".k_norm.weight",
        ];
        let norms: Vec<String> = weights
            .names()
            .filter(|n| SHIFTED.iter().any(|suffix| n.ends_with(suffix)))
            .cloned()
            .collect();
        for name in norms {
            let Some(w) = weights.remove(&name) else {
                continue;
            };
            // Added in the stored dtype, as mlx-lm does (a bf16 checkpoint rounds the same way).
            let w = if w.ndim() == 1 {
                w.add(Array::from_f32(1.0).as_dtype(w.dtype())?)?
            } else {
                w
            };
            weights.insert(name, w);
        }
    }
    Ok(())
}
