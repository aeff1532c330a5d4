//! What sets the speed of a token, as an exercise measures it and quest checks it.
//!
//! An exercise of this kind asks quest to measure (`measure_decode`, `measure_slope`:
//! random-weights models in public shapes, as `quest fit` and `quest slope` do), computes
//! values from what it was given (bytes per token, a ceiling, a fitted line, a predicted
//! slope), and reports both: the inputs and its values ([`crate::lab::Exercise::report_values`]).
//! quest then recomputes every value from the same inputs with its own code
//! ([`compute`], chosen by the lesson's `values:`), and says which value differs.
//!
//! The `reference_*` functions are quest's own arithmetic: a lesson's rules can forbid
//! an exercise to call them (they are matched by name).

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::{loops, random, rates, slope};
use crate::course::spec::Computation;
use crate::device::Backend;
use crate::lab::Exercise;
pub use crate::lab::{base_name, key, Values};
use crate::lm::Hold;
use crate::stats::{least_squares, median};

/// A model's shape: the numbers its `config.json` gives, as a learner counts bytes with them.
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
    /// The shape of `config` (a `config.json` as quest's random models take it).
    pub fn from_config(name: &str, config: &Value) -> Result<Self> {
        let n = |key: &str| {
            config[key]
                .as_u64()
                .with_context(|| format!("{name}: the config has no `{key}`"))
        };
        let model_type = config["model_type"].as_str().unwrap_or_default().to_owned();
        let (hidden_size, heads) = (n("hidden_size")?, n("num_attention_heads")?);
        Ok(Shape {
            name: name.to_owned(),
            qk_norm: model_type == "qwen3" || model_type == "qwen3_5",
            full_attention_interval: config["full_attention_interval"].as_u64().unwrap_or(1),
            model_type,
            hidden_size,
            num_hidden_layers: n("num_hidden_layers")?,
            num_attention_heads: heads,
            num_key_value_heads: n("num_key_value_heads")?,
            head_dim: config["head_dim"].as_u64().unwrap_or(hidden_size / heads),
            intermediate_size: n("intermediate_size")?,
            vocab_size: n("vocab_size")?,
            tie_word_embeddings: config["tie_word_embeddings"].as_bool().unwrap_or(true),
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
    pub backend: String,
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
        backend: Backend::detect().name().into(),
        bandwidth_gb_s: measured.bandwidth_gb_s,
        compute_gmac_s: measured.compute_gmac_s,
        layout: ByteSizes::here()?,
        points,
    })
}

/// One shape's decode at growing context.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlopeShape {
    pub shape: Shape,
    pub config: Value,
    /// (tokens in the cache, ms per token: the median of the rounds).
    pub points: Vec<(u64, f64)>,
}

