//! One file per architecture, each saying how a token flows through its blocks (as
//! mlx-lm's `models/*.py`): `llama.rs`, `qwen3.rs`, `qwen3_5.rs`, each with the config it
//! reads, its attention, its MLP and its block (Qwen3.5's gated delta net in
//! `gated_delta.rs`, its recurrence's ops in `gated_delta_ops.rs`). Every norm, RoPE,
//! attention and projection in them is computed by [`crate::lm::fast::Fast`] (mlx-lm's
//! `mx.fast`); the blocks sit in the shared embedding → blocks → norm → head of
//! `decoder.rs`. A new architecture is one file and one entry in [`ARCHITECTURES`].

pub mod activations;
pub mod decoder;
pub mod gated_delta;
pub mod gated_delta_ops;
pub mod llama;
pub mod qwen3;
pub mod qwen3_5;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use mlx_rs::Array;

use crate::kernels::{Kernels, Process};
use crate::lm::cache::LayerCache;
use crate::lm::fast::{Fast, Rope};
use crate::lm::weights::{Quantization, Weights};
use crate::lm::Layout;
use decoder::Decoder;

/// An architecture quest runs: the `model_type`s of `config.json` it answers to, the
/// shape it reads from a config, and how it is built from a config and its weights.
pub struct Architecture {
    pub model_types: &'static [&'static str],
    pub shape: fn(&serde_json::Value) -> Result<Shape>,
    pub build: fn(&serde_json::Value, Weights, &Rc<Fast>) -> Result<Decoder>,
}

/// Every architecture quest runs.
pub const ARCHITECTURES: &[Architecture] = &[
    Architecture {
        model_types: &["llama", "mistral"],
        shape: llama::shape,
        build: llama::build,
    },
    Architecture {
        model_types: &["qwen3"],
        shape: qwen3::shape,
        build: qwen3::build,
    },
    Architecture {
        model_types: &["qwen3_5"],
        shape: qwen3_5::shape,
        build: qwen3_5::build,
    },
];

/// The architecture `config["model_type"]` names, and that name.
fn architecture(config: &serde_json::Value) -> Result<(&'static Architecture, String)> {
    let model_type = config
        .get("model_type")
        .and_then(|t| t.as_str())
        .context("config has no `model_type`")?
        .to_owned();
    let Some(architecture) = ARCHITECTURES
        .iter()
        .find(|a| a.model_types.contains(&model_type.as_str()))
    else {
        let known: Vec<&str> = ARCHITECTURES.iter().map(|a| a.model_types[0]).collect();
        bail!(
            "unknown architecture `{model_type}` (model_type); quest supports {}",
            known.join(", ")
        );
    };
    Ok((architecture, model_type))
}

/// A model's shape and constants, read once from its `config.json` by its architecture
/// (each architecture's `Config` is mlx-lm's `ModelArgs`; this is what the model is built
/// from, whichever architecture read it).
#[derive(Clone, Debug)]
pub struct Shape {
    pub hidden_size: i32,
    pub intermediate_size: i32,
    pub vocab_size: i32,
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

/// Which layers of a hybrid model are gated delta layers, and their heads (the `linear_*`
/// keys of the config).
#[derive(Clone, Debug)]
pub struct LinearAttention {
    /// Layer `i` has full attention when `(i + 1) % full_attention_interval == 0`.
    pub full_attention_interval: usize,
    pub key_heads: i32,
    pub value_heads: i32,
    pub key_head_dim: i32,
    pub value_head_dim: i32,
    pub conv_kernel: i32,
}

impl LinearAttention {
    pub fn key_dim(&self) -> i32 {
        self.key_heads * self.key_head_dim
    }
    pub fn value_dim(&self) -> i32 {
        self.value_heads * self.value_head_dim
    }
    /// The conv runs over queries, keys and values together.
    pub fn conv_channels(&self) -> i32 {
        2 * self.key_dim() + self.value_dim()
    }
}

/// The `model_type` `config` names and the [`Shape`] its architecture reads from it,
/// without building a model: the one reading of a `config.json`, dispatched as
/// [`Model::from_config`] dispatches (what [`Model::from_config`] builds from, what
/// `random` lists tensors from and what physics' `Shape` shows a learner).
pub fn shape_of(config: &serde_json::Value) -> Result<(String, Shape)> {
    let (architecture, model_type) = architecture(config)?;
    Ok((model_type, (architecture.shape)(config)?))
}

impl Shape {
    /// The shape `config` describes, read by the architecture its `model_type` names
    /// ([`shape_of`] without the name).
    pub fn of_config(config: &serde_json::Value) -> Result<Shape> {
        shape_of(config).map(|(_, shape)| shape)
    }

