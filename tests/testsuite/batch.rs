//! Batches through `quest::lm`: `forward` on `[B, L]` with one cache for all the rows,
//! against mlx-lm 0.32.2 doing the same (fixtures in tests/fixtures/batch/, made by
//! tests/peer/golden_batch.py), and each row against the same sequence decoded alone.
//! Greedy tokens must be identical; logits must agree within `TOLERANCE`.

use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::Array;
use quest::lm::random;
use quest::lm::{self, Hold, Model};
use serde_json::Value;

use crate::lm_helpers::{fixture, ids, max_abs_diff, measured, mlx_lock, read_json};

/// Largest allowed |logit difference| (logits span about ±30). A batch changes the
/// shape of every matrix product (four rows instead of one), and with it the kernel MLX
/// or the BLAS picks and the order it sums in. Measured 2026-12-01 across the six OpenBLAS
/// kernel families forced on one CPU (docs/cpu/2026-12-01-blas-spread/batch/spread.txt):
/// Qwen3.5 within 1.1e-5, SmolLM2 dense within 1.05e-4 (Nehalem kernels); SmolLM2 4-bit,
/// MLX's own kernels, within 8.1e-5 (OpenBLAS 0.3.31, the same day). 3e-4 is about three
/// times the largest; a wrong weight, row or position moves logits by whole units.
const TOLERANCE: f32 = 3e-4;

fn rows_of(v: &Value) -> Vec<Vec<u32>> {
    v.as_array().unwrap().iter().map(ids).collect()
}

/// The lesson's loop at batch B: one prefill of `prompts` (`[B, L]`), then `n - 1`
/// steps of `[B, 1]`. Returns every step's last-position logits (`[B][vocab]`, step 0 is
/// the prefill) and each row's tokens.
fn batch_greedy(model: &Model, prompts: &Array, n: usize) -> (Vec<Vec<Vec<f32>>>, Vec<Vec<u32>>) {
    let batch = prompts.shape()[0];
    let mut cache = lm::make_prompt_cache(model);
    let mut input = prompts.clone();
    let mut steps = Vec::new();
    let mut rows = vec![Vec::new(); batch as usize];
    for _ in 0..n {
        let logits = model.forward(&input, &mut cache).unwrap();
        // `[B, vocab]`, a strided view of the logits: copied to be read row by row.
        let last = lm::last_position(&logits).contiguous().unwrap();
        let vocab = last.shape()[1] as usize;
        steps.push(
            last.as_slice::<f32>()
                .chunks(vocab)
                .map(<[f32]>::to_vec)
                .collect(),
        );
        let y = argmax_axis(&last, -1, None).unwrap();
        for (row, &token) in rows.iter_mut().zip(y.as_slice::<u32>()) {
            row.push(token);
        }
        input = y.reshape(&[batch, 1]).unwrap();
    }
    (steps, rows)
}

