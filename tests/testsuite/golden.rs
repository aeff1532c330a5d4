//! Golden tests: quest::lm against mlx-lm 0.32.2 on the same MLX (fixtures made by
//! tests/peer/golden.py; see tests/fixtures/README.md). Tokens must be identical; logits
//! must agree within `LOGIT_TOLERANCE`.
//!
//! The fixtures come from mlx-lm's quantized layout. quest runs each quantized model in
//! both layouts (`lm::Hold`): `quantized` as mlx-lm does, and `dense` (dequantized
//! to the float dtype at load, the CPU default); the same tokens and tolerance hold for
//! both.

use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::Array;
use quest::lm::{self, Hold, KvCache, Message};

use crate::lm_helpers::{fixture, greedy, ids, max_abs_diff, measured, mlx_lock, read_json};

/// Largest allowed |logit difference| at the last prefill position (logits span ~±30).
/// The fixtures come from mlx-lm on the stock wheel's reference BLAS; quest's OpenBLAS picks
/// its kernels for the CPU it runs on, and each kernel family sums in its own order. Measured
/// 2026-12-01 across six families forced on one CPU (Nehalem, Sandybridge, Haswell, Zen,
/// SkylakeX, Cooperlake: docs/cpu/2026-12-01-blas-spread/spread.txt): at most 9.6e-5
/// (SmolLM2 dense, Nehalem kernels), the tiny Qwen3s at most 1.3e-5. 3e-4 is three times
/// that, about 150 float32 ulps at 30: room for another kernel's summation order, none
/// for a wrong weight or layout (those move logits by whole units).
const LOGIT_TOLERANCE: f32 = 3e-4;

#[test]
fn smollm2_gguf_dense_matches_mlx_lm() {
    check_smollm2(Hold::Dense, "dense-f32");
}

#[test]
fn smollm2_gguf_quantized_matches_mlx_lm() {
    check_smollm2(Hold::Quantized, "quantized");
}

/// The CPU default is dense f32; on a GPU the default keeps the file's quantized layout.
#[test]
fn the_default_layout_is_dense_on_the_cpu() {
    let _one = mlx_lock();
    let model = lm::load_model_dir_with(&fixture("qwen3-tiny-4bit"), Hold::Auto).unwrap();
    let expected = match quest::device::Backend::detect() {
        quest::device::Backend::Cpu => "dense-f32",
        _ => "quantized",
    };
    assert_eq!(model.layout, expected);
    let (weights, bytes) = quest::lm::Forward::weights(&model);
    assert_eq!(weights, expected);
    assert_eq!(bytes, model.weight_bytes() as u64);
}

/// `lm::load_lazy` evaluates nothing at load; the first forward pass computes the
/// weights, and the tokens and logits are those of the eager load.
#[test]
fn smollm2_gguf_lazy_matches_mlx_lm() {
    check_smollm2_loaded(Hold::Dense, "dense-f32", true);
    check_smollm2_loaded(Hold::Quantized, "quantized", true);
}

fn check_smollm2(layout: Hold, expected_layout: &str) {
    check_smollm2_loaded(layout, expected_layout, false)
}