    /// Whether layer `i` is a gated delta (linear-attention) layer.
    pub fn is_linear_layer(&self, i: usize) -> bool {
        self.linear_attention
            .as_ref()
            .is_some_and(|linear| (i + 1) % linear.full_attention_interval != 0)
    }

    /// RoPE as the attention layers turn their heads.
    pub fn rope(&self) -> Rope {
        Rope {
            dims: self.rope_dims,
            traditional: self.rope_traditional,
            base: self.rope_theta,
        }
    }
}

/// What a config that cannot be read says.
fn config_error(model_type: &str) -> String {
    format!("config for `{model_type}` is missing a needed key or has a wrong value")
}

/// `config` as an architecture's `Config`.
pub(crate) fn read_config<T: serde::de::DeserializeOwned>(
    config: &serde_json::Value,
    model_type: &str,
) -> Result<T> {
    serde_json::from_value(config.clone()).with_context(|| config_error(model_type))
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
pub fn drop_rotary_frequencies(weights: &mut Weights) {
    let rotary: Vec<String> = weights
        .names()
        .filter(|n| n.contains("rotary_emb.inv_freq"))
        .cloned()
        .collect();
    for name in rotary {
        weights.remove(&name);
    }
}

/// A loaded language model.
pub struct Model {
    pub model_type: String,
    /// The layout of its matrices: as loaded ([`crate::lm::Hold`]), or after
    /// [`Model::requantize`], that layout.
    pub layout: Layout,
    decoder: Decoder,
    /// Whose code computes each part: the learner's pieces, quest's CUDA kernels (none off
    /// CUDA) or MLX's ops; shared with every block.
    fast: Rc<Fast>,
    /// What every forward call fed, in order (see [`Model::fed`]).
    fed: RefCell<Vec<Fed>>,
    /// After [`Model::record_layers`]: each forward call's hidden state after every layer.
    layers: RefCell<Option<Layers>>,
    /// Whether it ran its warm-up ([`Model::warm_up`]): a model given pieces then runs it
    /// again through them, their first calls too being paid before the prompt.
    warmed: std::cell::Cell<bool>,
    /// After [`Model::with_cache`]: makes the learner's cache for each attention layer.
    cache_maker: RefCell<Option<crate::lm::cache::MakeStore>>,
}

/// Hidden states read back from forward calls: call × layer × width.
pub type Layers = Vec<Vec<Vec<f32>>>;

/// The positions of the warm-up's prompt-shaped forward ([`Model::warm_up`]).
const WARM_UP_POSITIONS: usize = 16;

/// One forward call, as the model saw it: when, and the `[rows, positions]` it was fed.
/// A report splits the calls at the first token (the prefill before, the decode steps
/// after), so a lesson can judge what the loop did — how many positions a decode step
/// fed, whether the first token came from the last prompt position alone — whatever the
/// code calls its functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fed {
    pub at: Instant,
    pub rows: usize,
    pub positions: usize,
    /// How long the call took: building its graph on the host (nothing is evaluated in
    /// `forward`; the work runs when the caller reads or evaluates the result).
    pub built: std::time::Duration,
}

impl Model {
    /// Builds the model named by `config["model_type"]` from its weights, with the kernels
    /// the settings choose for a fresh process ([`Model::set_kernels`] changes them).
    pub fn from_config(config: &serde_json::Value, weights: Weights) -> Result<Self> {
        let (architecture, model_type) = architecture(config)?;
        let layout = weights.layout();
        let fast = Fast::new(Kernels::for_process(Process::Fresh)?);
        Ok(Self {
            model_type,
            layout,
            decoder: (architecture.build)(config, weights, &fast)?,
            fast,
            fed: RefCell::new(Vec::new()),
            warmed: std::cell::Cell::new(false),
            layers: RefCell::new(None),
            cache_maker: RefCell::new(None),
        })
    }

    /// Which of quest's kernels this model's graphs use.
    pub fn kernels(&self) -> Kernels {
        self.fast.kernels()
    }

    /// Which of quest's kernels computed a call so far, and which are off for the
    /// learner's piece.
    pub fn kernel_use(&self) -> crate::lm::fast::KernelUse {
        self.fast.kernel_use()
    }

    /// Runs the graphs built from now on with `kernels` (a benchmark that warms up, or
    /// one kernel against MLX's ops in one run).
    pub fn set_kernels(&self, kernels: Kernels) {
        self.fast.set_kernels(kernels);
    }

    /// `tokens`: `[B, L]` int32 ids, `B` sequences of `L` tokens each. Returns
    /// `[B, L, vocab]` logits, lazily. `cache`: one per layer, from [`Model::make_cache`]
    /// (`lm::make_prompt_cache`); it keeps `B` sequences (keys and values, or recurrent
    /// states, per row), so every later step feeds `[B, 1]`. Rows never mix: row `i` of
    /// the logits is what a batch of one would give for row `i`'s tokens.
    pub fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        // quest's clock bounds the decode by when each call was asked for (`crate::line`).
        crate::line::asked();
        self.forward_unmarked(tokens, cache)
    }

