//! `quest slope`: decode speed as the context grows. A full-attention layer reads the keys
//! and values of every earlier token, so each token of context adds bytes (and work) to
//! every later decode step: ms per token rises along a line, the *context slope*. A gated
//! delta layer (Qwen3.5's linear attention) reads a fixed-size state instead, so a hybrid
//! model pays the slope only in its full-attention layers.
//!
//! For each random-weights shape and context length: prefill that many tokens (in chunks,
//! as mlx-lm does), then decode with the pipelined loop from the filled cache, several
//! rounds from the same cache; a least-squares line through (context, ms per token) gives
//! the slope.

use std::time::Instant;

use anyhow::{ensure, Result};
use mlx_rs::transforms::eval;
use mlx_rs::Array;
use serde::Serialize;

use super::{loops, CacheBytes, Measured};
use crate::lm::random;
use crate::lm::{self, LayerCache, Model};
use crate::stats::{least_squares, median};

/// Prompt tokens per prefill forward pass (the caches are evaluated between chunks).
const PREFILL_CHUNK: usize = 256;

/// How the cache gets its context before the timed decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// Prefill the prompt through the model, in chunks, as mlx-lm does.
    Prefill,
    /// One real token (it sets up the fixed-size state), then random keys and values for
    /// the rest of the context: the same bytes and shapes to decode after, at no prefill
    /// cost (MLX's CPU backend prefills a 4-bit model barely faster than it decodes).
    Random,
}

pub struct SlopeOptions {
    pub shapes: Vec<&'static random::PublicShape>,
    pub fill: Fill,
    /// Prompt lengths to decode after.
    pub contexts: Vec<usize>,
    /// Decode steps timed per round.
    pub max_tokens: usize,
    pub rounds: usize,
}

/// One shape at one context length.
#[derive(Debug, Serialize)]
pub struct ContextPoint {
    /// Tokens in the cache when the timed decode starts.
    pub context: usize,
    pub prefill_ms: f64,
    /// Median over the rounds.
    pub tok_s: f64,
    /// KV bytes the attention layers read per decode step here (grows with the context).
    pub kv_bytes: u64,
    /// Recurrent-state bytes the gated delta layers read per step (fixed).
    pub state_bytes: u64,
    pub runs: Vec<Measured>,
}

impl ContextPoint {
    pub fn ms_per_token(&self) -> f64 {
        1e3 / self.tok_s
    }
}

/// One shape's decode measured at each context length, and the line fitted through it.
#[derive(Debug, Serialize)]
pub struct FittedSlope {
    pub shape: String,
    pub model_type: String,
    pub layers: usize,
    /// Layers with full attention (a KV cache); the rest keep a fixed-size state.
    pub attention_layers: usize,
    pub weight_bytes: u64,
    pub cache: CacheBytes,
    pub points: Vec<ContextPoint>,
    /// The line's value at context 0, ms per token.
    pub intercept_ms: f64,
    /// The line's slope: extra ms per token for every 1000 tokens of context.
    pub ms_per_1k_context: f64,
}

impl FittedSlope {
    /// The slope the KV bytes alone would give, if they streamed at `gb_s`.
    pub fn bytes_ms_per_1k(&self, gb_s: f64) -> f64 {
        (self.cache.kv_per_position * 1000) as f64 / (gb_s * 1e6)
    }
}

#[derive(Debug, Serialize)]
pub struct Slope {
    pub backend: crate::device::Backend,
    pub fill: Fill,
    pub max_tokens: usize,
    pub rounds: usize,
    /// The measured bandwidth (`rates::bandwidth`), for what the KV bytes alone would cost.
    pub bandwidth_gb_s: f64,
    pub shapes: Vec<FittedSlope>,
    pub date: String,
}

pub fn run(
    options: &SlopeOptions,
    bandwidth_gb_s: f64,
    mut progress: impl FnMut(&str),
) -> Result<Slope> {
    ensure!(
        !options.contexts.is_empty(),
        "no context lengths to measure"
    );
    ensure!(
        options.contexts.iter().all(|&c| c > 0),
        "context lengths must be at least 1"
    );
    let mut shapes = Vec::new();
    for shape in &options.shapes {
        progress(&format!("{}: making random 4-bit weights…", shape.name));
        let config = (shape.config)();
        let model = super::warmed(random::model(&config, 0)?)?;
        let cache = super::cache_bytes(&model)?;
        let kinds = lm::make_prompt_cache(&model);
        let attention_layers = kinds
            .iter()
            .filter(|c| matches!(c, LayerCache::Kv(_)))
            .count();
        loops::pipelined(&model, &random::prompt(2), 2)?; // warm-up
        let mut points = Vec::new();
        for &context in &options.contexts {
            let point = measure(&model, context, options)?;
            progress(&format!(
                "{} at {context} tokens: prefill {:.1} s, {:.2} tok/s ({:.0} ms/token), KV {:.1} MB + state {:.1} MB",
                shape.name,
                point.prefill_ms / 1e3,
                point.tok_s,
                point.ms_per_token(),
                point.kv_bytes as f64 / 1e6,
                point.state_bytes as f64 / 1e6
            ));
            points.push(point);
        }
        let (intercept_ms, ms_per_1k_context) = line(&points);
        shapes.push(FittedSlope {
            shape: shape.name.into(),
            model_type: config["model_type"].as_str().unwrap_or_default().into(),
            layers: model.num_layers(),
            attention_layers,
            weight_bytes: model.weight_bytes() as u64,
            cache,
            points,
            intercept_ms,
            ms_per_1k_context,
        });
    }
    Ok(Slope {
        backend: crate::device::Backend::detect(),
        fill: options.fill,
        max_tokens: options.max_tokens,
        rounds: options.rounds,
        bandwidth_gb_s,
        shapes,
        date: crate::progress::Timestamp::now().to_string(),
    })
}