/// What `measure_slope` gives an exercise.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlopeInputs {
    pub backend: String,
    pub bandwidth_gb_s: f64,
    pub layout: ByteSizes,
    /// Tokens timed per round, and rounds per point.
    pub tokens: usize,
    pub rounds: usize,
    pub shapes: Vec<SlopeShape>,
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
            Ok(SlopeShape {
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

/// The bytes of weights one decode step of `config`'s shape reads: every tensor of its
/// layers, the final norm and the output head, counted from the tensor list quest's
/// loader takes (not from a formula); the embedding table only when it is also the head.
pub fn reference_weight_bytes(config: &Value, layout: &ByteSizes) -> f64 {
    random::decode_tensors(config)
        .iter()
        .map(|shape| {
            elements(shape)
                * if shape.len() == 2 {
                    layout.matrix_bytes
                } else {
                    layout.float_bytes
                }
        })
        .sum()
}

/// The multiply-adds one decode step of `config`'s shape does at `context` tokens of cache:
/// one for every weight of every matrix it reads (the same tensors as
/// [`reference_weight_bytes`]), and attention's, a query against every cached key and the
/// weights against every cached value, in every layer with full attention. Norms and
/// activations do a few operations per number of a vector and are left out.
pub fn reference_ops_per_token(config: &Value, context: f64) -> f64 {
    let matrices: f64 = random::decode_tensors(config)
        .iter()
        .filter(|shape| shape.len() == 2)
        .map(|shape| elements(shape))
        .sum();
    let attention = reference_attention_layers(config) as f64
        * context
        * 2.0
        * config_number(config, "num_attention_heads")
        * head_dim(config);
    matrices + attention
}

/// The KV bytes each token of context adds to every later decode step: keys and values
/// of every layer with full attention.
pub fn reference_kv_bytes_per_position(config: &Value, float_bytes: f64) -> f64 {
    reference_attention_layers(config) as f64
        * 2.0
        * config_number(config, "num_key_value_heads")
        * head_dim(config)
        * float_bytes
}

/// A whole number of `config`'s, 0 when it has none.
fn config_number(config: &Value, key: &str) -> f64 {
    config[key].as_u64().unwrap_or(0) as f64
}

/// The width of one attention head: `head_dim`, else `hidden_size / num_attention_heads`.
fn head_dim(config: &Value) -> f64 {
    config["head_dim"].as_u64().map_or(
        config_number(config, "hidden_size") / config_number(config, "num_attention_heads"),
        |d| d as f64,
    )
}

/// The numbers in a tensor of `shape`.
fn elements(shape: &[i32]) -> f64 {
    shape.iter().map(|&d| d as f64).product()
}

/// Layers with full attention: every `full_attention_interval`-th (all, without one).
pub fn reference_attention_layers(config: &Value) -> u64 {
    let interval = config["full_attention_interval"]
        .as_u64()
        .unwrap_or(1)
        .max(1);
    let layers = config["num_hidden_layers"].as_u64().unwrap_or(0);
    (1..=layers).filter(|i| i % interval == 0).count() as u64
}

/// Milliseconds to stream `bytes` once at `gb_s` (10⁶ bytes a millisecond per GB/s).
pub fn reference_stream_ms(bytes: f64, gb_s: f64) -> f64 {
    bytes / (gb_s * 1e6)
}

/// The least-squares line through `points`: (intercept, slope).
pub fn reference_fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    least_squares(points)
}

/// quest's own values for an exercise's reported inputs.
pub fn compute(computation: Computation, inputs: &Value) -> Result<Values> {
    let mut values = Values::new();
    match computation {
        Computation::TimePerToken => {
            let inputs: DecodeInputs = serde_json::from_value(inputs.clone())
                .context("the exercise's inputs are not what `measure_decode` gives")?;
            ensure!(!inputs.points.is_empty(), "the exercise measured no shape");
            let mut line = Vec::new();
            // (bytes, ms to read them, ms to compute) of the shape that reads the most.
            let mut largest = (0.0, 0.0, 0.0);
            for p in &inputs.points {
                let bytes = reference_weight_bytes(&p.config, &inputs.layout)
                    + reference_kv_bytes_per_position(&p.config, inputs.layout.float_bytes)
                        * p.context as f64;
                let ops = reference_ops_per_token(&p.config, p.context as f64);
                let read_ms = bytes / (inputs.bandwidth_gb_s * 1e6);
                let compute_ms = ops / (inputs.compute_gmac_s * 1e6);
                values.set_for("bytes_per_token", &p.shape.name, bytes);
                values.set_for("ops_per_token", &p.shape.name, ops);
                values.set_for(
                    "ceiling_tok_s",
                    &p.shape.name,
                    1e3 / read_ms.max(compute_ms),
                );
                if bytes > largest.0 {
                    largest = (bytes, read_ms, compute_ms);
                }
                line.push((bytes, p.ms_per_token));
            }
            let (fixed_ms, ms_per_byte) = reference_fit_line(&line);
            values.set("fixed_ms", fixed_ms);
            values.set("fit_gb_s", 1e-6 / ms_per_byte);
            // The largest shape's terms, for the quiz: the fit's two, and the ceiling's two.
            values.set("fixed_term_ms", fixed_ms);
            values.set("bytes_term_ms", largest.0 * ms_per_byte);
            values.set("ceiling_bytes_ms", largest.1);
            values.set("ceiling_operations_ms", largest.2);
            // The knee: the bytes a step reads when its bytes term has grown as large as
            // the fixed term (ms × GB/s = MB). Below it the fixed term is the larger.
            values.set("knee_mb", fixed_ms * 1e-6 / ms_per_byte);
            for (p, &(bytes, _)) in inputs.points.iter().zip(&line) {
                let share = fixed_ms / (fixed_ms + bytes * ms_per_byte);
                values.set_for("fixed_share", &p.shape.name, share);
            }
            // The smallest shape's two terms, for the quiz.
            let smallest = line
                .iter()
                .map(|&(bytes, _)| bytes)
                .fold(f64::INFINITY, f64::min);
            values.set("smallest_fixed_term_ms", fixed_ms);
            values.set("smallest_bytes_term_ms", smallest * ms_per_byte);
        }
        Computation::ContextSlope => {
            let inputs: SlopeInputs = serde_json::from_value(inputs.clone())
                .context("the exercise's inputs are not what `measure_slope` gives")?;
            ensure!(!inputs.shapes.is_empty(), "the exercise measured no shape");
            for s in &inputs.shapes {
                let kv = reference_kv_bytes_per_position(&s.config, inputs.layout.float_bytes);
                let predicted = reference_stream_ms(kv * 1000.0, inputs.bandwidth_gb_s);
                let points: Vec<(f64, f64)> =
                    s.points.iter().map(|&(c, ms)| (c as f64, ms)).collect();
                let measured = reference_fit_line(&points).1 * 1000.0;
                let name = &s.shape.name;
                values.set_for("kv_bytes_per_context_token", name, kv);
                values.set_for("predicted_ms_per_1k", name, predicted);
                values.set_for("measured_ms_per_1k", name, measured);
                // The first full-attention shape and the first hybrid, for the quiz.
                let role = if reference_attention_layers(&s.config)
                    == s.config["num_hidden_layers"].as_u64().unwrap_or(0)
                {
                    "full"
                } else {
                    "hybrid"
                };
                for (what, value) in [("measured", measured), ("predicted", predicted)] {
                    values
                        .0
                        .entry(format!("{role}_{what}_ms_per_1k"))
                        .or_insert(value);
                }
            }
        }
    }
    Ok(values)
}

/// One value checked: the exercise's and quest's.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub key: String,
    pub yours: Option<f64>,
    pub quest: f64,
    /// Within the tolerance.
    pub ok: bool,
}

