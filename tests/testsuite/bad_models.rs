//! Bad input to `quest::lm`: each case is a clear error naming the file and what to do,
//! never a panic.

use std::path::{Path, PathBuf};

use quest::lm;

use crate::lm_helpers::mlx_lock;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quest-bad-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn error_of<T>(result: anyhow::Result<T>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

fn tiny_qwen3_copy(name: &str) -> PathBuf {
    let dir = temp(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3-tiny-f32");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(src.join(file), dir.join(file)).unwrap();
    }
    dir
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(config.as_object_mut().unwrap());
    std::fs::write(path, config.to_string()).unwrap();
}

#[test]
fn a_missing_model_says_what_was_tried() {
    let _one = mlx_lock();
    let message = error_of(lm::load("/nonexistent/model.gguf"));
    assert!(message.contains("/nonexistent/model.gguf"), "{message}");
    assert!(message.contains("not an existing file"), "{message}");
}

#[test]
fn a_corrupt_gguf_names_the_file() {
    let _one = mlx_lock();
    let file = temp("corrupt").join("broken.gguf");
    std::fs::write(
        &file,
        b"GGUF\x03\x00\x00\x00garbage that is not a gguf header",
    )
    .unwrap();
    let message = error_of(lm::load(file.to_str().unwrap()));
    assert!(
        message.contains("broken.gguf") && message.contains("corrupt"),
        "{message}"
    );
}

#[test]
fn a_truncated_safetensors_file_names_the_file() {
    let _one = mlx_lock();
    let dir = tiny_qwen3_copy("truncated");
    let weights = dir.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let message = error_of(lm::load_model_dir(&dir));
    assert!(
        message.contains("model.safetensors") && message.contains("corrupt"),
        "{message}"
    );
}

#[test]
fn an_unknown_architecture_lists_the_supported_ones() {
    let _one = mlx_lock();
    let dir = tiny_qwen3_copy("arch");
    edit_config(&dir, |c| {
        c.insert("model_type".into(), "gpt9".into());
    });
    let message = error_of(lm::load_model_dir(&dir));
    assert!(
        message.contains("`gpt9`") && message.contains("llama, qwen3"),
        "{message}"
    );
}

#[test]
fn a_config_without_a_needed_key_names_it() {
    let _one = mlx_lock();
    let dir = tiny_qwen3_copy("key");
    edit_config(&dir, |c| {
        c.remove("hidden_size");
    });
    let message = error_of(lm::load_model_dir(&dir));
    assert!(
        message.contains("hidden_size") && message.contains(dir.to_str().unwrap()),
        "{message}"
    );
}

#[test]
fn a_missing_tensor_names_it_and_the_file() {
    let _one = mlx_lock();
    let dir = tiny_qwen3_copy("layers");
    edit_config(&dir, |c| {
        c.insert("num_hidden_layers".into(), 3.into());
    });
    let message = error_of(lm::load_model_dir(&dir));
    assert!(message.contains("model.layers.2."), "{message}");
}

/// A one-tensor GGUF v3 file whose 256-element tensor has ggml type `ty`
/// (12 = Q4_K, which MLX cannot load; 2 = Q4_0, which it can).
fn gguf_with_type(ty: u32) -> Vec<u8> {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(1u64.to_le_bytes()); // tensors
    out.extend(1u64.to_le_bytes()); // metadata entries
    string(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes()); // string
    string(&mut out, "llama");
    string(&mut out, "blk.0.attn_q.weight");
    out.extend(2u32.to_le_bytes());
    out.extend(256u64.to_le_bytes());
    out.extend(1u64.to_le_bytes());
    out.extend(ty.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    while out.len() % 32 != 0 {
        out.push(0);
    }
    out.extend([0u8; 144]); // one Q4_K block, or eight Q4_0 blocks
    out
}

#[test]
fn an_unsupported_gguf_quant_type_says_which_are_supported() {
    let _one = mlx_lock();
    let file = temp("q4k").join("q4k.gguf");
    std::fs::write(&file, gguf_with_type(12)).unwrap();
    let message = error_of(lm::load(file.to_str().unwrap()));
    assert!(
        message.contains("q4k.gguf") && message.contains("Q4_0, Q4_1, Q8_0"),
        "{message}"
    );
}

#[test]
fn a_truncated_gguf_is_caught_before_mlx_reads_it() {
    let _one = mlx_lock();
    let file = temp("cut").join("cut.gguf");
    let mut bytes = gguf_with_type(2);
    bytes.truncate(bytes.len() - 100);
    std::fs::write(&file, bytes).unwrap();
    let message = error_of(lm::load(file.to_str().unwrap()));
    assert!(
        message.contains("cut.gguf") && message.contains("past the end"),
        "{message}"
    );
}
