//! What the in-process model tests share (golden, qwen3_5, batch, bits, slope, bad_models):
//! one lock for MLX work, the fixtures, reading their JSON, comparing logits, and the
//! lessons' greedy loop.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use mlx_rs::ops::indexing::argmax_axis;
use quest::lm::{self, Model};
use serde_json::Value;

/// MLX work stays on one thread at a time (a stream belongs to its thread): one lock for
/// every module of this test binary, not one each.
static MLX: Mutex<()> = Mutex::new(());

/// Holds the MLX lock until dropped; a test that panicked while holding it does not block
/// the others.
pub fn mlx_lock() -> MutexGuard<'static, ()> {
    MLX.lock().unwrap_or_else(|e| e.into_inner())
}

/// `tests/fixtures/<dir>`.
pub fn fixture(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A JSON array of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Prints a golden comparison's measured difference as one line (`golden-diff: NAME D`),
/// which docs/cpu/blas_spread.sh collects across OpenBLAS's kernel families to set the
/// tolerances from.
pub fn measured(name: &str, diff: f32) -> f32 {
    println!("golden-diff: {name} {diff:e}");
    diff
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "vocab sizes differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The lessons' loop: prefill, then greedy one token at a time with the cache. Returns each
/// step's last-position logits (step 0 is the prefill) and the `n` tokens.
pub fn greedy(model: &Model, prompt: &[u32], n: usize) -> (Vec<Vec<f32>>, Vec<u32>) {
    let mut cache = lm::make_prompt_cache(model);
    let mut input = lm::tokens_array(prompt);
    let (mut steps, mut tokens) = (Vec::new(), Vec::new());
    while tokens.len() < n {
        let logits = model.forward(&input, &mut cache).unwrap();
        let last = lm::last_position(&logits);
        steps.push(last.as_slice::<f32>().to_vec());
        let y = argmax_axis(&last, -1, None).unwrap();
        tokens.push(y.item_exact::<u32>());
        input = y.reshape(&[1, 1]).unwrap();
    }
    (steps, tokens)
}
