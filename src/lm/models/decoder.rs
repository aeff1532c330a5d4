//! What every architecture shares around its blocks: the token embedding, the blocks in
//! order (each with its own cache), the final norm and the output head — the loop of
//! mlx-lm's `LlamaModel` / `Qwen3Model` and its `Model`'s head. An architecture brings
//! its block ([`Layer`]).

use std::rc::Rc;

use anyhow::{ensure, Context, Result};
use mlx_rs::{Array, Dtype};

use super::Shape;
use crate::lm::cache::LayerCache;
use crate::lm::fast::Fast;
use crate::lm::weights::{Embedding, Linear, RmsNorm, Weights};
use crate::lm::Layout;

/// One block of an architecture: how a token's hidden state flows through it.
pub trait Layer {
    /// The residual stream `h` (`[B, L, hidden]`) after this block, the block's cache
    /// updated.
    fn forward(&self, h: &Array, cache: &mut LayerCache) -> Result<Array>;
    /// The block's cache before the first token: a KV cache or a recurrent state.
    fn empty_cache(&self) -> LayerCache;
    /// Every matrix of the block in `layout` (norms stay float).
    fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()>;
    /// Bytes of parameters a decode step reads in this block.
    fn nbytes(&self) -> usize;
}

/// Embeddings, the blocks, the final norm and the language-model head.
pub struct Decoder {
    embed_tokens: Embedding,
    layers: Vec<Box<dyn Layer>>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    fast: Rc<Fast>,
}

impl Decoder {
    /// Builds the decoder from HF/MLX-named weights (`model.layers.N.…`), each block by
    /// `block` from its prefix (`model.layers.N`) and index.
    pub fn load<L: Layer + 'static>(
        mut w: Weights,
        shape: &Shape,
        fast: &Rc<Fast>,
        block: impl Fn(&mut Weights, &str, usize) -> Result<L>,
    ) -> Result<Self> {
        let q = shape.quantization;
        let embed_tokens = w.embedding("model.embed_tokens", q)?;
        let layers = (0..shape.layers)
            .map(|i| Ok(Box::new(block(&mut w, &format!("model.layers.{i}"), i)?) as _))
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
            fast: fast.clone(),
        })
    }

    /// `tokens` is `[B, L]` int32; returns `[B, L, vocab]` logits, lazily. With `layers`,
    /// each block's output is pushed there too, in order (the residual stream after block
    /// 0, 1, …), lazily.
    pub fn forward(
        &self,
        tokens: &Array,
        cache: &mut [LayerCache],
        mut layers: Option<&mut Vec<Array>>,
    ) -> Result<Array> {
        self.check_input(tokens, cache)?;
        let mut h = self.embed_tokens.forward(tokens)?;
        for (layer, layer_cache) in self.layers.iter().zip(cache.iter_mut()) {
            h = layer.forward(&h, layer_cache)?;
            if let Some(layers) = layers.as_deref_mut() {
                layers.push(h.clone());
            }
        }
        let normed = self.fast.rms_norm(&h, &self.norm)?;
        // The output head, or the embedding table where the two are tied.
        let head = self
            .lm_head
            .as_ref()
            .unwrap_or(self.embed_tokens.as_linear());
        self.fast.linear_without_pieces(&normed, head)
    }

    fn check_input(&self, tokens: &Array, cache: &[LayerCache]) -> Result<()> {
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
        Ok(())
    }

    pub fn make_cache(&self) -> Vec<LayerCache> {
        self.layers
            .iter()
            .map(|layer| layer.empty_cache())
            .collect()
    }

    /// Every matrix in `layout` — the blocks' matrices, the embedding table and the head
    /// (mlx-lm's `quantize` converts the same layers); norms stay float.
    pub fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
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
    pub fn weight_bytes(&self) -> usize {
        let blocks: usize = self.layers.iter().map(|layer| layer.nbytes()).sum();
        // The embedding table is only gathered from (one row a token) unless it is also the head.
        let head = match &self.lm_head {
            Some(head) => head.nbytes(),
            None => self.embed_tokens.nbytes(),
        };
        blocks + self.norm.weight.nbytes() + head
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }
}

/// `[B, L, H*D]` → `[B, H, L, D]`. With one position both orders hold the same memory, so
/// a decode step needs one reshape, not a reshape and a transpose: every op in the graph
/// costs the host time each step, kernel or not.
pub fn to_heads(t: &Array, b: i32, l: i32, heads: i32, d: i32) -> Result<Array> {
    Ok(if l == 1 {
        t.reshape(&[b, heads, 1, d])?
    } else {
        t.reshape(&[b, l, heads, d])?
            .transpose_axes(&[0, 2, 1, 3])?
    })
}

/// `[B, H, L, D]` → `[B, L, H*D]`; again one reshape for one position.
pub fn from_heads(t: &Array, b: i32, l: i32) -> Result<Array> {
    Ok(if l == 1 {
        t.reshape(&[b, 1, -1])?
    } else {
        t.transpose_axes(&[0, 2, 1, 3])?.reshape(&[b, l, -1])?
    })
}
