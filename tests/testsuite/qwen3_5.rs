//! Qwen3.5 (gated delta layers + full attention) against mlx-lm 0.32.2 on the same MLX:
//! tiny seeded random-weights models made by tests/peer/golden_qwen3_5.py (see
//! tests/fixtures/README.md). Tokens must be identical; logits and every greedy step's
//! log-probabilities must agree within `TOLERANCE`.

use std::collections::HashMap;

use mlx_rs::{Array, Dtype};
use quest::lm::weights::Weights;
use quest::lm::{self, Hold, LayerCache, Message, Model};
use serde_json::Value;

use crate::lm_helpers::{fixture, greedy, ids, max_abs_diff, measured, mlx_lock, read_json};

/// Largest allowed |difference| of a logit or log-probability (values span about ±15).
/// Both sides run float32 on the same MLX; what differs is op fusion (mlx-lm compiles
/// the recurrence step) and summation order, which OpenBLAS's kernel family sets on each
/// CPU. Measured 2026-12-01 across six families forced on one CPU
/// (docs/cpu/2026-12-01-blas-spread/spread.txt): prefill logits at most 1.3e-5, greedy
/// log-probabilities at most 5.4e-5 except one step, step 13 of the float32 model, at
/// 3.1e-4 with the Haswell kernels (an AVX2 CPU's; the fixture's own machine reads 9.3e-5
/// there). 1e-3 is three times the largest; a wrong weight moves values by whole units.
const TOLERANCE: f32 = 1e-3;

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| ((x - max) as f64).exp()).sum();
    let log_sum = max as f64 + sum.ln();
    logits
        .iter()
        .map(|&x| (x as f64 - log_sum) as f32)
        .collect()
}

fn check_against_mlx_lm(dir: &str, layout: Hold) {
    let _one = mlx_lock();
    let g = read_json(&fixture(dir).join("golden.json"));
    let (model, tokenizer) = lm::load_dir_with(&fixture(dir), layout).unwrap();
    assert_eq!(model.model_type, "qwen3_5");

    let messages = [Message::user(g["messages"][0]["content"].as_str().unwrap())];
    let prompt = tokenizer
        .apply_chat_template(&messages, true, false)
        .unwrap();
    assert_eq!(
        prompt,
        g["prompt_text"].as_str().unwrap(),
        "{dir}: chat template renders differently"
    );
    let prompt_ids = tokenizer.encode(&prompt).unwrap();
    assert_eq!(
        prompt_ids,
        ids(&g["prompt_ids"]),
        "{dir}: tokenizer differs"
    );

    let (steps, tokens) = greedy(&model, &prompt_ids, 16);
    assert_eq!(
        tokens,
        ids(&g["greedy_ids"]),
        "{dir}: 16 greedy tokens differ from mlx-lm"
    );
    let diff = measured(
        &format!("{dir}-{layout:?}-prefill"),
        max_abs_diff(&steps[0], &floats(&g["prefill_logits"])),
    );
    assert!(
        diff < TOLERANCE,
        "{dir}: prefill logits differ by {diff} (tolerance {TOLERANCE})"
    );
    // Every step measured (and printed for docs/cpu/blas_spread.sh) before the largest is
    // judged, so a spread run sees them all.
    let diffs: Vec<f32> = steps
        .iter()
        .zip(g["greedy_logprobs"].as_array().unwrap())
        .enumerate()
        .map(|(i, (logits, expected))| {
            measured(
                &format!("{dir}-{layout:?}-step{i}"),
                max_abs_diff(&log_softmax(logits), &floats(expected)),
            )
        })
        .collect();
    for (i, diff) in diffs.into_iter().enumerate() {
        assert!(
            diff < TOLERANCE,
            "{dir}: step {i} log-probabilities differ by {diff} (tolerance {TOLERANCE})"
        );
    }
}

#[test]
fn qwen3_5_float32_matches_mlx_lm() {
    check_against_mlx_lm("qwen3_5-tiny-f32", Hold::Auto);
}

/// mlx-lm's layout; and the same file dequantized to dense floats at load (the CPU
/// default), within the same tolerance.
#[test]
fn qwen3_5_4bit_quantized_matches_mlx_lm() {
    check_against_mlx_lm("qwen3_5-tiny-4bit", Hold::Quantized);
}

#[test]
fn qwen3_5_4bit_dense_matches_mlx_lm() {
    check_against_mlx_lm("qwen3_5-tiny-4bit", Hold::Dense);
}

fn f32_tensors() -> HashMap<String, Array> {
    Array::load_safetensors(fixture("qwen3_5-tiny-f32").join("model.safetensors")).unwrap()
}

fn f32_config() -> Value {
    read_json(&fixture("qwen3_5-tiny-f32").join("config.json"))
}

fn build(config: &Value, tensors: HashMap<String, Array>) -> anyhow::Result<Model> {
    Model::from_config(
        config,
        Weights::new(tensors, &fixture("qwen3_5-tiny-f32"), Dtype::Float32),
    )
}