/// The least-squares line through (context, ms per token): its value at context 0 in ms
/// per token, and its slope in ms per token for every 1000 tokens of context.
fn line(points: &[ContextPoint]) -> (f64, f64) {
    let (intercept_ms, ms_per_context) = least_squares(
        &points
            .iter()
            .map(|p| (p.context as f64, p.ms_per_token()))
            .collect::<Vec<_>>(),
    );
    (intercept_ms, ms_per_context * 1e3)
}

/// Prefills `context` tokens once, then decodes `max_tokens` per round from a copy of the
/// filled cache.
fn measure(model: &Model, context: usize, options: &SlopeOptions) -> Result<ContextPoint> {
    let prompt = random::prompt(context);
    let mut filled = lm::make_prompt_cache(model);
    let start = Instant::now();
    let last = match options.fill {
        Fill::Prefill => prefill(model, &prompt, &mut filled)?,
        Fill::Random => fill_random(model, &prompt, &mut filled)?,
    };
    let prefill_ms = start.elapsed().as_secs_f64() * 1e3;

    let (mut runs, mut held) = (Vec::new(), (0, 0));
    for _ in 0..options.rounds.max(1) {
        let mut cache = filled.clone();
        // The last prompt token, untimed: its step makes this round's own copy of the
        // shared cache (and grows the KV buffers when the prompt filled them exactly).
        let y = loops::next_token(model, &lm::tokens_array(&[last]), &mut cache)?;
        eval_with_cache(&y, &cache)?;
        held = super::held_bytes(&cache); // `context` positions now
        let start = Instant::now();
        let (tokens, first) = loops::pipelined_from(model, &mut cache, y, options.max_tokens + 1)?;
        runs.push(loops::measured(start, first, tokens, Vec::new()));
    }
    let tok_s = median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
    Ok(ContextPoint {
        context,
        prefill_ms,
        tok_s,
        kv_bytes: held.0 as u64,
        state_bytes: held.1 as u64,
        runs,
    })
}

/// Runs all but the last prompt token through the model in chunks, evaluating the caches
/// after each (the logits are never needed); returns the last token, left for the decode.
fn prefill(model: &Model, prompt: &[u32], cache: &mut [LayerCache]) -> Result<u32> {
    let (&last, head) = prompt.split_last().expect("a prompt of at least one token");
    for chunk in head.chunks(PREFILL_CHUNK) {
        model.forward(&lm::tokens_array(chunk), cache)?;
        eval(cache.iter().flat_map(|c| c.state()))?;
    }
    Ok(last)
}

/// The first prompt token through the model (the recurrent state now has its one, fixed
/// size), then random keys and values for all but the last token into every KV cache;
/// returns the last token, left for the decode.
fn fill_random(model: &Model, prompt: &[u32], cache: &mut [LayerCache]) -> Result<u32> {
    let (&last, head) = prompt.split_last().expect("a prompt of at least one token");
    let Some((&first, rest)) = head.split_first() else {
        return Ok(last);
    };
    model.forward(&lm::tokens_array(&[first]), cache)?;
    eval(cache.iter().flat_map(|c| c.state()))?;
    let len = rest.len() as i32;
    for layer in cache.iter_mut() {
        let LayerCache::Kv(kv) = layer else { continue };
        if len == 0 {
            break;
        }
        let (keys, values) = {
            let mut held = kv.state();
            let (k, v) = (held.next().unwrap(), held.next().unwrap());
            let random = |like: &Array| -> Result<Array> {
                let s = like.shape();
                let shape = [s[0], s[1], len, s[3]];
                Ok(mlx_rs::random::normal::<f32>(&shape[..], None, None, None)?
                    .as_dtype(like.dtype())?)
            };
            (random(k)?, random(v)?)
        };
        kv.update_and_fetch(&keys, &values)?;
        eval(kv.state())?;
    }
    Ok(last)
}

fn eval_with_cache(y: &Array, cache: &[LayerCache]) -> Result<()> {
    eval(std::iter::once(y).chain(cache.iter().flat_map(|c| c.state())))?;
    Ok(())
}

