//! `quest::lm`: a small mlx-lm in Rust. The API reads like the Python one, so the
//! lesson's Rust loop and the original lesson's Python loop line up:
//!
//! ```text
//! let (model, tokenizer) = lm::load("smollm2-135m-instruct")?;  // or lm::load_lazy
//! let mut cache = lm::make_prompt_cache(&model);
//! let logits = model.forward(&prompt, &mut cache)?;
//! ```
//!
//! All MLX work must stay on one OS thread: an MLX stream belongs to the thread that made it.

pub mod batching;
pub mod blocks;
pub mod cache;
pub mod cache_check;
pub mod fast;
pub mod fetch;
pub mod gguf;
mod gguf_check;
pub mod graph;
pub mod hub;
pub mod models;
pub mod piece_check;
pub mod pieces;
pub mod prefill;
pub mod random;
pub mod sample;
pub mod serving;
pub mod speculate;
pub mod tokenizer;
pub mod weights;
pub mod yours;

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use mlx_rs::Array;

pub use cache::{trim_prompt_cache, KvCache, KvStore, LayerCache, RecurrentCache, RowsStep};
pub use fetch::DEFAULT_MODEL;
pub use hub::ModelSource;
pub use models::{Fed, Model};
pub use pieces::{Calls, Mask, MlpLayers, Pieces, QuestPieces};
pub use sample::{QuestSampler, Sampler, Sampling};
pub use tokenizer::{Message, Tokenizer};
pub use weights::Linear;
use weights::Weights;
pub use yours::{load_weights, Checkpoint, Config, Forward, WeightsRead};

use crate::device::{require_built_backend, Backend};

/// How the loader holds a quantized model's matrices: a request, which the backend turns
/// into the model's [`Layout`] ([`Hold::dense_on`]).
///
/// On the CPU, MLX's quantized matmul is its own scalar code and compute-bound, while a
/// dense float matmul runs on the BLAS: so by default ([`Hold::Auto`]) the CPU
/// dequantizes 4-bit / Q4_0 / Q4_1 / Q8_0 weights to f32 once at load (about 4 bytes a
/// parameter), and a GPU keeps them quantized as stored. `QUEST_WEIGHTS` (`quest
/// --weights`) chooses: `auto`, `dense` or `quantized`. Float models load as stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hold {
    #[default]
    Auto,
    /// Dequantize every quantized matrix to the float dtype at load.
    Dense,
    /// Keep quantized matrices quantized (mlx-lm's layout).
    Quantized,
}

impl Hold {
    pub const CHOICES: &'static str = "auto, dense or quantized";

    pub fn as_str(self) -> &'static str {
        match self {
            Hold::Auto => "auto",
            Hold::Dense => "dense",
            Hold::Quantized => "quantized",
        }
    }

    /// `QUEST_WEIGHTS`, or `auto` when unset.
    pub fn from_env() -> Result<Self> {
        crate::settings::WEIGHTS.parse()
    }

    /// Whether quantized matrices become dense on `backend`.
    pub fn dense_on(self, backend: Backend) -> bool {
        match self {
            Hold::Auto => backend == Backend::Cpu,
            Hold::Dense => true,
            Hold::Quantized => false,
        }
    }
}

impl std::str::FromStr for Hold {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Hold::Auto),
            "dense" => Ok(Hold::Dense),
            "quantized" => Ok(Hold::Quantized),
            other => Err(format!(
                "unknown weight layout `{other}`; use {}",
                Hold::CHOICES
            )),
        }
    }
}

/// The layout of a model's matrices: quantized as the file stored them, dense in the
/// float dtype ([`Backend::float_dtype`]), or MLX's affine quantization (`mx.quantize`:
/// each row cut into groups of `group_size` input columns, each group with its own scale
/// and bias in the float dtype, each weight `bits` wide). A model is loaded in
/// [`Layout::AsStored`] or [`Layout::Dense`] (as [`Hold`] asks), and
/// [`Model::requantize`] puts it in any other. Named in reports as `quantized`,
/// `dense-f32` / `dense-f16`, or `q4-g64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Quantized as the file stored them (its bits and groups, which may differ by matrix).
    AsStored,
    Dense,
    Affine {
        bits: i32,
        group_size: i32,
    },
}

impl Layout {
    /// The widths quest requantizes to (MLX packs them whole into its u32 words).
    pub const BITS: [i32; 2] = [4, 8];
    /// MLX's group sizes.
    pub const GROUP_SIZES: [i32; 3] = [32, 64, 128];
    pub const CHOICES: &'static str = "dense, q8-g32, q8-g64, q8-g128, q4-g32, q4-g64 or q4-g128";

