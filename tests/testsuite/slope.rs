//! `quest slope`, tiny: the CLI prints the table and the slope and writes JSON; in-process,
//! tiny random models of both layouts hold what the lesson says they hold — KV bytes that
//! grow with the context, a recurrent state that does not — whether the context was
//! prefilled or filled at random.

use quest::bench::slope::{self, Fill, SlopeOptions};
use quest::lm::random::PublicShape;
use serde_json::{json, Value};

#[test]
fn slope_prints_the_table_and_the_slope_and_writes_json() {
    let root = tempfile::tempdir().unwrap();
    let out = crate::common::quest_command()
        .args(["slope", "--shapes", "SmolLM2-135M", "--contexts", "2,8"])
        .args(["--max-tokens", "2", "--rounds", "1"])
        .env("QUEST_ROOT", root.path())
        .env("QUEST_HOME", root.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ms/token") && stdout.contains("KV MB"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ms per 1k ctx") && stdout.contains("30 of 30"),
        "{stdout}"
    );
    let rows = stdout
        .lines()
        .filter(|l| l.starts_with("SmolLM2-135M"))
        .count();
    assert_eq!(rows, 3, "two contexts and the slope row:\n{stdout}");

    let backend = quest::device::Backend::detect().name();
    let path = root
        .path()
        .join(format!("target/quest-bench/slope-{backend}.json"));
    let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let shape = &json["shapes"][0];
    assert_eq!(shape["points"].as_array().unwrap().len(), 2);
    assert!(shape["points"][0]["tok_s"].as_f64().unwrap() > 0.0);
    assert!(shape["ms_per_1k_context"].as_f64().unwrap().is_finite());
}

#[test]
fn bad_arguments_are_refused_before_any_work() {
    for (args, message) in [
        (["--contexts", "0"], "not a context length"),
        (["--shapes", "GPT-5"], "unknown shape `GPT-5`"),
    ] {
        let out = crate::common::quest_command()
            .arg("slope")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{stderr}"
        );
    }
}

/// A Qwen3.5 layout small enough to build in a blink: 4 layers, the 2nd and 4th with attention.
fn tiny_hybrid() -> Value {
    json!({"model_type": "qwen3_5", "hidden_size": 64, "num_hidden_layers": 4,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
           "intermediate_size": 128, "vocab_size": 1024, "rms_norm_eps": 1e-6,
           "linear_num_key_heads": 2, "linear_num_value_heads": 2,
           "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
           "full_attention_interval": 2, "tie_word_embeddings": true})
}

fn tiny_attention() -> Value {
    json!({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4,
           "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 128,
           "vocab_size": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": true})
}

static TINY_HYBRID: PublicShape = PublicShape {
    name: "tiny-hybrid",
    config: tiny_hybrid,
};
static TINY_ATTENTION: PublicShape = PublicShape {
    name: "tiny-attention",
    config: tiny_attention,
};

#[test]
fn kv_bytes_grow_with_the_context_and_the_state_does_not() {
    let _one = crate::lm_helpers::mlx_lock();
    let mut tables = Vec::new();
    for fill in [Fill::Prefill, Fill::Random] {
        let options = SlopeOptions {
            shapes: vec![&TINY_ATTENTION, &TINY_HYBRID],
            fill,
            contexts: vec![1, 7, 300],
            max_tokens: 2,
            rounds: 2,
        };
        let result = slope::run(&options, 10.0, |_| {}).unwrap();
        let [attention, hybrid] = &result.shapes[..] else {
            panic!("two shapes")
        };
        assert_eq!((attention.attention_layers, attention.layers), (4, 4));
        assert_eq!((hybrid.attention_layers, hybrid.layers), (2, 4));
        // The same KV heads in half as many attention layers: half the bytes per position.
        assert!(attention.cache.kv_per_position > 0);
        assert_eq!(
            hybrid.cache.kv_per_position * 2,
            attention.cache.kv_per_position
        );
        assert_eq!(attention.cache.state, 0);
        assert!(hybrid.cache.state > 0);
        for s in [attention, hybrid] {
            for p in &s.points {
                assert_eq!(p.kv_bytes as usize, s.cache.kv_per_position * p.context);
                assert_eq!(p.state_bytes as usize, s.cache.state);
                assert_eq!(p.runs.len(), 2);
                assert!(p
                    .runs
                    .iter()
                    .all(|r| r.tokens.len() == 3 && r.decode_tok_s > 0.0));
            }
            assert!(s.ms_per_1k_context.is_finite() && s.intercept_ms.is_finite());
        }
        tables.push(result.table());
    }
    assert!(tables[0].contains("prefill s") && !tables[1].contains("prefill s"));
}