/// Every case of the mlx-lm fixture that `model_prefix` names, on `model`.
fn check_cases(model: &Model, model_prefix: &str) {
    let g = read_json(&fixture("batch").join("golden.json"));
    let bytes = std::fs::read(fixture("batch").join("prefill_logits.f32")).unwrap();
    let all: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut offset = 0;
    let mut checked = 0;
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (rows, vocab) = (
            case["prefill_rows"].as_u64().unwrap() as usize,
            case["vocab"].as_u64().unwrap() as usize,
        );
        let expected_logits = &all[offset..offset + rows * vocab];
        offset += rows * vocab;
        if !name.starts_with(model_prefix) {
            continue;
        }
        let prompts = rows_of(&case["prompt_ids"]);
        let n = case["steps"].as_u64().unwrap() as usize;
        let (steps, tokens) = batch_greedy(model, &lm::tokens_rows(&prompts).unwrap(), n);
        assert_eq!(
            tokens,
            rows_of(&case["greedy_ids"]),
            "{name}: batched greedy tokens differ from mlx-lm's"
        );
        // mlx-lm's own batch-1 runs of each row's prompt give the same tokens.
        assert_eq!(
            tokens,
            rows_of(&case["single_greedy_ids"]),
            "{name}: a row differs from its prompt decoded alone"
        );
        for (row, expected) in expected_logits.chunks(vocab).enumerate() {
            let diff = measured(
                &format!("batch-{name}-row{row}"),
                max_abs_diff(&steps[0][row], expected),
            );
            assert!(
                diff < TOLERANCE,
                "{name} row {row}: prefill logits differ by {diff} (tolerance {TOLERANCE})"
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "no `{model_prefix}` case in the fixture");
    assert_eq!(
        offset,
        all.len(),
        "the fixture's logits are not all accounted for"
    );
}

#[test]
fn smollm2_batches_match_mlx_lm_dense() {
    let _one = mlx_lock();
    let (model, _) = lm::load_with(lm::DEFAULT_MODEL, Hold::Dense).unwrap();
    check_cases(&model, "smollm2");
}

/// The same against SmolLM2 held 4-bit, MLX's quantized kernels at batch 4: a minute on
/// two cores, so the full run's (the plain run checks batches on the dense model above).
#[test]
#[ignore = "a minute on two cores; run with --include-ignored"]
fn smollm2_batches_match_mlx_lm_quantized() {
    let _one = mlx_lock();
    let (model, _) = lm::load_with(lm::DEFAULT_MODEL, Hold::Quantized).unwrap();
    check_cases(&model, "smollm2");
}

#[test]
fn qwen3_5_batches_match_mlx_lm() {
    let _one = mlx_lock();
    let model = lm::load_model_dir_with(&fixture("qwen3_5-tiny-f32"), Hold::Auto).unwrap();
    check_cases(&model, "qwen3_5");
}

/// Two different prompts decoded together give, row by row, what each gives alone, at
/// every step (tokens equal, logits within `TOLERANCE`).
fn rows_decode_as_alone(model: &Model, prompts: &[Vec<u32>], n: usize) {
    let (batched, rows) = batch_greedy(model, &lm::tokens_rows(prompts).unwrap(), n);
    assert_ne!(
        rows[0], rows[1],
        "the two prompts should decode differently"
    );
    for (r, prompt) in prompts.iter().enumerate() {
        let (alone, tokens) = batch_greedy(model, &lm::tokens_array(prompt), n);
        assert_eq!(
            rows[r], tokens[0],
            "row {r}: tokens differ from its run alone"
        );
        for (step, (b, a)) in batched.iter().zip(&alone).enumerate() {
            let diff = max_abs_diff(&b[r], &a[0]);
            assert!(
                diff < TOLERANCE,
                "row {r}, step {step}: logits differ by {diff} from the run alone"
            );
        }
    }
}

/// A small Qwen3.5 of random weights (`quest::lm::random`): gated delta layers (the
/// recurrent state and the conv window, per row) and full attention (the KV cache, per
/// row).
#[test]
fn qwen3_5_rows_of_a_batch_decode_as_alone() {
    let _one = mlx_lock();
    let config = serde_json::json!({"model_type": "qwen3_5", "hidden_size": 64,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "vocab_size": 300, "rms_norm_eps": 1e-6,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "full_attention_interval": 2,
        "tie_word_embeddings": true});
    let model = random::model(&config, 7).unwrap();
    let prompts: Vec<Vec<u32>> = vec![
        random::prompt(9).iter().map(|t| t % 300).collect(),
        (0..9).map(|i| 250 - 13 * i).collect(),
    ];
    rows_decode_as_alone(&model, &prompts, 12);
}

/// Qwen3 (q/k norms, full attention; the tiny golden model), float32 and 4-bit.
#[test]
fn qwen3_rows_of_a_batch_decode_as_alone() {
    let _one = mlx_lock();
    let prompts = vec![
        vec![1, 17, 42, 99, 256, 300, 7, 511],
        vec![5, 400, 3, 77, 250, 1, 90, 12],
    ];
    for (dir, layout) in [
        ("qwen3-tiny-f32", Hold::Auto),
        ("qwen3-tiny-4bit", Hold::Quantized),
    ] {
        let model = lm::load_model_dir_with(&fixture(dir), layout).unwrap();
        rows_decode_as_alone(&model, &prompts, 12);
    }
}

/// A cache belongs to the batch its prefill started: a step with another batch is
/// refused with a message, not a shape error from deep inside MLX.
#[test]
fn a_step_of_another_batch_is_refused() {
    let _one = mlx_lock();
    let model = lm::load_model_dir_with(&fixture("qwen3-tiny-f32"), Hold::Auto).unwrap();
    let mut cache = lm::make_prompt_cache(&model);
    let prompts = lm::tokens_rows(&[vec![1, 2, 3], vec![4, 5, 6]]).unwrap();
    model.forward(&prompts, &mut cache).unwrap();
    let error = model
        .forward(&lm::tokens_array(&[7]), &mut cache)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("a batch of 1 but the cache holds 2 sequences"),
        "{error}"
    );
    let error = lm::tokens_rows(&[vec![1, 2], vec![3]])
        .unwrap_err()
        .to_string();
    assert!(error.contains("[2, 1]"), "{error}");
}

/// Continuous batching's rows (`lm::batching`): quest's trace, every request at once,
/// served by static batching (eight rows of different lengths left-padded to one width,
/// each turned at its own RoPE position, rows leaving as they finish) gives every request
/// exactly the greedy tokens it gets decoded alone.
#[test]
#[ignore = "decodes eight requests in a batch and each alone; run with --include-ignored"]
fn served_rows_decode_each_requests_greedy_tokens() {
    use quest::lm::batching::{self, Engine, Requests, Scheduler, StaticBatches};
    let _one = mlx_lock();
    let (model, tokenizer) = lm::load_with(lm::DEFAULT_MODEL, Hold::Dense).unwrap();
    let planned = batching::trace(
        batching::TRACE_REQUESTS,
        0.0,
        12,
        "What is the capital of France? Answer in one sentence.",
        batching::TRACE_SEED,
    );
    let prompts: Vec<Vec<u32>> = planned
        .iter()
        .map(|p| tokenizer.encode_user_prompt(&p.question).unwrap())
        .collect();
    let eos = tokenizer.eos_token_ids.clone();
    let engine = Engine::new(&model).unwrap();
    let mut requests = Requests::start(planned.clone(), prompts.clone(), eos.clone());
    StaticBatches.serve(&engine, &mut requests).unwrap();
    assert_eq!(requests.unfinished(), 0);
    for (p, got) in planned.iter().zip(requests.tokens()) {
        let mut cache = lm::make_prompt_cache(&model);
        let logits = model
            .forward(&lm::tokens_array(&prompts[p.id]), &mut cache)
            .unwrap();
        let mut alone = vec![lm::argmax_token(&lm::last_position(&logits)).unwrap()];
        while alone.len() < p.max_tokens && !eos.contains(alone.last().unwrap()) {
            let last = *alone.last().unwrap();
            alone.push(lm::greedy_next(&model, &mut cache, last).unwrap());
        }
        assert_eq!(got, &alone, "request {}", p.id);
    }
}
