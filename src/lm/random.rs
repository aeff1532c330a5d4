//! Random-weights models in a real model's shape. Decode speed depends on the shapes and
//! the bytes read, not on the weights' values, so these stand in for models this
//! machine does not have (an 8B model on a GPU box with no network, say).
//!
//! `lm::load("random:qwen3-8b")` (`--model random:<shape>[@bits]`) loads one as a model
//! like any other, with a stand-in tokenizer ([`Tokenizer::stand_in`]): the weights come
//! from a fixed seed, so the same shape and bits give the same greedy tokens on a backend.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use mlx_rs::transforms::eval;
use mlx_rs::Array;
use serde_json::{json, Value};

use crate::device::Backend;
use crate::lm::models::Shape;
use crate::lm::weights::Weights;
use crate::lm::{Hold, Model, Tokenizer};

/// How `--model` names a random-weights model: `random:<shape>[@bits]`.
pub const PREFIX: &str = "random:";
/// The seed of every `random:` model (the same weights each time, so tokens repeat).
pub const SEED: u64 = 0;
/// Quantization bits a `random:` model may ask for (group size 32).
pub const BITS: &[i32] = &[4, 8];

/// A public model's shape by name: its `config.json` (`model_type` llama, qwen3 or
/// qwen3_5), from which its architecture reads the model's [`Shape`].
pub struct PublicShape {
    pub name: &'static str,
    pub config: fn() -> Value,
}

