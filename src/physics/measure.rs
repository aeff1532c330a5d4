//! What an exercise asks quest to measure here (`measure_decode`, `measure_slope`), and
//! the typed inputs it is handed (`Shape`: the learner's view of the model's one shape,
//! as its architecture read the config; `ByteSizes`: bytes per weight and per float),
//! which it reports with its values.

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::{loops, rates, slope};
use crate::device::Backend;
use crate::lab::Exercise;
use crate::lm::models;
use crate::lm::random;
use crate::lm::Hold;
use crate::stats::median;

/// The learner's view of the model's one [`models::Shape`]: the numbers its `config.json`
/// gives, as its architecture read them to build the model quest runs (the same reading,
/// [`models::shape_of`], never a second one), named and counted as a learner counts bytes
/// with them. Exercises receive it serialized; its fields and their names stay as they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub name: String,
    /// `llama`, `qwen3` or `qwen3_5`.
    pub model_type: String,
    pub hidden_size: u64,
    pub num_hidden_layers: u64,
    pub num_attention_heads: u64,
    pub num_key_value_heads: u64,
    /// Width of one attention head (`hidden_size / num_attention_heads` unless given).
    pub head_dim: u64,
    pub intermediate_size: u64,
    pub vocab_size: u64,
    /// The output head is the embedding table (read whole each token; a separate
    /// embedding is only gathered from, one row a token).
    pub tie_word_embeddings: bool,
    /// Qwen3's per-head RMS norm on queries and keys (a `head_dim` vector each).
    pub qk_norm: bool,
    /// Every this-many-th layer has full attention (and a KV cache); the others keep a
    /// fixed-size state (Qwen3.5). 1 when every layer is full attention.
    pub full_attention_interval: u64,
}

impl Shape {
    /// The shape of `config` (a `config.json` as quest's random models take it), named
    /// `name`: the model's [`models::Shape`], read by the architecture its `model_type`
    /// names ([`models::shape_of`]), so its defaults are the model's own.
    pub fn from_config(name: &str, config: &Value) -> Result<Self> {
        // The model's reading is the one truth, its defaults included: where a config
        // leaves a key out, this says what the model quest runs does (Qwen3.5: untied,
        // full attention every 4th layer; llama: as many KV heads as query heads), not
        // what a second reading would guess. quest's public shapes give every key.
        let (model_type, shape) =
            models::shape_of(config).with_context(|| format!("{name}: reading its config"))?;
        let count = |key: &str, value: i64| {
            u64::try_from(value).with_context(|| format!("{name}: `{key}` is {value}, not a count"))
        };
        Ok(Shape {
            name: name.to_owned(),
            model_type,
            hidden_size: count("hidden_size", shape.hidden_size.into())?,
            num_hidden_layers: shape.layers as u64,
            num_attention_heads: count("num_attention_heads", shape.heads.into())?,
            num_key_value_heads: count("num_key_value_heads", shape.kv_heads.into())?,
            head_dim: count("head_dim", shape.head_dim.into())?,
            intermediate_size: count("intermediate_size", shape.intermediate_size.into())?,
            vocab_size: count("vocab_size", shape.vocab_size.into())?,
            tie_word_embeddings: shape.tie_word_embeddings,
            qk_norm: shape.qk_norm,
            full_attention_interval: shape
                .linear_attention
                .as_ref()
                .map_or(1, |linear| linear.full_attention_interval as u64),
        })
    }
}

/// How many bytes one number takes in the layout that runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ByteSizes {
    /// Bytes per parameter of a weight matrix: 4 for dense f32 (the CPU's default), 0.625
    /// for 4 bits with an f16 scale and bias per 32 (a GPU's default).
    pub matrix_bytes: f64,
    /// Bytes per float: vectors (norms), and each key and value in the KV cache.
    pub float_bytes: f64,
}

impl ByteSizes {
    /// The layout quest's random models run in here (`QUEST_WEIGHTS`, the backend).
    pub fn here() -> Result<Self> {
        let backend = Backend::detect();
        let float_bytes = match backend.float_dtype() {
            mlx_rs::Dtype::Float32 => 4.0,
            _ => 2.0,
        };
        let dense = Hold::from_env()?.dense_on(backend);
        Ok(ByteSizes {
            matrix_bytes: if dense {
                float_bytes
            } else {
                // 4 bits, and a float scale and bias for every group of 32.
                0.5 + 2.0 * float_bytes / 32.0
            },
            float_bytes,
        })
    }
}