impl Slope {
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:>8} {:>8} {:>10} {:>11} {:>9} {:>9} {:>10}\n",
            "shape",
            "context",
            "tok/s",
            "ms/token",
            "weights MB",
            "KV MB",
            "state MB",
            if self.fill == Fill::Prefill {
                "prefill s"
            } else {
                "fill s"
            }
        );
        for s in &self.shapes {
            for p in &s.points {
                out += &format!(
                    "{:<14} {:>8} {:>8.2} {:>10.1} {:>11.1} {:>9.1} {:>9.1} {:>10.1}\n",
                    s.shape,
                    p.context,
                    p.tok_s,
                    p.ms_per_token(),
                    s.weight_bytes as f64 / 1e6,
                    p.kv_bytes as f64 / 1e6,
                    p.state_bytes as f64 / 1e6,
                    p.prefill_ms / 1e3
                );
            }
        }
        out += &format!(
            "\n{:<14} {:>10} {:>14} {:>13} {:>15} {:>14}\n",
            "slope", "attention", "KV MB per 1k", "ms/token @0", "ms per 1k ctx", "bytes alone"
        );
        for s in &self.shapes {
            out += &format!(
                "{:<14} {:>10} {:>14.1} {:>13.1} {:>15} {:>14}\n",
                s.shape,
                format!("{} of {}", s.attention_layers, s.layers),
                (s.cache.kv_per_position * 1000) as f64 / 1e6,
                s.intercept_ms,
                format!(
                    "{:+.1} ({:+.1}%)",
                    s.ms_per_1k_context,
                    100.0 * s.ms_per_1k_context / s.intercept_ms
                ),
                format!("{:+.1}", s.bytes_ms_per_1k(self.bandwidth_gb_s))
            );
        }
        out += &format!(
            "\nms per 1k ctx: least-squares slope of ms/token over the contexts, {} tokens × {} rounds (median) each;\n\
             bytes alone: the KV bytes of 1000 more tokens at the measured bandwidth ({:.1} GB/s).\n\
             (random weights{}: decode speed depends on shapes and bytes, not on the values)\n",
            self.max_tokens,
            self.rounds,
            self.bandwidth_gb_s,
            if self.fill == Fill::Random { " and random keys and values for the context" } else { "" }
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points at `(context, ms per token)`.
    fn points(ms: &[(usize, f64)]) -> Vec<ContextPoint> {
        ms.iter()
            .map(|&(context, ms)| ContextPoint {
                context,
                prefill_ms: 0.0,
                tok_s: 1e3 / ms,
                kv_bytes: 0,
                state_bytes: 0,
                runs: vec![],
            })
            .collect()
    }

    fn shape(kv_per_position: usize, ms: &[(usize, f64)]) -> FittedSlope {
        FittedSlope {
            shape: "test".into(),
            model_type: "llama".into(),
            layers: 2,
            attention_layers: 2,
            weight_bytes: 1,
            cache: CacheBytes {
                kv_per_position,
                state: 0,
            },
            points: points(ms),
            intercept_ms: 100.0,
            ms_per_1k_context: 10.0,
        }
    }

    #[test]
    fn the_slope_is_ms_per_thousand_tokens_of_context() {
        // By hand: x = 0, 1000, 2000 (mean 1000); y = 100, 112, 120 ms (mean 332/3).
        // Sxy = (-1000)(-32/3) + 0 + (1000)(28/3) = 20000; Sxx = 2e6; slope = 0.01 ms per
        // token of context = 10 ms per 1000; intercept = 332/3 - 0.01 * 1000 = 302/3 ms.
        let (intercept_ms, ms_per_1k) = line(&points(&[(0, 100.0), (1000, 112.0), (2000, 120.0)]));
        assert!((ms_per_1k - 10.0).abs() < 1e-9, "{ms_per_1k}");
        assert!((intercept_ms - 302.0 / 3.0).abs() < 1e-9, "{intercept_ms}");
        // Read from tok/s, as measured: 5 tok/s at 0 and 4 tok/s at 4000 tokens are 200 and
        // 250 ms per token, +12.5 ms per 1000 tokens.
        let (intercept_ms, ms_per_1k) = line(&points(&[(0, 200.0), (4000, 250.0)]));
        assert!((ms_per_1k - 12.5).abs() < 1e-9 && (intercept_ms - 200.0).abs() < 1e-9);
        // 1 MB per 1000 tokens at 1 GB/s: 1 ms.
        assert!((shape(1000, &[]).bytes_ms_per_1k(1.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_table_names_every_shape_and_context() {
        let slope = Slope {
            backend: crate::device::Backend::Cpu,
            fill: Fill::Random,
            max_tokens: 2,
            rounds: 1,
            bandwidth_gb_s: 10.0,
            shapes: vec![shape(1000, &[(64, 100.0), (256, 111.0)])],
            date: String::new(),
        };
        let table = slope.table();
        assert!(
            table.contains("ms per 1k ctx") && table.contains("2 of 2"),
            "{table}"
        );
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("test") && l.contains(" 256 ")),
            "{table}"
        );
    }
}
