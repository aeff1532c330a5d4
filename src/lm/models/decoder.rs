//! What every architecture shares around its blocks: the token embedding, the layers in
//! order (each with its own cache), the final norm and the output head — mlx-lm's
//! `LlamaModel` / `Qwen3Model` loop. An architecture brings its block ([`Layer`]).

use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use mlx_rs::{Array, Dtype};

use super::gated_delta::GatedDeltaNet;
use super::layers::{Attention, DecoderShape, Mlp, RmsNorm};
use crate::kernels::Kernels;
use crate::lm::cache::LayerCache;
use crate::lm::pieces::Pieces;
use crate::lm::weights::{Embedding, Linear, Weights};
use crate::lm::Layout;

/// One block of an architecture: how a token's hidden state flows through it.
pub trait Layer {
    /// The residual stream `h` (`[B, L, hidden]`) after this block, the block's cache
    /// updated.
    fn forward(&self, h: &Array, cache: &mut LayerCache, k: &Kernels) -> Result<Array>;
    /// The block's cache before the first token: a KV cache or a recurrent state.
    fn empty_cache(&self) -> LayerCache;
    /// Every matrix of the block in `layout` (norms stay float).
    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()>;
    /// Bytes of parameters a decode step reads in this block.
    fn nbytes(&self) -> usize;
    /// Every RMS norm of the block, for [`Decode::set_pieces`].
    fn norms_mut(&mut self) -> Vec<&mut RmsNorm>;
    /// The block's feed-forward, for [`Decode::set_pieces`].
    fn mlp_mut(&mut self) -> &mut Mlp;
    /// The block's attention, where it has one (Qwen3.5's gated-delta blocks do not).
    fn attention_mut(&mut self) -> Option<&mut Attention>;
    /// The block's gated delta net, where it has one (Qwen3.5's linear-attention blocks).
    fn gated_delta_mut(&mut self) -> Option<&mut GatedDeltaNet> {
        None
    }
}

/// A loaded decoder of any architecture, as the model runs it.
pub trait Decode {
    /// The logits of `tokens`; with `layers`, each block's output is pushed there too, in
    /// order (the residual stream after block 0, 1, …), lazily.
    fn forward(
        &self,
        tokens: &Array,
        cache: &mut [LayerCache],
        k: &Kernels,
        layers: Option<&mut Vec<Array>>,
    ) -> Result<Array>;
    fn make_cache(&self) -> Vec<LayerCache>;
    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()>;
    fn weight_bytes(&self) -> usize;
    fn num_layers(&self) -> usize;
    /// Every RMS norm, SwiGLU, RoPE, attention, gated delta rule and (held quantized)
    /// projection of the model calls `pieces` from now on.
    fn set_pieces(&mut self, pieces: Arc<dyn Pieces>);
}

/// Embeddings, the blocks, the final norm and the language-model head.
pub struct Decoder<L> {
    embed_tokens: Embedding,
    layers: Vec<L>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
}

impl<L: Layer> Decoder<L> {
    /// Builds the decoder from HF/MLX-named weights (`model.layers.N.…`), each block by
    /// `block` from its prefix (`model.layers.N`) and index.
    pub fn load(
        mut w: Weights,
        shape: &DecoderShape,
        block: impl Fn(&mut Weights, &str, usize) -> Result<L>,
    ) -> Result<Self> {
        let q = shape.quantization;
        let embed_tokens = w.embedding("model.embed_tokens", q)?;
        let layers = (0..shape.layers)
            .map(|i| block(&mut w, &format!("model.layers.{i}"), i))
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(&mut w, "model.norm", shape.rms_norm_eps)?;
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
        })
    }

    /// The output head on the final norm's output (the embedding table when tied).
    fn logits(&self, normed: &Array, k: &Kernels) -> Result<Array> {
        match &self.lm_head {
            Some(head) => head.forward(normed, k),
            None => self.embed_tokens.as_linear(normed, k),
        }
    }
}

impl<L: Layer> Decode for Decoder<L> {
    /// `tokens` is `[B, L]` int32; returns `[B, L, vocab]` logits, lazily.
    fn forward(
        &self,
        tokens: &Array,
        cache: &mut [LayerCache],
        k: &Kernels,
        mut layers: Option<&mut Vec<Array>>,
    ) -> Result<Array> {
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
        for (layer, layer_cache) in self.layers.iter().zip(cache.iter_mut()) {
            h = layer.forward(&h, layer_cache, k)?;
            if let Some(layers) = layers.as_deref_mut() {
                layers.push(h.clone());
            }
        }
        self.logits(&self.norm.forward(&h)?, k)
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        self.layers.iter().map(Layer::empty_cache).collect()
    }

    /// Every matrix in `layout` — the blocks' matrices, the embedding table and the head
    /// (mlx-lm's `quantize` converts the same layers); norms stay float.
    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        self.embed_tokens = self
            .embed_tokens
            .requantize(layout, dtype)
            .context("the embedding table")?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer
                .requantize(layout, dtype)
                .with_context(|| format!("layer {i}"))?;
        }
        if let Some(head) = &mut self.lm_head {
            *head = head.requantize(layout, dtype).context("the output head")?;
        }
        Ok(())
    }

    /// Bytes of parameters one decode step reads (each weight once).
    fn weight_bytes(&self) -> usize {
        let blocks: usize = self.layers.iter().map(Layer::nbytes).sum();
        // The embedding table is only gathered from (one row a token) unless it is also the head.
        let head = match &self.lm_head {
            Some(head) => head.nbytes(),
            None => self.embed_tokens.nbytes(),
        };
        blocks + self.norm.weight.nbytes() + head
    }

    fn num_layers(&self) -> usize {
        self.layers.len()
    }

    fn set_pieces(&mut self, pieces: Arc<dyn Pieces>) {
        for layer in &mut self.layers {
            layer.mlp_mut().pieces = Some(pieces.clone());
            if let Some(attention) = layer.attention_mut() {
                attention.pieces = Some(pieces.clone());
            }
            if let Some(delta) = layer.gated_delta_mut() {
                delta.pieces = Some(pieces.clone());
            }
        }
        let blocks = self.layers.iter_mut().flat_map(Layer::norms_mut);
        for norm in blocks.chain([&mut self.norm]) {
            norm.pieces = Some(pieces.clone());
        }
    }
}