    /// `bits` wide, a scale and a bias per `group_size` weights; refuses what MLX cannot do.
    pub fn affine(bits: i32, group_size: i32) -> Result<Self> {
        anyhow::ensure!(
            Self::BITS.contains(&bits),
            "{bits}-bit weights are not a layout quest makes; use 4 or 8 bits (or dense)"
        );
        anyhow::ensure!(
            Self::GROUP_SIZES.contains(&group_size),
            "group size {group_size} is not one of MLX's (32, 64 or 128)"
        );
        Ok(Layout::Affine { bits, group_size })
    }

    /// 8-bit, a scale and a bias per `group_size` weights.
    pub fn q8(group_size: i32) -> Result<Self> {
        Self::affine(8, group_size)
    }

    /// 4-bit, a scale and a bias per `group_size` weights.
    pub fn q4(group_size: i32) -> Result<Self> {
        Self::affine(4, group_size)
    }

    /// Whether every matrix is a float matrix (what the BLAS multiplies on a CPU).
    pub fn is_dense(self) -> bool {
        self == Layout::Dense
    }

    /// The layout's name in reports: `quantized` (as stored), `dense-f32` / `dense-f16`
    /// (the float dtype of this backend), or `q4-g64`.
    pub fn name(self) -> String {
        match self {
            Layout::AsStored => "quantized".into(),
            Layout::Dense => weights::dense_name(Backend::detect().float_dtype()),
            Layout::Affine { bits, group_size } => format!("q{bits}-g{group_size}"),
        }
    }