fn check_smollm2_loaded(layout: Hold, expected_layout: &str, lazy: bool) {
    let _one = mlx_lock();
    let g = read_json(&fixture("smollm2").join("golden.json"));
    let load = if lazy {
        lm::load_lazy_with
    } else {
        lm::load_with
    };
    let (model, tokenizer) = load(lm::DEFAULT_MODEL, layout).unwrap();
    assert_eq!(model.layout, expected_layout);
    if layout == Hold::Dense {
        // 134.5M parameters at 4 bytes: what a decode step reads.
        let mb = model.weight_bytes() as f64 / 1e6;
        assert!((530.0..550.0).contains(&mb), "{mb} MB of dense weights");
    }

    let messages: Vec<Message> = vec![Message::user(g["messages"][0]["content"].as_str().unwrap())];
    let prompt = tokenizer
        .apply_chat_template(&messages, true, false)
        .unwrap();
    assert_eq!(
        prompt,
        g["prompt_text"].as_str().unwrap(),
        "chat template renders differently"
    );
    let prompt_ids = tokenizer.encode(&prompt).unwrap();
    assert_eq!(
        prompt_ids,
        ids(&g["prompt_ids"]),
        "tokenizer (built from GGUF metadata) differs"
    );

    let (steps, tokens) = greedy(&model, &prompt_ids, 32);
    let prefill = &steps[0];
    assert_eq!(
        tokens,
        ids(&g["greedy_ids"]),
        "first 32 greedy tokens differ from mlx-lm"
    );
    assert_eq!(
        tokenizer
            .decode(lm::until_eos(&tokens, &tokenizer))
            .unwrap(),
        g["greedy_text_until_eos"].as_str().unwrap()
    );

    let bytes = std::fs::read(fixture("smollm2").join("prefill_logits.f32")).unwrap();
    let expected: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let name = format!(
        "smollm2-{expected_layout}{}",
        if lazy { "-lazy" } else { "" }
    );
    let diff = measured(&name, max_abs_diff(prefill, &expected));
    assert!(
        diff < LOGIT_TOLERANCE,
        "prefill logits differ by {diff} (tolerance {LOGIT_TOLERANCE})"
    );
}

fn check_tiny_qwen3(dir: &str, layout: Hold) {
    let _one = mlx_lock();
    let g = read_json(&fixture(dir).join("golden.json"));
    let model = lm::load_model_dir_with(&fixture(dir), layout).unwrap();
    assert_eq!(model.model_type, "qwen3");
    let (steps, tokens) = greedy(&model, &ids(&g["prompt_ids"]), 16);
    let prefill = &steps[0];
    assert_eq!(
        tokens,
        ids(&g["greedy_ids"]),
        "{dir}: 16 greedy tokens differ from mlx-lm"
    );
    let expected: Vec<f32> = g["prefill_logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let diff = measured(
        &format!("{dir}-{layout:?}"),
        max_abs_diff(prefill, &expected),
    );
    assert!(
        diff < LOGIT_TOLERANCE,
        "{dir}: prefill logits differ by {diff}"
    );
}

#[test]
fn qwen3_float32_matches_mlx_lm() {
    check_tiny_qwen3("qwen3-tiny-f32", Hold::Auto);
}

#[test]
fn qwen3_4bit_quantized_matches_mlx_lm() {
    check_tiny_qwen3("qwen3-tiny-4bit", Hold::Quantized);
}

#[test]
fn qwen3_4bit_dense_matches_mlx_lm() {
    check_tiny_qwen3("qwen3-tiny-4bit", Hold::Dense);
}

#[test]
fn kv_cache_grows_in_steps_and_keeps_entries() {
    let _one = mlx_lock();
    let mut cache = KvCache::new();
    let step = |v: f32, len: i32| Array::full::<f32>(&[1, 2, len, 4], Array::from_f32(v)).unwrap();
    let (k, _) = cache
        .update_and_fetch(&step(1.0, 3), &step(1.0, 3))
        .unwrap();
    assert_eq!(k.shape(), &[1, 2, 3, 4]);
    for i in 0..300 {
        let (k, v) = cache
            .update_and_fetch(&step(i as f32, 1), &step(i as f32, 1))
            .unwrap();
        assert_eq!(k.shape()[2], 4 + i);
        assert_eq!(v.shape()[2], 4 + i);
    }
    assert_eq!(cache.offset, 303);
    let (k, _) = cache
        .update_and_fetch(&step(7.0, 1), &step(7.0, 1))
        .unwrap();
    // Earlier entries survive growing past one step of 256.
    let first = k.index((0, 0, 0, 0)).item_exact::<f32>();
    let at_299 = k.index((0, 0, 302, 0)).item_exact::<f32>();
    assert_eq!((first, at_299), (1.0, 299.0));
}
