//! A decoder the learner writes: the loaded weights by their mlx-lm names
//! ([`load_weights`]) and the trait the lesson's loop runs any decoder through and its
//! report asks ([`Forward`]), quest's [`Model`] among them.
//!
//! ```text
//! let (mut weights, tokenizer) = lm::load_weights(&run.model)?;
//! let q = weights.matrix("model.layers.0.self_attn.q_proj")?;  // dense or quantized
//! let norm = weights.vector("model.norm.weight")?;
//! ```

use anyhow::{ensure, Result};
use mlx_rs::Array;

use super::cache::LayerCache;
use super::fast::KernelUse;
use super::models::{llama, Fed, Model};
use super::weights::{Linear, Quantization, Weights};
use super::{Hold, Layout, ModelSource, Tokenizer};
use crate::kernels::Kernels;

/// A decoder, as the lesson's loop runs it (logits for `[B, L]` ids given its caches, one
/// empty cache per layer) and as its report describes it (its weights, quest's kernels in
/// it, its forward calls, its layers). quest's [`Model`] answers everything; a decoder of
/// the learner's writes the first two, and the rest says what quest cannot know of it.
/// The report asks the decoder, not a record kept on the side, so a model requantized
/// after load reports its new layout.
pub trait Forward {
    /// `[B, L]` int32 ids in, `[B, L, vocab]` logits out, lazily; every layer's cache updated.
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array>;
    /// One empty cache per layer.
    fn make_cache(&self) -> Vec<LayerCache>;
    /// The weight layout's name and the bytes of weights one step reads (none known).
    fn weights(&self) -> (String, u64) {
        (String::new(), 0)
    }
    /// Which of quest's kernels its graphs use: none in a decoder of the learner's.
    fn kernels(&self) -> Kernels {
        Kernels::FOR_PIECES
    }
    /// Which of quest's kernels computed a call, and which were off for the learner's
    /// piece: none in a decoder of the learner's.
    fn kernel_use(&self) -> KernelUse {
        KernelUse::default()
    }
    /// Every forward call it ran, in order (none recorded).
    fn fed(&self) -> Vec<Fed> {
        Vec::new()
    }
    /// How many layers a forward call runs (0: not known).
    fn layers(&self) -> usize {
        0
    }
}

impl Forward for Model {
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        Model::forward(self, tokens, cache)
    }
    fn make_cache(&self) -> Vec<LayerCache> {
        Model::make_cache(self)
    }
    fn weights(&self) -> (String, u64) {
        (self.layout.name(), self.weight_bytes() as u64)
    }
    fn kernels(&self) -> Kernels {
        Model::kernels(self)
    }
    fn kernel_use(&self) -> KernelUse {
        Model::kernel_use(self)
    }
    fn fed(&self) -> Vec<Fed> {
        Model::fed(self)
    }
    fn layers(&self) -> usize {
        self.num_layers()
    }
}

/// A llama-family config, as the decoder needs it (mlx-lm's `ModelArgs`).
#[derive(Clone, Debug)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: usize,
    pub num_attention_heads: i32,
    pub num_key_value_heads: i32,
    pub head_dim: i32,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_traditional: bool,
    /// The output head is the embedding table (SmolLM2): no `lm_head.weight`.
    pub tie_word_embeddings: bool,
}

/// A model file's tensors by mlx-lm's names, each matrix dense or quantized as quest's
/// loader holds it on this machine (dense f32 on the CPU, quantized as stored on a GPU).
pub struct Checkpoint {
    pub config: Config,
    weights: Weights,
    quantization: Option<Quantization>,
    layout: Layout,
    bytes: usize,
}

/// What a decoder built from a [`Checkpoint`] holds: the layout and the bytes a step reads.
#[derive(Clone, Debug)]
pub struct WeightsRead {
    pub layout: Layout,
    pub bytes: usize,
}

/// The weights and config of a llama-architecture model (a known name, a GGUF file or an
/// MLX directory) and its tokenizer, for a decoder of the learner's own.
pub fn load_weights(model: &str) -> Result<(Checkpoint, Tokenizer)> {
    let layout = Hold::from_env()?;
    let (config, mut weights, tokenizer) = match super::hub::resolve(model)? {
        ModelSource::Directory(dir) => {
            let (config, weights) = super::dir_weights(&dir)?;
            (config, weights, Tokenizer::from_dir(&dir)?)
        }
        ModelSource::Gguf(file) => super::gguf_weights(&file)?,
    };
    super::prepare(&mut weights, layout, &config)?;
    let model_type = config["model_type"].as_str().unwrap_or_default();
    ensure!(
        ["llama", "mistral"].contains(&model_type),
        "load_weights reads llama-architecture models; this one is `{model_type}`"
    );
    llama::sanitize(&mut weights);
    let read: llama::Config = super::models::read_config(&config, model_type)?;
    let shape = read.shape()?;
    let layout = weights.layout();
    let config = Config {
        hidden_size: read.hidden_size,
        num_hidden_layers: shape.layers,
        num_attention_heads: shape.heads,
        num_key_value_heads: shape.kv_heads,
        head_dim: shape.head_dim,
        rms_norm_eps: shape.rms_norm_eps,
        rope_theta: shape.rope_theta,
        rope_traditional: shape.rope_traditional,
        tie_word_embeddings: shape.tie_word_embeddings,
    };
    if config.tie_word_embeddings {
        weights.remove("lm_head.weight");
    }
    let checkpoint = Checkpoint {
        config,
        weights,
        quantization: shape.quantization,
        layout,
        bytes: 0,
    };
    Ok((checkpoint, tokenizer))
}

impl Checkpoint {
    /// The matrix `prefix.weight` (`model.layers.0.mlp.up_proj`), with its scales and biases
    /// when quantized: `Linear::Dense { weight_t, .. }` holds Wᵀ, `[in, out]`;
    /// `Linear::Quantized` is MLX's affine layout for `quantized_matmul(x, w, scales, biases,
    /// true, group_size, bits)`.
    pub fn matrix(&mut self, prefix: &str) -> Result<Linear> {
        let linear = self.weights.linear(prefix, self.quantization)?;
        self.bytes += linear.nbytes();
        Ok(linear)
    }

    /// A float tensor that is not a matrix: a norm's weight (`model.norm.weight`).
    pub fn vector(&mut self, name: &str) -> Result<Array> {
        let tensor = self.weights.take(name)?;
        self.bytes += tensor.nbytes();
        Ok(tensor)
    }

    /// Reads every tensor taken in, and refuses a file with tensors the decoder left
    /// unused: what the decoder holds, for its report.
    pub fn finish(self) -> Result<WeightsRead> {
        self.weights.finish()?;
        Ok(WeightsRead {
            layout: self.layout,
            bytes: self.bytes,
        })
    }
}