    /// The layout for a width of `quest fit --bits`: 4 or 8 bits in groups of
    /// `group_size`; 16 or 32 (or `dense`) is the float dtype of this backend.
    pub fn from_bits(bits: &str, group_size: i32) -> Result<Self> {
        match bits.trim() {
            "16" | "32" | "dense" => Ok(Layout::Dense),
            other => match other.parse::<i32>() {
                Ok(bits) => Self::affine(bits, group_size),
                Err(_) => anyhow::bail!(
                    "`{other}` is not a width: use 4, 8 or 16 (16: dense in the float dtype)"
                ),
            },
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = anyhow::Error;
    /// `dense`, or `q<bits>-g<group size>` (`q4-g64`).
    fn from_str(s: &str) -> Result<Self> {
        if s == "dense" {
            return Ok(Layout::Dense);
        }
        let parsed = s
            .strip_prefix('q')
            .and_then(|rest| rest.split_once("-g"))
            .and_then(|(bits, group)| Some((bits.parse().ok()?, group.parse().ok()?)));
        match parsed {
            Some((bits, group_size)) => Self::affine(bits, group_size),
            None => anyhow::bail!("unknown layout `{s}`; use {}", Self::CHOICES),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl PartialEq<&str> for Layout {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl PartialEq<String> for Layout {
    fn eq(&self, other: &String) -> bool {
        self.name() == *other
    }
}

/// Loads a model and its tokenizer: a known name, a GGUF file, an MLX directory or a
/// Hugging Face repo id from the local cache. Every weight is read in and evaluated (as
/// mlx-lm's `load` does; [`load_lazy`] evaluates nothing), in the layout `QUEST_WEIGHTS` asks for ([`Hold`]: by default dense f32
/// on the CPU, quantized as stored on a GPU).
pub fn load(model: &str) -> Result<(Model, Tokenizer)> {
    load_with(model, Hold::from_env()?)
}

/// [`load`] with an explicit weight layout.
pub fn load_with(model: &str, layout: Hold) -> Result<(Model, Tokenizer)> {
    load_source(model, layout, false)
}

/// [`load`], lazily: the model is built from lazy arrays and nothing is evaluated.
/// What the file format lets MLX defer stays deferred (safetensors are read from disk
/// when first needed; MLX's GGUF reader copies the tensors as it opens the file), and
/// every cast, dequantization (to dense f32 on the CPU) and stacking of fused matrices
/// is only recorded. The first forward pass computes them, once: its arrays keep the
/// results, so later passes run as after [`load`]. Same layout, same tokens.
pub fn load_lazy(model: &str) -> Result<(Model, Tokenizer)> {
    load_lazy_with(model, Hold::from_env()?)
}

/// [`load_lazy`] with an explicit weight layout.
pub fn load_lazy_with(model: &str, layout: Hold) -> Result<(Model, Tokenizer)> {
    load_source(model, layout, true)
}

fn load_source(model: &str, layout: Hold, lazy: bool) -> Result<(Model, Tokenizer)> {
    // A random-weights model has nothing to defer: lazily or not, it is made now.
    let (model, tokenizer) = if let Some(spec) = random::Spec::parse(model) {
        spec?.load(layout)?
    } else {
        match hub::resolve(model)? {
            ModelSource::Directory(dir) => {
                let model = model_dir(&dir, layout, lazy)?;
                (model, Tokenizer::from_dir(&dir)?)
            }
            ModelSource::Gguf(file) => gguf_file(&file, layout, lazy)?,
        }
    };
    // What a process's first forward pays once (MLX readying its kernels, quest's
    // compiled functions), paid here where quest's line asks, so that the time to first
    // token quest's clock measures is the prefill's. A lazy load keeps its first forward:
    // what it deferred is what its lesson times.
    if !lazy && crate::line::warm_up_asked() {
        crate::line::send("loaded");
        // Not the run quest judges: no piece's calls counted (quest's own cache among them).
        crate::lm::pieces::uncounted(|| model.warm_up())?;
    }
    Ok((model, tokenizer))
}

/// Readies `weights` for this machine before a model is built from them (`config`, as
/// `config.json` says it): OpenBLAS's thread count ([`crate::device::blas::init`]), whether
/// quantized matrices become dense, and, on a CPU, whether they fit in the memory this
/// machine has ([`too_big_for_memory`]; `QUEST_MEMORY_CHECK=off` skips it).
pub fn prepare(weights: &mut Weights, layout: Hold, config: &serde_json::Value) -> Result<()> {
    require_built_backend()?;
    crate::device::blas::init()?;
    weights.dense = layout.dense_on(Backend::detect());
    let check = crate::settings::MEMORY_CHECK.value();
    let check = match check.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("QUEST_MEMORY_CHECK={other}: use `on` or `off`"),
    };
    if check && Backend::detect() == Backend::Cpu {
        // A config that does not say loads no further: building the model says why.
        let group_size = weights::Quantization::of_config(config)
            .ok()
            .flatten()
            .map(|q| q.group_size);
        let held = |dense| weights.held_bytes(dense, group_size);
        if let (Some(needed), Some(quantized), Some(available)) = (
            held(weights.dense),
            held(false),
            crate::device::memory_available(),
        ) {
            if let Some(refusal) = too_big_for_memory(needed, quantized, weights.dense, available) {
                anyhow::bail!(refusal);
            }
        }
    }
    Ok(())
}

/// Why a model that needs more memory (`needed` bytes, as it will be held, `dense` or not;
/// `quantized`, with its matrices as stored) than the machine has `available` is not
/// loaded, and what would fit; `None` where it fits. Loading it anyway would end with the
/// system stopping the process for want of memory, halfway and with no word of why, or
/// swapping for minutes.
pub fn too_big_for_memory(
    needed: u64,
    quantized: u64,
    dense: bool,
    available: u64,
) -> Option<String> {
    if needed <= available {
        return None;
    }
    let gb = |bytes: u64| format!("{:.1} GB", bytes as f64 / 1e9);
    let instead = if dense && quantized <= available {
        format!(
            "Keep its matrices quantized instead, `--weights quantized` (or \
             QUEST_WEIGHTS=quantized): {} here, and far slower on a CPU; or choose a smaller model",
            gb(quantized)
        )
    } else {
        "Choose a smaller model".to_owned()
    };
    let held = if dense {
        "its quantized matrices made dense in float32, the CPU's default: README"
    } else {
        "its matrices quantized as stored"
    };
    Some(format!(
        "this model's weights need about {} of memory as quest holds them here ({held}), and \
         this machine has {} available: loading it would end with the system stopping it \
         for want of memory. {instead}; `QUEST_MEMORY_CHECK=off` loads it anyway",
        gb(needed),
        gb(available)
    ))
}

/// One empty cache per layer: a KV cache for attention layers, a fixed-size recurrent
/// state for Qwen3.5's gated delta layers (mlx-lm's `KVCache` / `ArraysCache`).
pub fn make_prompt_cache(model: &Model) -> Vec<LayerCache> {
    model.make_cache()
}

pub fn load_dir_with(dir: &Path, layout: Hold) -> Result<(Model, Tokenizer)> {
    let model = model_dir(dir, layout, false)?;
    let tokenizer = Tokenizer::from_dir(dir)?;
    Ok((model, tokenizer))
}

/// The model alone, for directories without a tokenizer (random-weights test models).
pub fn load_model_dir(dir: &Path) -> Result<Model> {
    load_model_dir_with(dir, Hold::from_env()?)
}

pub fn load_model_dir_with(dir: &Path, layout: Hold) -> Result<Model> {
    model_dir(dir, layout, false)
}

fn model_dir(dir: &Path, layout: Hold, lazy: bool) -> Result<Model> {
    let (config, mut weights) = dir_weights(dir)?;
    prepare(&mut weights, layout, &config)?;
    weights.lazy = lazy;
    let model = Model::from_config(&config, weights)
        .with_context(|| format!("loading the model in {}", dir.display()))?;
    Ok(model)
}

/// An MLX directory's config and tensors, as stored.
fn dir_weights(dir: &Path) -> Result<(serde_json::Value, Weights)> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path)
        .with_context(|| format!("could not read {}", config_path.display()))?;
    let config: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", config_path.display()))?;
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("{} has no *.safetensors weights", dir.display());
    }
    let mut tensors = HashMap::new();
    for file in &files {
        let loaded = Array::load_safetensors(file).map_err(|e| {
            anyhow!(
                "could not read {}: {e}; the file may be truncated or corrupt",
                file.display()
            )
        })?;
        tensors.extend(loaded);
    }
    let weights = Weights::new(tensors, dir, Backend::detect().float_dtype());
    Ok((config, weights))
}

fn gguf_file(file: &Path, layout: Hold, lazy: bool) -> Result<(Model, Tokenizer)> {
    let (config, mut weights, tokenizer) = gguf_weights(file)?;
    prepare(&mut weights, layout, &config)?;
    weights.lazy = lazy;
    let model = Model::from_config(&config, weights)
        .with_context(|| format!("loading {}", file.display()))?;
    Ok((model, tokenizer))
}

/// A GGUF file's config (as `config.json` would say it), tensors by mlx-lm's names, and
/// tokenizer.
fn gguf_weights(file: &Path) -> Result<(serde_json::Value, Weights, Tokenizer)> {
    let gguf = gguf::Gguf::open(file)?;
    let config = gguf.config()?;
    let weights = gguf.weights(&config, Backend::detect().float_dtype())?;
    // A tokenizer.json beside the file wins over the one rebuilt from metadata.
    let dir = file.parent().unwrap_or(Path::new("."));
    let tokenizer = if dir.join("tokenizer.json").is_file() {
        Tokenizer::from_dir(dir)?
    } else {
        Tokenizer::from_gguf(&gguf, file)?
    };
    Ok((config, weights, tokenizer))
}

/// `[1, n]` int32 ids, the shape `forward` takes.
pub fn tokens_array(ids: &[u32]) -> Array {
    let ids: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
    Array::from_slice(&ids, &[1, ids.len() as i32])
}

/// `[B, L]` int32 ids from `B` prompts of the same length `L` (a batch `forward` takes).
/// Prompts of different lengths would need padding and a mask, which quest does not do.
pub fn tokens_rows(rows: &[Vec<u32>]) -> Result<Array> {
    let len = rows.first().map_or(0, Vec::len);
    anyhow::ensure!(
        len > 0 && rows.iter().all(|row| row.len() == len),
        "a batch needs prompts of one length (at least one token); these have {:?} tokens",
        rows.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let ids: Vec<i32> = rows.iter().flatten().map(|&i| i as i32).collect();
    Ok(Array::from_slice(&ids, &[rows.len() as i32, len as i32]))
}

/// The logits of the last position of `[B, L, V]`: the next token's distribution.
pub fn last_position(logits: &Array) -> Array {
    weights::last_position(logits)
}

/// The greedy token of one position's logits (`[1, vocab]`, or one row in any shape).
pub fn argmax_token(logits: &Array) -> Result<u32> {
    let row = logits.reshape(&[1, -1])?;
    Ok(mlx_rs::ops::indexing::argmax_axis(&row, -1, None)?.item_exact::<u32>())
}

/// One greedy step: `last` through `model` on `cache`, and the model's token after it.
pub fn greedy_next(model: &dyn Forward, cache: &mut [LayerCache], last: u32) -> Result<u32> {
    let logits = model.forward(&tokens_array(&[last]), cache)?;
    argmax_token(&last_position(&logits))
}

/// The generated ids up to (not including) the first end-of-sequence id.
pub fn until_eos<'a>(ids: &'a [u32], tokenizer: &Tokenizer) -> &'a [u32] {
    let end = ids
        .iter()
        .position(|id| tokenizer.eos_token_ids.contains(id))
        .unwrap_or(ids.len());
    &ids[..end]
}