    /// [`Model::forward`] without the mark on quest's line: the warm-up, before the prompt.
    fn forward_unmarked(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let at = Instant::now();
        let logits = if self.layers.borrow().is_some() {
            let mut outputs = Vec::new();
            let logits = self.decoder.forward(tokens, cache, Some(&mut outputs))?;
            // Row 0's last position: the one whose logits a step is judged by.
            let rows = outputs
                .iter()
                .map(|h| {
                    let last = crate::lm::last_position(h).as_dtype(mlx_rs::Dtype::Float32)?;
                    Ok(last.reshape(&[-1])?.as_slice::<f32>()[..h.shape()[2] as usize].to_vec())
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(recorded) = self.layers.borrow_mut().as_mut() {
                recorded.push(rows);
            }
            logits
        } else {
            self.decoder.forward(tokens, cache, None)?
        };
        let shape = tokens.shape();
        self.fed.borrow_mut().push(Fed {
            at,
            rows: shape[0] as usize,
            positions: shape[1] as usize,
            built: at.elapsed(),
        });
        Ok(logits)
    }

    /// From now on every forward call also reads back the hidden state after each layer
    /// (of its first row's last position: a sync per call, for diagnosis, never timed).
    pub fn record_layers(&self) {
        self.layers.replace(Some(Vec::new()));
    }

    /// What [`Model::record_layers`] recorded: for each forward call, for each layer, the
    /// hidden state the next layer reads.
    pub fn recorded_layers(&self) -> Layers {
        self.layers.borrow().clone().unwrap_or_default()
    }

    /// A prompt's forward and a decode step's on a cache of their own, evaluated and
    /// forgotten: what a process's first forward of each shape pays once (MLX readying its
    /// kernels on this device — a prompt's matrix products and attention are other kernels
    /// than one token's — and quest's compiled functions), paid before the prompt. Not
    /// recorded as forward calls.
    pub fn warm_up(&self) -> Result<()> {
        // 16 positions: a prompt's shape (on an H100, a one-token warm-up left a fresh
        // process's first 12-token prefill at 31.5 s on a first run, 253 ms after it,
        // against mlx-lm's warmed 67 ms: docs/gpu/2026-12-06-ttft-split/).
        let mut cache = self.make_cache();
        let prompt = Array::from_slice(&[0i32; WARM_UP_POSITIONS], &[1, WARM_UP_POSITIONS as i32]);
        let logits = self.forward_unmarked(&prompt, &mut cache)?;
        mlx_rs::transforms::eval([&logits])?;
        let logits = self.forward_unmarked(&Array::from_slice(&[0i32], &[1, 1]), &mut cache)?;
        mlx_rs::transforms::eval([&logits])?;
        self.fed.borrow_mut().clear();
        self.warmed.set(true);
        Ok(())
    }

    /// The warm-up again where it ran at load: a model's path changed (its pieces, the
    /// kernels kept for the other parts), and the new path's first calls are paid once too.
    fn warm_up_again(&self) {
        if self.warmed.get() {
            // An error here is the forward's own, met again at the prompt and said there.
            let _ = crate::lm::pieces::uncounted(|| self.warm_up());
        }
    }

    /// Every forward call so far, in order: when, and how many rows and positions.
    pub fn fed(&self) -> Vec<Fed> {
        self.fed.borrow().clone()
    }

    /// One empty cache per layer: a KV cache for attention, a fixed-size state for gated delta.
    pub fn make_cache(&self) -> Vec<LayerCache> {
        let cache = self.decoder.make_cache();
        match self.cache_maker.borrow().as_ref() {
            Some(make) => crate::lm::cache::hand_over(cache, make),
            None => cache,
        }
    }

    /// This model with the learner's KV cache in every attention layer: `make` makes one
    /// layer's, and each call of the model into it is counted on its way in, by quest's
    /// code. When quest asks for its own pieces on its line (`QUEST_PIECES=quest` by
    /// hand) the model keeps quest's cache: the baseline a lesson measures against.
    pub fn with_cache<S: crate::lm::KvStore + 'static>(
        self,
        make: impl Fn() -> S + 'static,
    ) -> Self {
        if crate::line::quest_pieces() {
            self.warm_up_again();
            return self;
        }
        let make: crate::lm::cache::MakeStore =
            std::rc::Rc::new(move || -> Box<dyn crate::lm::KvStore> { Box::new(make()) });
        // quest's line may ask for the cache's check first: a sequence of calls against
        // quest's own cache, in this process, before any decode.
        crate::lm::cache_check::when_asked(&make);
        *self.cache_maker.borrow_mut() = Some(make);
        self.warm_up_again();
        self
    }

    pub fn num_layers(&self) -> usize {
        self.decoder.num_layers()
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
        anyhow::ensure!(
            layout != Layout::AsStored,
            "a model is put back as its file stored it by loading it again"
        );
        let dtype = crate::device::Backend::detect().float_dtype();
        self.decoder
            .requantize(layout, dtype)
            .with_context(|| format!("requantizing the model to {layout}"))?;
        self.layout = layout;
        Ok(())
    }

    /// This model with `pieces` in it: the piece the lesson has the learner write (quest
    /// says which on its line) calls the learner's code at every layer — e.g. every RMS
    /// norm: input, post-attention, Qwen3's q/k norms, the final norm — and every other
    /// part runs quest's code, its CUDA kernels included wherever one does not take that
    /// piece's place (see [`crate::lm::fast`]). Run by hand, with no lesson to say, every
    /// piece goes through `pieces` and none of quest's kernels runs.
    /// When quest asks for its own pieces on its line ([`crate::line::quest_pieces`];
    /// `QUEST_PIECES=quest` run by hand) it keeps them: the baseline quest measures a
    /// learner's piece against, in the learner's own binary.
    pub fn with_pieces(self, pieces: impl crate::lm::Pieces + 'static) -> Self {
        // Either way the same kernels run: the baseline is the same process but for the
        // learner's piece, what a lesson measures against.
        self.fast.set_written(
            crate::line::lesson_piece().map_or(crate::lm::fast::Written::Every, |piece| {
                crate::lm::fast::Written::One(piece)
            }),
        );
        if crate::line::quest_pieces() {
            self.warm_up_again();
            return self;
        }
        // quest's line may ask for the piece check first (`quest run`, `quest submit`):
        // the learner's piece against MLX's own op, in this process, before any decode.
        crate::lm::piece_check::when_asked(&pieces);
        // Every call into the learner's pieces is counted on its way in, by quest's code.
        self.fast
            .set_pieces(crate::lm::pieces::Counted(Box::new(pieces)));
        self.warm_up_again();
        self
    }

    /// Bytes of weights each decode step reads.
    pub fn weight_bytes(&self) -> usize {
        self.decoder.weight_bytes()
    }
}

#[cfg(test)]
mod tests {
    use mlx_rs::ops::{abs, subtract};
    use serde_json::json;