fn llama(hidden: i64, layers: i64, heads: i64, kv: i64, ffn: i64, vocab: i64) -> Value {
    json!({"model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": ffn,
           "vocab_size": vocab, "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "tie_word_embeddings": true})
}

fn qwen3(hidden: i64, layers: i64, heads: i64, kv: i64, ffn: i64, tied: bool) -> Value {
    json!({"model_type": "qwen3", "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
           "intermediate_size": ffn, "vocab_size": 151936, "rms_norm_eps": 1e-6,
           "rope_theta": 1000000.0, "tie_word_embeddings": tied, "max_position_embeddings": 40960})
}

/// Qwen3.5's hybrid layout: gated delta layers with a fixed-size state, and full attention
/// (a KV cache, a gate on the output, RoPE on a quarter of each head) every 4th layer.
fn qwen3_5(
    hidden: i64,
    layers: i64,
    heads: i64,
    kv: i64,
    ffn: i64,
    linear_k: i64,
    linear_v: i64,
) -> Value {
    json!({"model_type": "qwen3_5", "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 256,
           "intermediate_size": ffn, "vocab_size": 248320, "rms_norm_eps": 1e-6,
           "linear_num_key_heads": linear_k, "linear_num_value_heads": linear_v,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
           "full_attention_interval": 4, "tie_word_embeddings": true,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}})
}

/// Shapes of public full-attention models, smallest first (what `quest fit` runs).
pub const SHAPES: &[PublicShape] = &[
    PublicShape {
        name: "SmolLM2-135M",
        config: || llama(576, 30, 9, 3, 1536, 49152),
    },
    PublicShape {
        name: "SmolLM2-360M",
        config: || llama(960, 32, 15, 5, 2560, 49152),
    },
    PublicShape {
        name: "Qwen3-0.6B",
        config: || qwen3(1024, 28, 16, 8, 3072, true),
    },
    PublicShape {
        name: "Qwen3-1.7B",
        config: || qwen3(2048, 28, 16, 8, 6144, true),
    },
    PublicShape {
        name: "Qwen3-4B",
        config: || qwen3(2560, 36, 32, 8, 9728, true),
    },
    PublicShape {
        name: "Qwen3-8B",
        config: || qwen3(4096, 36, 32, 8, 12288, false),
    },
];

/// Shapes of public hybrid models (Qwen3.5, dense), smallest first: each pairs with a
/// full-attention shape above of about the same weight bytes (0.8B with Qwen3-0.6B, 4B
/// with Qwen3-4B), for `quest slope`.
pub const HYBRID_SHAPES: &[PublicShape] = &[
    PublicShape {
        name: "Qwen3.5-0.8B",
        config: || qwen3_5(1024, 24, 8, 2, 3584, 16, 16),
    },
    PublicShape {
        name: "Qwen3.5-4B",
        config: || qwen3_5(2560, 32, 16, 4, 9216, 16, 32),
    },
];

/// Every shape's config by name, for the Python peer to build the same models.
pub fn configs() -> Value {
    Value::Object(
        SHAPES
            .iter()
            .map(|s| (s.name.to_owned(), (s.config)()))
            .collect(),
    )
}

/// A shape by name (any case), full-attention or hybrid.
pub fn shape(name: &str) -> Option<&'static PublicShape> {
    SHAPES
        .iter()
        .chain(HYBRID_SHAPES)
        .find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The shapes of the tensors one decode step of `config`'s shape reads whole: all but
/// the embedding table, unless it is also the output head (a separate one is only
/// gathered from, one row a token).
pub fn decode_tensors(config: &Value) -> Vec<Vec<i32>> {
    let shapes = tensor_shapes(config);
    // A separate head is in the list: then the table is only gathered from.
    let tied = !shapes.iter().any(|(name, _)| name == "lm_head.weight");
    shapes
        .into_iter()
        .filter(|(name, _)| tied || name != "model.embed_tokens.weight")
        .map(|(_, shape)| shape)
        .collect()
}

/// Every tensor name and shape the architecture's loader takes (`[out, in]` for linears),
/// from the [`Shape`] the architecture reads from `config` (a config quest's architectures
/// cannot read is a bug of the caller's: quest's random shapes all read).
fn tensor_shapes(config: &Value) -> Vec<(String, Vec<i32>)> {
    let s = Shape::of_config(config).expect("a config of an architecture quest runs");
    let (hidden, ffn, head_dim) = (s.hidden_size, s.intermediate_size, s.head_dim);
    let mut out = vec![
        (
            "model.embed_tokens.weight".to_owned(),
            vec![s.vocab_size, hidden],
        ),
        ("model.norm.weight".into(), vec![hidden]),
    ];
    if !s.tie_word_embeddings {
        out.push(("lm_head.weight".into(), vec![s.vocab_size, hidden]));
    }
    for i in 0..s.layers {
        let p = format!("model.layers.{i}");
        out.push((format!("{p}.input_layernorm.weight"), vec![hidden]));
        out.push((format!("{p}.post_attention_layernorm.weight"), vec![hidden]));
        out.push((format!("{p}.mlp.gate_proj.weight"), vec![ffn, hidden]));
        out.push((format!("{p}.mlp.up_proj.weight"), vec![ffn, hidden]));
        out.push((format!("{p}.mlp.down_proj.weight"), vec![hidden, ffn]));
        // Qwen3.5: every `full_attention_interval`-th layer has attention, the rest a gated delta net.
        if let Some(linear) = s.linear_attention.as_ref().filter(|_| s.is_linear_layer(i)) {
            let (conv, value_dim) = (linear.conv_channels(), linear.value_dim());
            let value_heads = linear.value_heads;
            let p = format!("{p}.linear_attn");
            out.push((format!("{p}.in_proj_qkv.weight"), vec![conv, hidden]));
            out.push((format!("{p}.in_proj_z.weight"), vec![value_dim, hidden]));
            out.push((format!("{p}.in_proj_b.weight"), vec![value_heads, hidden]));
            out.push((format!("{p}.in_proj_a.weight"), vec![value_heads, hidden]));
            out.push((format!("{p}.out_proj.weight"), vec![hidden, value_dim]));
            // MLX's depthwise conv layout, `[channels, kernel, 1]`.
            out.push((
                format!("{p}.conv1d.weight"),
                vec![conv, linear.conv_kernel, 1],
            ));
            out.push((format!("{p}.A_log"), vec![value_heads]));
            out.push((format!("{p}.dt_bias"), vec![value_heads]));
            out.push((format!("{p}.norm.weight"), vec![linear.value_head_dim]));
            continue;
        }
        // Qwen3.5's q_proj also yields the output gate: twice the query width.
        let gates = if s.attention_output_gate { 2 } else { 1 };
        let (q_out, kv_out) = (gates * s.heads * head_dim, s.kv_heads * head_dim);
        out.push((format!("{p}.self_attn.q_proj.weight"), vec![q_out, hidden]));
        out.push((format!("{p}.self_attn.k_proj.weight"), vec![kv_out, hidden]));
        out.push((format!("{p}.self_attn.v_proj.weight"), vec![kv_out, hidden]));
        out.push((
            format!("{p}.self_attn.o_proj.weight"),
            vec![hidden, s.heads * head_dim],
        ));
        if s.qk_norm {
            out.push((format!("{p}.self_attn.q_norm.weight"), vec![head_dim]));
            out.push((format!("{p}.self_attn.k_norm.weight"), vec![head_dim]));
        }
    }
    out
}

/// `random:<shape>[@bits]`, parsed: which shape, how many bits.
#[derive(Clone, Copy)]
pub struct Spec {
    pub shape: &'static PublicShape,
    pub bits: i32,
}

impl Spec {
    /// `None` when `name` is not a `random:` name; an error naming the choices when it is
    /// one but its shape or bits are unknown.
    pub fn parse(name: &str) -> Option<Result<Self>> {
        let rest = name.strip_prefix(PREFIX)?;
        let (shape_name, bits) = match rest.split_once('@') {
            Some((shape, bits)) => (shape, Some(bits)),
            None => (rest, None),
        };
        let parsed = || -> Result<Self> {
            let shape = shape(shape_name).ok_or_else(|| {
                anyhow::anyhow!(
                    "`{name}`: no shape `{shape_name}`; random-weights shapes are {}",
                    shape_names().join(", ")
                )
            })?;
            let bits = match bits {
                None => 4,
                Some(b) => b.parse().ok().filter(|b| BITS.contains(b)).ok_or_else(|| {
                    anyhow::anyhow!("`{name}`: `@{b}` is not a bit width; use @4 or @8")
                })?,
            };
            Ok(Self { shape, bits })
        };
        Some(parsed())
    }

    /// The model (seeded with [`SEED`]) and a stand-in tokenizer for its vocabulary.
    pub fn load(&self, layout: Hold) -> Result<(Model, Tokenizer)> {
        let config = (self.shape.config)();
        let vocab = config["vocab_size"].as_u64().unwrap_or(32_000) as u32;
        let model = model_with(&config, SEED, self.bits, layout)?;
        Ok((model, Tokenizer::stand_in(vocab)))
    }
}

/// Every shape's name, full-attention then hybrid (for messages and `--model` help).
pub fn shape_names() -> Vec<&'static str> {
    SHAPES.iter().chain(HYBRID_SHAPES).map(|s| s.name).collect()
}