/// Compares the exercise's `yours` with quest's `reference` for every value whose name
/// (without its shape) is in `names`, relative `tolerance` (and 1e-12 absolute, for zeros).
pub fn compare(
    names: &[String],
    yours: &Values,
    reference: &Values,
    tolerance: f64,
) -> Vec<Checked> {
    reference
        .0
        .iter()
        .filter(|(key, _)| names.iter().any(|n| n == base_name(key)))
        .map(|(key, &quest)| {
            let mine = yours.0.get(key).copied();
            let ok = mine.is_some_and(|m| {
                m.is_finite() && (m - quest).abs() <= tolerance * quest.abs().max(1e-12)
            }) || mine.is_some_and(|m| m == quest);
            Checked {
                key: key.clone(),
                yours: mine,
                quest,
                ok,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(model_type: &str, tied: bool, interval: Option<u64>) -> Value {
        let mut config = serde_json::json!({"model_type": model_type, "hidden_size": 64,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "tie_word_embeddings": tied});
        if model_type != "llama" {
            config["head_dim"] = 32.into();
        }
        if let Some(interval) = interval {
            config["full_attention_interval"] = interval.into();
            for (k, v) in [
                ("linear_num_key_heads", 2),
                ("linear_num_value_heads", 2),
                ("linear_key_head_dim", 16),
                ("linear_value_head_dim", 16),
                ("linear_conv_kernel_dim", 4),
            ] {
                config[k] = v.into();
            }
            config["rope_parameters"] = serde_json::json!({"rope_type": "default",
                "rope_theta": 10000.0, "partial_rotary_factor": 0.25});
        }
        config
    }

    /// quest's counts agree with the model the loader builds: its weight bytes, and the
    /// KV bytes one token adds to its caches.
    #[test]
    fn the_reference_counts_match_the_built_models() {
        let layout = ByteSizes::here().unwrap();
        for config in [
            tiny("llama", true, None),
            tiny("qwen3", false, None),
            tiny("qwen3_5", true, Some(4)),
        ] {
            let model = random::model(&config, 0).unwrap();
            assert_eq!(
                reference_weight_bytes(&config, &layout),
                model.weight_bytes() as f64,
                "{config}"
            );
            let cache = crate::bench::cache_bytes(&model).unwrap();
            assert_eq!(
                reference_kv_bytes_per_position(&config, layout.float_bytes),
                cache.kv_per_position as f64,
                "{config}"
            );
        }
        assert_eq!(
            reference_attention_layers(&tiny("qwen3_5", true, Some(4))),
            1
        );
    }

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

    #[test]
    fn values_are_compared_by_name_and_shape() {
        let mut quest = Values::new();
        quest.set_for("bytes_per_token", "A", 1000.0);
        quest.set("fixed_ms", 2.0);
        quest.set("bytes_term_ms", 5.0);
        let mut yours = Values::new();
        yours.set_for("bytes_per_token", "A", 1000.0 * (1.0 + 1e-9));
        yours.set("fixed_ms", 2.5);
        let checked = compare(
            &["bytes_per_token".into(), "fixed_ms".into(), "gone".into()],
            &yours,
            &quest,
            1e-6,
        );
        assert_eq!(checked.len(), 2, "quest-only values are not compared");
        assert!(checked[0].ok && checked[0].key == "bytes_per_token[A]");
        assert!(!checked[1].ok && checked[1].yours == Some(2.5));
        let missing = compare(&["fixed_ms".into()], &Values::new(), &quest, 1e-6);
        assert!(!missing[0].ok && missing[0].yours.is_none());
    }

    #[test]
    fn quest_computes_a_line_from_the_inputs() {
        let config = tiny("llama", true, None);
        let layout = ByteSizes {
            matrix_bytes: 4.0,
            float_bytes: 4.0,
        };
        let weights = reference_weight_bytes(&config, &layout);
        let kv = reference_kv_bytes_per_position(&config, 4.0);
        // By hand: per layer q 64·64, k and v 64·32 each, o 64·64, the MLP 3·64·128,
        // two norms of 64; then the final norm and the tied head 256·64.
        let by_hand =
            4.0 * (4.0 * (2.0 * 4096.0 + 2.0 * 2048.0 + 3.0 * 8192.0 + 128.0) + 64.0 + 16384.0);
        assert_eq!(weights, by_hand);
        // 4 layers × (keys + values) × 2 heads × 16 wide × 4 bytes.
        assert_eq!(kv, 4.0 * 2.0 * 2.0 * 16.0 * 4.0);
        let point = |ms: f64| DecodePoint {
            shape: Shape::from_config("A", &config).unwrap(),
            config: config.clone(),
            context: 10,
            ms_per_token: ms,
            rounds: vec![ms],
        };
        let mut b = point(30.0);
        b.shape.name = "B".into();
        b.config["num_hidden_layers"] = 8.into();
        let inputs = DecodeInputs {
            backend: "cpu".into(),
            bandwidth_gb_s: 2.0,
            compute_gmac_s: 0.5,
            layout,
            points: vec![point(10.0), b],
        };
        let values = compute(
            Computation::TimePerToken,
            &serde_json::to_value(&inputs).unwrap(),
        )
        .unwrap();
        let bytes_a = weights + 10.0 * kv;
        assert_eq!(values.0["bytes_per_token[A]"], bytes_a);
        // Multiply-adds by hand: the matrices' weights (the bytes above without the
        // norms, over 4 bytes a weight), then 10 positions × 4 layers × (scores and the
        // weighted sum) × 4 heads × 16 wide.
        let ops_a = 4.0 * (2.0 * 4096.0 + 2.0 * 2048.0 + 3.0 * 8192.0)
            + 16384.0
            + 10.0 * 4.0 * 2.0 * 4.0 * 16.0;
        assert_eq!(values.0["ops_per_token[A]"], ops_a);
        // 2 GB/s against 0.5 G multiply-adds/s: here the arithmetic binds.
        let (read_ms, compute_ms) = (bytes_a / 2e6, ops_a / 0.5e6);
        assert!(compute_ms > read_ms);
        assert_eq!(values.0["ceiling_tok_s[A]"], 1e3 / compute_ms);
        let bytes_b = values.0["bytes_per_token[B]"];
        let per_byte = 20.0 / (bytes_b - bytes_a);
        assert!((values.0["fit_gb_s"] - 1e-6 / per_byte).abs() < 1e-9);
        assert!((values.0["fixed_ms"] - (10.0 - bytes_a * per_byte)).abs() < 1e-9);
        assert!((values.0["bytes_term_ms"] - bytes_b * per_byte).abs() < 1e-9);
        assert_eq!(values.0["ceiling_bytes_ms"], bytes_b / 2e6);
        assert!(values.0["ceiling_operations_ms"] > values.0["ceiling_bytes_ms"]);
    }
}