/// One shape's decode, measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DecodePoint {
    pub shape: Shape,
    /// The config the random model was built from (what quest counts bytes with).
    pub config: Value,
    /// Tokens in the KV cache, on average over the timed decode.
    pub context: u64,
    /// Median over the rounds.
    pub ms_per_token: f64,
    /// Each round's ms per token.
    pub rounds: Vec<f64>,
}

/// What `measure_decode` gives an exercise: this device's two rates and one point per shape.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DecodeInputs {
    pub backend: Backend,
    /// The best read rate quest measured here, GB/s ([`crate::bench::rates::bandwidth`]).
    pub bandwidth_gb_s: f64,
    /// The best matrix product quest measured here, in G multiply-adds a second
    /// ([`crate::bench::rates::compute`]).
    pub compute_gmac_s: f64,
    pub layout: ByteSizes,
    pub points: Vec<DecodePoint>,
}

/// Tokens of prompt before each timed decode (as `quest fit`).
const PROMPT_TOKENS: usize = 16;
/// Timed rounds per point; the median is kept.
const ROUNDS: usize = 2;

/// The shapes named in `QUEST_MODEL` (comma-separated; `quest run --model`), or
/// `default` when the exercise runs with quest's default model (run by hand).
fn shapes(model: &str, default: &str) -> Result<Vec<&'static random::PublicShape>> {
    let names = if model == crate::lm::DEFAULT_MODEL {
        default
    } else {
        model
    };
    names
        .split(',')
        .map(|name| {
            random::shape(name.trim()).with_context(|| {
                let known: Vec<&str> = random::SHAPES
                    .iter()
                    .chain(random::HYBRID_SHAPES)
                    .map(|s| s.name)
                    .collect();
                format!(
                    "`{name}` is not a shape quest knows; name shapes with --model, comma-separated: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// Measures this device's bandwidth and compute rate (before and after, the better of
/// each), then decodes a random-weights model of each shape the run
/// names (`quest run --model A,B,C`; by hand, `default`) for the run's `max_tokens`,
/// [`ROUNDS`] rounds after a warm-up, with the pipelined loop. Progress goes to stderr.
pub fn measure_decode(run: &Exercise, default: &str) -> Result<DecodeInputs> {
    let shapes = shapes(&run.model, default)?;
    let max_tokens = run.max_tokens.max(2);
    eprintln!("measuring this machine's bandwidth and compute rate…");
    let measured = rates::Rates::measure()?;
    let prompt = random::prompt(PROMPT_TOKENS);
    let mut points = Vec::new();
    for shape in shapes {
        let config = (shape.config)();
        eprintln!("{}: making random weights…", shape.name);
        let model = random::model(&config, 0)?;
        loops::pipelined(&model, &prompt[..2], 2)?; // warm-up
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            let run = loops::pipelined(&model, &prompt, max_tokens)?;
            rounds.push(1e3 / run.decode_tok_s);
        }
        let ms_per_token = median(&rounds);
        eprintln!("{}: {ms_per_token:.1} ms per token", shape.name);
        points.push(DecodePoint {
            shape: Shape::from_config(shape.name, &config)?,
            config,
            context: (PROMPT_TOKENS + max_tokens / 2) as u64,
            ms_per_token,
            rounds,
        });
    }
    // Once more after the decodes: a ceiling from the better of the two.
    let measured = measured.best(rates::Rates::measure()?);
    Ok(DecodeInputs {
        backend: Backend::detect(),
        bandwidth_gb_s: measured.bandwidth_gb_s,
        compute_gmac_s: measured.compute_gmac_s,
        layout: ByteSizes::here()?,
        points,
    })
}

/// One shape and its decode time at each context length, as an exercise is handed them
/// (quest's fitted line stays in [`slope::FittedSlope`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlopePoints {
    pub shape: Shape,
    pub config: Value,
    /// (tokens in the cache, ms per token: the median of the rounds).
    pub points: Vec<(u64, f64)>,
}

/// What `measure_slope` gives an exercise.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlopeInputs {
    pub backend: Backend,
    pub bandwidth_gb_s: f64,
    pub layout: ByteSizes,
    /// Tokens timed per round, and rounds per point.
    pub tokens: usize,
    pub rounds: usize,
    pub shapes: Vec<SlopePoints>,
}

/// The context lengths `measure_slope` fills: `QUEST_CONTEXTS` (comma-separated) or `default`.
fn contexts(default: &[usize]) -> Result<Vec<usize>> {
    match crate::settings::CONTEXTS.raw() {
        Some(list) => list
            .split(',')
            .map(|c| match c.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("QUEST_CONTEXTS: `{c}` is not a context length (a whole number of tokens, at least 1)"),
            })
            .collect(),
        None => Ok(default.to_vec()),
    }
}

/// `quest slope` in small: for each shape the run names (by hand, `default`), fills the
/// cache to each context length (`QUEST_CONTEXTS`, else `default_contexts`: the prefill
/// on a GPU, random keys and values on a CPU), then decodes the run's `max_tokens` per
/// round, [`ROUNDS`] rounds.
pub fn measure_slope(
    run: &Exercise,
    default: &str,
    default_contexts: &[usize],
) -> Result<SlopeInputs> {
    let shapes = shapes(&run.model, default)?;
    let contexts = contexts(default_contexts)?;
    let max_tokens = run.max_tokens;
    ensure!(
        contexts.len() >= 2,
        "a slope needs at least two context lengths"
    );
    let bandwidth_gb_s = rates::bandwidth()?;
    let options = slope::SlopeOptions {
        shapes,
        fill: if Backend::detect() == Backend::Cpu {
            slope::Fill::Random
        } else {
            slope::Fill::Prefill
        },
        contexts,
        max_tokens: max_tokens.max(1),
        rounds: ROUNDS,
    };
    let measured = slope::run(&options, bandwidth_gb_s, |line| eprintln!("{line}"))?;
    let shapes = measured
        .shapes
        .into_iter()
        .map(|s| {
            let config = (random::shape(&s.shape)
                .expect("a shape just measured")
                .config)();
            Ok(SlopePoints {
                shape: Shape::from_config(&s.shape, &config)?,
                config,
                points: s
                    .points
                    .iter()
                    .map(|p| (p.context as u64, p.ms_per_token()))
                    .collect(),
            })
        })
        .collect::<Result<_>>()?;
    Ok(SlopeInputs {
        backend: measured.backend,
        bandwidth_gb_s,
        layout: ByteSizes::here()?,
        tokens: options.max_tokens,
        rounds: options.rounds,
        shapes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_reads_its_config() {
        let config = (random::shape("Qwen3-8B").unwrap().config)();
        let shape = Shape::from_config("Qwen3-8B", &config).unwrap();
        assert_eq!((shape.head_dim, shape.num_hidden_layers), (128, 36));
        assert!(shape.qk_norm && !shape.tie_word_embeddings);
        assert_eq!(shape.full_attention_interval, 1);
        let hybrid = (random::shape("Qwen3.5-0.8B").unwrap().config)();
        assert_eq!(
            Shape::from_config("h", &hybrid)
                .unwrap()
                .full_attention_interval,
            4
        );
    }

    /// Every public shape reads as its config spells it (no key of theirs left to a
    /// default): the numbers a learner is handed are the config's own.
    #[test]
    fn every_public_shape_reads_as_its_config_says() {
        for public in random::SHAPES.iter().chain(random::HYBRID_SHAPES) {
            let config = (public.config)();
            let shape = Shape::from_config(public.name, &config).unwrap();
            let key = |k: &str| config[k].as_u64().unwrap();
            let head_dim = config["head_dim"]
                .as_u64()
                .unwrap_or(key("hidden_size") / key("num_attention_heads"));
            let model_type = config["model_type"].as_str().unwrap();
            let spelled = Shape {
                name: public.name.to_owned(),
                model_type: model_type.to_owned(),
                hidden_size: key("hidden_size"),
                num_hidden_layers: key("num_hidden_layers"),
                num_attention_heads: key("num_attention_heads"),
                num_key_value_heads: key("num_key_value_heads"),
                head_dim,
                intermediate_size: key("intermediate_size"),
                vocab_size: key("vocab_size"),
                tie_word_embeddings: config["tie_word_embeddings"].as_bool().unwrap(),
                qk_norm: model_type != "llama",
                full_attention_interval: config["full_attention_interval"].as_u64().unwrap_or(1),
            };
            assert_eq!(shape, spelled, "{}", public.name);
        }
    }
}