/// A 4-bit (group 32) random model of `config`'s shape: [`model_bits`] with 4 bits.
pub fn model(config: &Value, seed: u64) -> Result<Model> {
    model_bits(config, seed, 4)
}

/// A `bits`-bit (group 32) random model of `config`'s shape, built tensor by tensor so that
/// no more than one float matrix exists at a time. Only matrices are quantized; vectors
/// (norms, Qwen3.5's `A_log` and `dt_bias`) are ones and the conv1d kernel stays float.
pub fn model_bits(config: &Value, seed: u64, bits: i32) -> Result<Model> {
    model_with(config, seed, bits, Hold::from_env()?)
}

/// [`model_bits`] in an explicit weight layout (dense f32 on the CPU by default).
pub fn model_with(config: &Value, seed: u64, bits: i32, layout: Hold) -> Result<Model> {
    crate::lm::require_built_backend()?;
    // One key per tensor, split off in the order the tensors are listed.
    let mut key = mlx_rs::random::key(seed)?;
    let mut next_key = || -> Result<Array> {
        let (this, rest) = mlx_rs::random::split(&key, 2)?;
        key = rest;
        Ok(this)
    };
    let dtype = Backend::detect().float_dtype();
    let mut tensors = HashMap::new();
    for (name, shape) in tensor_shapes(config) {
        if shape.len() == 1 {
            tensors.insert(name, mlx_rs::ops::ones_dtype(&shape, dtype)?);
            continue;
        }
        if shape.len() != 2 {
            let w = mlx_rs::random::normal::<f32>(&shape[..], None, 0.02, &next_key()?)?
                .as_dtype(dtype)?;
            eval([&w])?;
            tensors.insert(name, w);
            continue;
        }
        let (q, scales, biases) =
            random_quantized(shape[0], shape[1], 32, bits, dtype, &next_key()?)?;
        eval([&q, &scales, &biases])?;
        let prefix = name.trim_end_matches(".weight");
        tensors.insert(format!("{prefix}.scales"), scales);
        tensors.insert(format!("{prefix}.biases"), biases);
        tensors.insert(name, q);
    }
    let mut config = config.clone();
    config["quantization"] = json!({"group_size": 32, "bits": bits});
    let mut weights = Weights::new(tensors, Path::new("<random weights>"), dtype);
    crate::lm::prepare(&mut weights, layout, &config)?;
    let model = Model::from_config(&config, weights)?;
    Ok(model)
}