    use crate::kernels::Kernels;
    use crate::lm::{random, tokens_array};

    /// A two-layer Qwen3 (per-head q/k norms) for the same test as the tiny llama.
    fn tiny_qwen3() -> serde_json::Value {
        json!({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
            "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": true})
    }

    /// The model records what each forward call was fed, whatever made the input.
    #[test]
    fn every_forward_call_is_recorded_with_its_rows_and_positions() {
        let model = random::model(&random::tiny_llama(), 7).unwrap();
        let mut cache = model.make_cache();
        model
            .forward(&tokens_array(&[1, 2, 3, 4]), &mut cache)
            .unwrap();
        model.forward(&tokens_array(&[5]), &mut cache).unwrap();
        let shaped = tokens_array(&[6]).reshape(&[1, 1]).unwrap();
        model.forward(&shaped, &mut cache).unwrap();
        let fed: Vec<(usize, usize)> = model.fed().iter().map(|f| (f.rows, f.positions)).collect();
        assert_eq!(fed, [(1, 4), (1, 1), (1, 1)]);
        // A call the model refuses (a batch of two against a cache of one) is not counted.
        let two = tokens_array(&[1, 2]).reshape(&[2, 1]).unwrap();
        assert!(model.forward(&two, &mut cache).is_err());
        assert_eq!(model.fed().len(), 3);
    }

    /// Off CUDA quest's matvec never runs, so the folded step is MLX's ops in the folded
    /// order (norm, product, residual add per projection): the plain step's logits.
    #[test]
    fn a_folded_decode_step_gives_the_plain_steps_logits() {
        for config in [random::tiny_llama(), tiny_qwen3()] {
            let model = random::model(&config, 7).unwrap();
            let (plain, folded) = (Kernels::NONE, Kernels::NONE.folding());
            let (mut plain_cache, mut folded_cache) = (model.make_cache(), model.make_cache());
            // Each graph is built with its kernels, then the model is switched.
            let forward = |kernels, input: &[u32], cache: &mut Vec<_>| {
                model.set_kernels(kernels);
                model.forward(&tokens_array(input), cache).unwrap()
            };
            forward(plain, &[1, 2, 3, 4, 5], &mut plain_cache);
            forward(folded, &[1, 2, 3, 4, 5], &mut folded_cache);
            for token in [7u32, 9, 11] {
                let a = forward(plain, &[token], &mut plain_cache);
                let b = forward(folded, &[token], &mut folded_cache);
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