/// The same weights in the Hugging Face layout: `model.language_model.*` names, conv1d as
/// `[channels, 1, kernel]`, RMSNorm weights stored minus one, plus a vision tower, an MTP
/// head and a tied `lm_head` that must all be dropped.
#[test]
fn a_hugging_face_checkpoint_is_sanitized_like_mlx_lm() {
    let _one = mlx_lock();
    let shifted = [
        ".input_layernorm.weight",
        ".post_attention_layernorm.weight",
        "model.norm.weight",
        "q_norm.weight",
        "k_norm.weight",
    ];
    let one = Array::from_f32(1.0);
    let mut hf = HashMap::new();
    for (name, t) in f32_tensors() {
        let name = name.replace("language_model.model.", "model.language_model.");
        let t = if name.ends_with("conv1d.weight") {
            t.swap_axes(1, 2).unwrap()
        } else if shifted.iter().any(|s| name.ends_with(s)) {
            t.subtract(&one).unwrap()
        } else {
            t
        };
        hf.insert(name, t);
    }
    let embed = hf["model.language_model.embed_tokens.weight"].clone();
    hf.insert("lm_head.weight".into(), embed);
    hf.insert(
        "model.visual.patch_embed.proj.weight".into(),
        Array::zeros::<f32>(&[4, 4]).unwrap(),
    );
    hf.insert(
        "mtp.fc.weight".into(),
        Array::zeros::<f32>(&[4, 4]).unwrap(),
    );

    let model = build(&f32_config(), hf).unwrap();
    let g = read_json(&fixture("qwen3_5-tiny-f32").join("golden.json"));
    let (steps, tokens) = greedy(&model, &ids(&g["prompt_ids"]), 4);
    assert_eq!(tokens, ids(&g["greedy_ids"])[..4]);
    let diff = measured(
        "qwen3_5-tiny-f32-hf-names-prefill",
        max_abs_diff(&steps[0], &floats(&g["prefill_logits"])),
    );
    assert!(diff < TOLERANCE, "prefill logits differ by {diff}");
}

#[test]
fn the_prompt_cache_has_the_kind_each_layer_needs() {
    let _one = mlx_lock();
    let model = build(&f32_config(), f32_tensors()).unwrap();
    let mut cache = lm::make_prompt_cache(&model);
    let kinds: Vec<&str> = cache
        .iter()
        .map(|c| {
            if matches!(c, LayerCache::Kv(_)) {
                "kv"
            } else {
                "recurrent"
            }
        })
        .collect();
    assert_eq!(kinds, ["recurrent", "kv", "recurrent", "kv"]);

    let used = |cache: &[LayerCache], i: usize| cache[i].nbytes_used();
    model
        .forward(&lm::tokens_array(&[1, 2, 3, 4, 5]), &mut cache)
        .unwrap();
    let (state_before, kv_before) = (used(&cache, 0), used(&cache, 1));
    model
        .forward(&lm::tokens_array(&[6, 7, 8]), &mut cache)
        .unwrap();
    // The recurrent state has a fixed size; the KV cache grows with every position.
    assert_eq!(used(&cache, 0), state_before);
    assert_eq!(used(&cache, 1), kv_before * 8 / 5);
}

fn error_of<T>(result: anyhow::Result<T>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_cache_of_the_wrong_shape_or_kind_is_an_error() {
    let _one = mlx_lock();
    let model = build(&f32_config(), f32_tensors()).unwrap();
    let tokens = lm::tokens_array(&[1, 2, 3]);
    let mut too_short: Vec<LayerCache> =
        lm::make_prompt_cache(&model).into_iter().take(2).collect();
    let message = error_of(model.forward(&tokens, &mut too_short));
    assert!(
        message.contains("2 layers") && message.contains("make_prompt_cache"),
        "{message}"
    );
    let mut all_kv: Vec<LayerCache> = (0..4).map(|_| LayerCache::Kv(lm::KvCache::new())).collect();
    let message = error_of(model.forward(&tokens, &mut all_kv));
    assert!(message.contains("wrong kind of cache"), "{message}");
    let mut cache = lm::make_prompt_cache(&model);
    let message = error_of(model.forward(&lm::tokens_array(&[]), &mut cache));
    assert!(message.contains("at least one token"), "{message}");
}

#[test]
fn bad_qwen3_5_configs_are_errors() {
    let _one = mlx_lock();
    let with = |key: &str, value: Value| {
        let mut config = f32_config();
        config["text_config"][key] = value;
        error_of(build(&config, f32_tensors()))
    };
    let message = with("full_attention_interval", 0.into());
    assert!(message.contains("full_attention_interval"), "{message}");
    let message = with("num_experts", 8.into());
    assert!(message.contains("mixture-of-experts"), "{message}");
    let message = with("layer_types", serde_json::json!(vec!["full_attention"; 4]));
    assert!(message.contains("layer_types"), "{message}");
    let message = with("linear_num_key_heads", 3.into());
    assert!(message.contains("linear_num_key_heads"), "{message}");
    let message = with("linear_conv_kernel_dim", 3.into());
    assert!(
        message.contains("conv1d.weight") && message.contains("[128, 3, 1]"),
        "{message}"
    );
    let message = with(
        "rope_parameters",
        serde_json::json!({"rope_type": "yarn", "factor": 4.0}),
    );
    assert!(message.contains("yarn"), "{message}");
    let mut config = f32_config();
    config["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("linear_value_head_dim");
    let message = error_of(build(&config, f32_tensors()));
    assert!(message.contains("linear_value_head_dim"), "{message}");
}