/// A random `bits`-bit `[rows, cols]` matrix as MLX's `quantize` packs one: each weight a
/// uniform random level, `32 / bits` of them to a `uint32` word (the first in the lowest
/// bits), with one scale and bias for every group that make the weights zero-mean with a
/// standard deviation of 0.02. Made directly in the packed form, from random words: every
/// bit of a uniformly random word is a fair coin, so each of its `bits`-wide fields is a
/// uniform level, independent of the others. Drawing a level at a time (or normal floats
/// to quantize) costs a hash per weight instead of one per word: Qwen3.5-0.8B's matrices
/// took several times longer to make on a CPU core.
fn random_quantized(
    rows: i32,
    cols: i32,
    group_size: i32,
    bits: i32,
    dtype: mlx_rs::Dtype,
    key: &Array,
) -> Result<(Array, Array, Array)> {
    let per_word = 32 / bits;
    let levels = 1i32 << bits;
    let packed = random_words(&[rows, cols / per_word], key)?;
    // A uniform level over 0..levels has variance (levels² - 1) / 12.
    let scale = 0.02 / (((levels * levels - 1) as f32) / 12.0).sqrt();
    let bias = -scale * (levels - 1) as f32 / 2.0;
    let groups = [rows, cols / group_size];
    let scales = Array::full::<f32>(&groups, Array::from(scale))?.as_dtype(dtype)?;
    let biases = Array::full::<f32>(&groups, Array::from(bias))?.as_dtype(dtype)?;
    Ok((packed, scales, biases))
}

/// `shape` uniformly random `uint32` words drawn with `key`: MLX's `random.bits`, which
/// mlx-rs does not wrap.
fn random_words(shape: &[i32], key: &Array) -> Result<Array> {
    let stream = mlx_rs::Stream::thread_local_or_default();
    let mut words = unsafe { mlx_sys::mlx_array_new() };
    // SAFETY: `words` is a fresh handle that MLX fills; `key` and `stream` outlive the call.
    let status = unsafe {
        mlx_sys::mlx_random_bits(
            &mut words,
            shape.as_ptr(),
            shape.len(),
            4,
            key.as_ptr(),
            stream.as_ptr(),
        )
    };
    // SAFETY: the handle is owned from here on (freed on drop), whatever MLX returned.
    let words = unsafe { Array::from_ptr(words) };
    anyhow::ensure!(status == 0, "mlx: random bits of shape {shape:?} failed");
    Ok(words)
}

/// The ids a random model decodes from (any ids below its vocabulary do).
pub fn prompt(len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| 1 + (i * 7919) % 1000).collect()
}

