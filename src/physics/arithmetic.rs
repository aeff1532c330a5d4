//! quest's own arithmetic over an exercise's inputs: the `reference_*` counts and lines
//! (an exercise may call them where its lesson allows), `compute` (all of a lesson's
//! values, one `Computation` per kind), and `compare`, which names every value of the
//! exercise's that differs from quest's.

use anyhow::{ensure, Context, Result};
use serde_json::Value;

use super::measure::{ByteSizes, DecodeInputs, SlopeInputs};
use crate::course::spec::Computation;
use crate::lab::{base_name, Values};
use crate::lm::random;
use crate::stats::least_squares;

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
    use crate::physics::measure::{DecodePoint, Shape};

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
            backend: crate::device::Backend::Cpu,
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
