//! `llama` (SmolLM2, Llama 2/3 and friends), as mlx-lm's `models/llama.py`.
//!
//! A token flows: embedding → blocks → final norm → head ([`super::decoder`]); each block
//! is pre-norm attention then a pre-norm SwiGLU feed-forward, each added back to the
//! residual stream:
//!
//! ```text
//! h = h + self_attn(input_layernorm(h), cache)
//! h = h + mlp(post_attention_layernorm(h))
//! ```

use anyhow::{bail, ensure, Result};
use mlx_rs::{Array, Dtype};
use serde::Deserialize;

use super::decoder::{Decode, Decoder, Layer};
use super::layers::{Attention, DecoderShape, Mlp, RmsNorm};
use crate::kernels::Kernels;
use crate::lm::cache::{KvCache, LayerCache};
use crate::lm::weights::{Quantization, Weights};
use crate::lm::Layout;

/// Builds a llama decoder from a `config.json` and its weights.
pub fn build(config: &serde_json::Value, mut weights: Weights) -> Result<Box<dyn Decode>> {
    sanitize(&mut weights);
    let shape = super::read_config::<Config>(config, "llama")?.shape()?;
    Ok(Box::new(Decoder::load(weights, &shape, |w, p, _| {
        Block::load(w, p, &shape)
    })?))
}

/// mlx-lm's `TransformerBlock`.
pub struct Block {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl Block {
    /// The block under `p` (`model.layers.N`); Qwen3 builds the same block, its attention
    /// with q/k norms (the shape says).
    pub fn load(w: &mut Weights, p: &str, shape: &DecoderShape) -> Result<Self> {
        let eps = shape.rms_norm_eps;
        Ok(Block {
            input_layernorm: RmsNorm::load(w, &format!("{p}.input_layernorm"), eps)?,
            self_attn: Attention::load(w, &format!("{p}.self_attn"), shape)?,
            post_attention_layernorm: RmsNorm::load(
                w,
                &format!("{p}.post_attention_layernorm"),
                eps,
            )?,
            mlp: Mlp::load(w, &format!("{p}.mlp"), shape.quantization)?,
        })
    }
}

impl Layer for Block {
    fn forward(&self, h: &Array, cache: &mut LayerCache, k: &Kernels) -> Result<Array> {
        let LayerCache::Kv(cache) = cache else {
            bail!("a layer got the wrong kind of cache; make the caches with lm::make_prompt_cache(&model)");
        };
        let h = self
            .self_attn
            .residual(h, &self.input_layernorm, cache, k)?;
        self.mlp.residual(&h, &self.post_attention_layernorm, k)
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

    fn mlp_mut(&mut self) -> &mut Mlp {
        &mut self.mlp
    }

    fn attention_mut(&mut self) -> Option<&mut Attention> {
        Some(&mut self.self_attn)
    }

    fn norms_mut(&mut self) -> Vec<&mut RmsNorm> {
        let mut norms = vec![
            &mut self.input_layernorm,
            &mut self.post_attention_layernorm,
        ];
        norms.extend(self.self_attn.norms_mut());
        norms
    }
}

/// The keys of a Hugging Face `config.json` this architecture reads.
#[derive(Debug, Deserialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: usize,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub num_key_value_heads: Option<i32>,
    pub head_dim: Option<i32>,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f32,
    #[serde(default)]
    pub rope_traditional: bool,
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    pub quantization: Option<Quantization>,
}

fn default_rope_theta() -> f32 {
    10_000.0
}
fn default_true() -> bool {
    true
}

impl Config {
    pub fn shape(&self) -> Result<DecoderShape> {
        check_rope_scaling(self.rope_scaling.as_ref())?;
        ensure!(
            self.num_attention_heads > 0,
            "`num_attention_heads` must be positive"
        );
        let head_dim = self
            .head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads);
        Ok(DecoderShape {
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim,
            rms_norm_eps: self.rms_norm_eps,
            rope_theta: self.rope_theta,
            rope_traditional: self.rope_traditional,
            tie_word_embeddings: self.tie_word_embeddings,
            qk_norm: false,
            rope_dims: head_dim,
            attention_output_gate: false,
            linear_attention: None,
            quantization: self.quantization,
        })
    }
}

/// Plain RoPE only; scaled variants change the frequencies and would decode wrongly.
pub fn check_rope_scaling(scaling: Option<&serde_json::Value>) -> Result<()> {
    let kind = scaling
        .and_then(|s| s.get("rope_type").or_else(|| s.get("type")))
        .and_then(|t| t.as_str());
    match kind {
        None | Some("default") => Ok(()),
        Some(other) => {
            bail!("rope_scaling type `{other}` is not supported by quest yet (plain RoPE only)")
        }
    }
}

/// Drops tensors mlx-lm also drops: precomputed rotary frequencies are recomputed here.
pub fn sanitize(weights: &mut Weights) {
    let rotary: Vec<String> = weights
        .names()
        .filter(|n| n.contains("rotary_emb.inv_freq"))
        .cloned()
        .collect();
    for name in rotary {
        weights.remove(&name);
    }
}