/// A two-layer llama of 64 wide and 256 tokens: a model for unit tests that run loops.
#[cfg(test)]
pub(crate) fn tiny_llama() -> Value {
    json!({"model_type": "llama", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "tie_word_embeddings": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What quest says a model will hold before it is made is what the model made from the
    /// same tensors holds, dense and quantized: every weight of the tied tiny llama is read
    /// at each step (its head is its embedding), so its bytes a step are its weights.
    #[test]
    fn the_memory_a_model_will_hold_is_counted_from_its_tensors_shapes() {
        let config = tiny_llama();
        let dtype = Backend::detect().float_dtype();
        let group = 32;
        // The tensors as `model_with` makes them, 4-bit, by shape alone.
        let mut entries: Vec<(String, Vec<i32>, mlx_rs::Dtype)> = Vec::new();
        for (name, shape) in tensor_shapes(&config) {
            if shape.len() != 2 {
                entries.push((name, shape, dtype));
                continue;
            }
            let prefix = name.trim_end_matches(".weight").to_owned();
            let (rows, cols) = (shape[0], shape[1]);
            entries.push((name, vec![rows, cols / 8], mlx_rs::Dtype::Uint32));
            for part in ["scales", "biases"] {
                entries.push((format!("{prefix}.{part}"), vec![rows, cols / group], dtype));
            }
        }
        let held = |dense, group| {
            crate::lm::weights::held_bytes(
                entries
                    .iter()
                    .map(|(n, s, d)| (n.as_str(), s.as_slice(), *d)),
                dense,
                dtype,
                group,
            )
        };
        for (layout, dense) in [(Hold::Dense, true), (Hold::Quantized, false)] {
            let model = model_with(&config, 0, 4, layout).unwrap();
            let made = model.weight_bytes() as f64;
            let counted = held(dense, Some(group)).unwrap() as f64;
            // Within the one embedding row a step also reads.
            assert!(
                (counted - made).abs() <= 0.01 * made,
                "dense {dense}: counted {counted} bytes, the model holds {made}"
            );
        }
        // Dense needs the group size to count a quantized matrix's weights.
        assert_eq!(held(true, None), None);
        assert!(held(false, None).is_some());
    }

    #[test]
    fn a_model_too_big_for_memory_is_refused_saying_what_fits() {
        use crate::lm::too_big_for_memory;
        let gb = 1_000_000_000;
        assert_eq!(too_big_for_memory(8 * gb, 2 * gb, true, 8 * gb), None);
        let dense = too_big_for_memory(33 * gb, 6 * gb, true, 16 * gb).unwrap();
        assert!(
            dense.contains("33.0 GB")
                && dense.contains("16.0 GB")
                && dense.contains("--weights quantized")
                && dense.contains("6.0 GB"),
            "{dense}"
        );
        // Quantized is no way out where it does not fit either, nor where it already is.
        for (quantized, dense) in [(20 * gb, true), (6 * gb, false)] {
            let refusal = too_big_for_memory(33 * gb, quantized, dense, 16 * gb).unwrap();
            assert!(!refusal.contains("--weights quantized"), "{refusal}");
            assert!(
                refusal.contains("smaller model") && refusal.contains("QUEST_MEMORY_CHECK=off"),
                "{refusal}"
            );
        }
    }

    /// The packed random matrix is one MLX reads as `bits`-bit weights: dequantized, its
    /// values are the levels of one scale and bias, zero-mean, with a standard deviation
    /// of 0.02, and every level occurs.
    #[test]
    fn random_quantized_weights_are_what_mlx_dequantizes() {
        for bits in [4, 8] {
            let (q, scales, biases) = random_quantized(
                64,
                256,
                32,
                bits,
                mlx_rs::Dtype::Float32,
                &mlx_rs::random::key(1).unwrap(),
            )
            .unwrap();
            assert_eq!(q.shape(), [64, 256 * bits / 32]);
            let w = mlx_rs::ops::dequantize(&q, &scales, &biases, 32, bits).unwrap();
            let values: Vec<f32> = w.as_slice::<f32>().to_vec();
            let n = values.len() as f32;
            let mean = values.iter().sum::<f32>() / n;
            let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n).sqrt();
            assert!(
                mean.abs() < 1e-3 && (std - 0.02).abs() < 2e-3,
                "{bits}: {mean} {std}"
            );
            let scale = scales.as_slice::<f32>()[0];
            let bias = biases.as_slice::<f32>()[0];
            let mut levels: Vec<i64> = values
                .iter()
                .map(|v| ((v - bias) / scale).round() as i64)
                .collect();
            levels.sort();
            levels.dedup();
            assert_eq!(levels, (0..1i64 << bits).collect::<Vec<_>>(), "{bits}");
        }
    }

    #[test]
    fn random_names_parse_with_their_bits_and_unknown_ones_name_the_choices() {
        assert!(Spec::parse("smollm2-135m-instruct").is_none());
        let spec = Spec::parse("random:qwen3-8b").unwrap().unwrap();
        assert_eq!((spec.shape.name, spec.bits), ("Qwen3-8B", 4));
        let spec = Spec::parse("random:SmolLM2-135M@8").unwrap().unwrap();
        assert_eq!((spec.shape.name, spec.bits), ("SmolLM2-135M", 8));
        let error = Spec::parse("random:qwen9-1t")
            .unwrap()
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("no shape `qwen9-1t`") && error.contains("Qwen3.5-4B"),
            "{error}"
        );
        let error = Spec::parse("random:qwen3-8b@5")
            .unwrap()
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("use @4 or @8"), "{error}");
    }

    #[test]
    fn a_random_model_decodes_the_same_tokens_each_time_it_is_made() {
        use mlx_rs::ops::indexing::argmax_axis;
        let greedy = || -> Vec<u32> {
            let (model, tokenizer) = crate::lm::load("random:smollm2-135m").unwrap();
            let mut ids = tokenizer.encode("<t5> What is the capital").unwrap();
            assert_eq!(ids[0], 5);
            let mut cache = crate::lm::make_prompt_cache(&model);
            let mut input = ids.clone();
            for _ in 0..3 {
                let logits = model
                    .forward(&crate::lm::tokens_array(&input), &mut cache)
                    .unwrap();
                let next = argmax_axis(crate::lm::last_position(&logits), -1, None).unwrap();
                let next = next.item_exact::<u32>();
                ids.push(next);
                input = vec![next];
            }
            ids
        };
        let first = greedy();
        assert_eq!(first, greedy());
        assert_eq!(first.len(), 8);
    }
}
