//! `qwen3` (dense Qwen3), as mlx-lm's `models/qwen3.py`: llama's block
//! ([`super::llama::Block`]: `h + attn(norm(h))`, then `h + mlp(norm(h))`), its attention
//! with an RMS norm on each query and key head before RoPE (`q_norm`, `k_norm`), and an
//! explicit `head_dim`.

use anyhow::Result;
use serde::Deserialize;

use super::decoder::{Decode, Decoder};
use super::layers::DecoderShape;
use super::llama::{check_rope_scaling, Block};
use crate::lm::weights::{Quantization, Weights};

/// Builds a Qwen3 decoder from a `config.json` and its weights.
pub fn build(config: &serde_json::Value, mut weights: Weights) -> Result<Box<dyn Decode>> {
    sanitize(&mut weights);
    let shape = super::read_config::<Config>(config, "qwen3")?.shape()?;
    Ok(Box::new(Decoder::load(weights, &shape, |w, p, _| {
        Block::load(w, p, &shape)
    })?))
}

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
    pub fn shape(&self) -> Result<DecoderShape> {
        check_rope_scaling(self.rope_scaling.as_ref())?;
        Ok(DecoderShape {
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

pub fn sanitize(weights: &mut Weights) {
    super::llama::sanitize(weights);
}
