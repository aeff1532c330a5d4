//! One file per architecture (config + sanitize), one shared decoder.

pub mod activations;
pub mod gated_delta;
pub mod llama;
pub mod qwen3;
pub mod qwen3_5;
pub mod transformer;

use anyhow::{bail, Context, Result};
use mlx_rs::Array;

use crate::lm::cache::LayerCache;
use crate::lm::weights::Weights;
use crate::lm::Layout;
use transformer::Decoder;

/// Architectures quest can run, by `config.json`'s `model_type`.
pub const SUPPORTED: &[&str] = &["llama", "qwen3", "qwen3_5"];

/// A loaded language model.
pub struct Model {
    pub model_type: String,
    /// `dense-f32`, `dense-f16` or `quantized`: how the matrices are held (see
    /// [`crate::lm::WeightLayout`]); after [`Model::requantize`], that layout (`q4-g64`).
    pub weights: String,
    decoder: Decoder,
}

impl Model {
    /// Builds the model named by `config["model_type"]` from its weights.
    pub fn from_config(config: &serde_json::Value, mut weights: Weights) -> Result<Self> {
        let model_type = config
            .get("model_type")
            .and_then(|t| t.as_str())
            .context("config has no `model_type`")?
            .to_owned();
        let parse_err =
            || format!("config for `{model_type}` is missing a needed key or has a wrong value");
        let shape = match model_type.as_str() {
            "llama" | "mistral" => {
                llama::sanitize(&mut weights);
                serde_json::from_value::<llama::Config>(config.clone())
                    .with_context(parse_err)?
                    .shape()?
            }
            "qwen3" => {
                qwen3::sanitize(&mut weights);
                serde_json::from_value::<qwen3::Config>(config.clone())
                    .with_context(parse_err)?
                    .shape()?
            }
            "qwen3_5" => {
                qwen3_5::sanitize(&mut weights).context("renaming the Qwen3.5 weights")?;
                qwen3_5::Config::read(config)
                    .with_context(parse_err)?
                    .shape()?
            }
            other => bail!(
                "unknown architecture `{other}` (model_type); quest supports {}",
                SUPPORTED.join(", ")
            ),
        };
        let layout = weights.layout_name();
        Ok(Self {
            model_type,
            weights: layout,
            decoder: Decoder::load(weights, shape)?,
        })
    }

    /// `tokens`: `[B, L]` int32 ids, `B` sequences of `L` tokens each. Returns
    /// `[B, L, vocab]` logits, lazily. `cache`: one per layer, from [`Model::make_cache`]
    /// (`lm::make_prompt_cache`); it keeps `B` sequences (keys and values, or recurrent
    /// states, per row), so every later step feeds `[B, 1]`. Rows never mix: row `i` of
    /// the logits is what a batch of one would give for row `i`'s tokens.
    pub fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.decoder.forward(tokens, cache)
    }

    /// One empty cache per layer: a KV cache for attention, a fixed-size state for gated delta.
    pub fn make_cache(&self) -> Vec<LayerCache> {
        self.decoder.make_cache()
    }

    pub fn num_layers(&self) -> usize {
        self.decoder.shape.layers
    }

    /// Puts every matrix of the loaded model in `layout` — dense in the float dtype, or
    /// MLX's affine 8- or 4-bit quantization — whatever the file stored: a quantized
    /// matrix is dequantized first, then quantized again (so the same model runs in each
    /// layout). Norms stay float. The report's weight layout and bytes per token follow.
    ///
    /// ```text
    /// let (mut model, tokenizer) = lm::load("smollm2-135m-instruct")?;
    /// model.requantize(lm::Layout::q4(64)?)?;
    /// ```
    pub fn requantize(&mut self, layout: Layout) -> Result<()> {
        let dtype = crate::device::Backend::detect().float_dtype();
        self.decoder
            .requantize(layout, dtype)
            .with_context(|| format!("requantizing the model to {layout}"))?;
        self.weights = layout.name();
        crate::lm::remember(self);
        Ok(())
    }

    /// Bytes of weights each decode step reads.
    pub fn weight_bytes(&self) -> usize {
        self.decoder.weight_bytes()
    }
}
