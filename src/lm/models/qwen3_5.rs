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

use anyhow::{bail, ensure, Context, Result};
use mlx_rs::{Array, Dtype};
use serde::Deserialize;
use serde_json::Value;

use super::decoder::{Decode, Decoder, Layer};
use super::gated_delta::{GatedDeltaNet, GatedDeltaShape};
use super::layers::{Attention, DecoderShape, LinearAttention, Mlp, RmsNorm};
use super::llama::check_rope_scaling;
use crate::kernels::Kernels;
use crate::lm::cache::{KvCache, LayerCache, RecurrentCache};
use crate::lm::weights::{Quantization, Weights};
use crate::lm::Layout;

/// Builds a Qwen3.5 decoder from a `config.json` and its weights.
pub fn build(config: &Value, mut weights: Weights) -> Result<Box<dyn Decode>> {
    sanitize(&mut weights).context("renaming the Qwen3.5 weights")?;
    let shape = Config::read(config)
        .with_context(|| super::config_error("qwen3_5"))?
        .shape()?;
    Ok(Box::new(Decoder::load(weights, &shape, |w, p, i| {
        Block::load(w, p, i, &shape)
    })?))
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
}

impl Block {
    fn load(w: &mut Weights, p: &str, i: usize, shape: &DecoderShape) -> Result<Self> {
        let (eps, q) = (shape.rms_norm_eps, shape.quantization);
        let mixer = match shape.linear_layer(i) {
            Some(delta) => Mixer::GatedDelta(GatedDeltaNet::load(
                w,
                &format!("{p}.linear_attn"),
                delta,
                q,
            )?),
            None => Mixer::Attention(Attention::load(w, &format!("{p}.self_attn"), shape)?),
        };
        Ok(Block {
            input_layernorm: RmsNorm::load(w, &format!("{p}.input_layernorm"), eps)?,
            mixer,
            post_attention_layernorm: RmsNorm::load(
                w,
                &format!("{p}.post_attention_layernorm"),
                eps,
            )?,
            mlp: Mlp::load(w, &format!("{p}.mlp"), q)?,
        })
    }
}

impl Layer for Block {
    fn forward(&self, h: &Array, cache: &mut LayerCache, k: &Kernels) -> Result<Array> {
        let norm = &self.input_layernorm;
        let h = match (&self.mixer, cache) {
            (Mixer::Attention(attn), LayerCache::Kv(kv)) => attn.residual(h, norm, kv, k)?,
            (Mixer::GatedDelta(delta), LayerCache::Recurrent(state)) => {
                h.add(delta.forward(&norm.forward(h)?, state, k)?)?
            }
            _ => bail!("a layer got the wrong kind of cache; make the caches with lm::make_prompt_cache(&model)"),
        };
        self.mlp.residual(&h, &self.post_attention_layernorm, k)
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

    fn mlp_mut(&mut self) -> &mut Mlp {
        &mut self.mlp
    }

    fn attention_mut(&mut self) -> Option<&mut Attention> {
        match &mut self.mixer {
            Mixer::Attention(attn) => Some(attn),
            _ => None,
        }
    }

    fn gated_delta_mut(&mut self) -> Option<&mut GatedDeltaNet> {
        match &mut self.mixer {
            Mixer::GatedDelta(delta) => Some(delta),
            _ => None,
        }
    }

    fn norms_mut(&mut self) -> Vec<&mut RmsNorm> {
        let mut norms = vec![
            &mut self.input_layernorm,
            &mut self.post_attention_layernorm,
        ];
        if let Mixer::Attention(attn) = &mut self.mixer {
            norms.extend(attn.norms_mut());
        }
        norms
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

    pub fn shape(&self) -> Result<DecoderShape> {
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
        Ok(DecoderShape {
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
                shape: GatedDeltaShape {
                    key_heads: self.linear_num_key_heads,
                    value_heads: self.linear_num_value_heads,
                    key_head_dim: self.linear_key_head_dim,
                    value_head_dim: self.linear_value_head_dim,
                    conv_kernel: self.linear_conv_kernel_dim,
                    rms_norm_eps: self.rms_norm_eps,
                },
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
