//! The piece check: the learner's piece against quest's own (MLX's op) on random tensors
//! of the shapes that matter, in the exercise's process, before any decode: seconds, and
//! no model. quest asks for it on its line ([`crate::line::Hello::check`]); the exercise
//! answers with a [`Verdict`] (`checked <json>`) and, when quest asked for the check
//! alone, ends there.
//!
//! Each piece's shapes are a table below ([`cases`]): one row is one call, named by what
//! it varies (the sequence length and a cached prefix, the heads' grouping, the rotated
//! channels and the layout, the quantization group, the dtype). A row is right when the
//! learner's output has the reference's shape and every value is within the dtype's
//! tolerance of it, relative to the reference's largest magnitude; and only when quest's
//! own implementation of the piece did not run inside the learner's (a trait default, or
//! quest's pieces called from it).

use std::panic::{catch_unwind, AssertUnwindSafe};

use anyhow::Result;
use mlx_rs::ops::{abs, max, subtract};
use mlx_rs::{Array, Dtype};
use serde::{Deserialize, Serialize};

use crate::course::spec::Piece;
use crate::lm::graph::Seen;
use crate::lm::pieces::{quest_runs, Mask, MlpLayers, Pieces, QuestPieces};
use crate::lm::sample::{Sampler, Sampling};

/// What the piece check found, one row per shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub piece: Piece,
    pub rows: Vec<Row>,
    /// Attention in blocks: the most memory one long decode query's attention held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peaks: Option<ScoresPeak>,
}

/// The most memory MLX held while one decode query's attention over `keys` keys was
/// computed (float32, Qwen3-8B's heads), above what it held before: MLX's attention in one
/// call, and the learner's blocks. Read by quest's code around each call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoresPeak {
    pub keys: i32,
    pub one_call_bytes: u64,
    pub blocks_bytes: u64,
}

/// One shape of the check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What the call was, e.g. `x [1, 9, 1, 64] · dims 64 · split-half · offset 17 · float16`.
    pub shape: String,
    pub found: Found,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Found {
    /// Within the tolerance: the largest difference, relative to the reference's largest
    /// magnitude.
    Right { difference: f32 },
    /// Beyond it.
    Wrong { difference: f32, allowed: f32 },
    /// The output's shape is not the reference's.
    WrongShape { got: Vec<i32>, want: Vec<i32> },
    /// quest's own implementation ran inside the learner's: the result is not theirs.
    QuestRan,
    /// One of MLX's fused ops that the piece replaces computed the output, read off its
    /// graph (`evaluated`: an array it computed was evaluated inside the piece).
    Fused {
        op: crate::lm::graph::Fused,
        #[serde(default)]
        evaluated: bool,
    },
    /// The output came back already evaluated: what computed it is not in the graph.
    Evaluated,
    /// Tokens where the reference decodes others (`want`): a speculative decoder's kept
    /// tokens and the step after them.
    OtherTokens { got: Vec<u32>, want: Vec<u32> },
    /// The piece is still `todo!()` / `unimplemented!()`.
    NotWritten { message: String },
    /// It returned an error or panicked.
    Failed { message: String },
}

impl Found {
    pub fn is_right(&self) -> bool {
        matches!(self, Found::Right { .. })
    }
}

impl Verdict {
    pub fn right(&self) -> usize {
        self.rows.iter().filter(|row| row.found.is_right()).count()
    }

    pub fn passed(&self) -> bool {
        !self.rows.is_empty() && self.right() == self.rows.len()
    }

    /// The first row that is not right.
    pub fn first_wrong(&self) -> Option<&Row> {
        self.rows.iter().find(|row| !row.found.is_right())
    }

    /// Whether the piece is not written yet at all (every row `todo!()`).
    pub fn not_written(&self) -> bool {
        !self.rows.is_empty()
            && self
                .rows
                .iter()
                .all(|row| matches!(row.found, Found::NotWritten { .. }))
    }
}

/// The largest difference allowed, relative to the reference's largest magnitude.
/// Measured with every lesson's solution (by MLX's ops) against MLX's fused ops on these
/// shapes, on the CPU (`quest dev check`'s notes, docs/lessons/pieces/2026-12-06-piece-check):
/// float32 differs by 8.0e-7 at most, float16 by 1.1e-2 (dequant-matvec: its weights
/// dequantized in half precision before the product); 1e-4 and 5e-2 are over a hundred and
/// four and a half times those, and the wrong pieces of the tests differ by 0.1 or more.
/// On a GPU MLX multiplies float32 matrices in TF32 where the hardware has it
/// (`MLX_ENABLE_TF32`, on by default): ten bits of mantissa, as float16's. There a learner's
/// product (attention's `q·kᵀ`, a dequantized matmul) rounds where MLX's fused op does not:
/// on an H100 honest pieces differed by 3.9e-4 at most
/// (docs/gpu/2026-12-06-pieces-with-kernels/), so float32 allows 4e-3 there, ten times that.
pub fn tolerance(dtype: Dtype) -> f32 {
    let gpu = crate::device::Backend::detect().kind() == crate::device::BackendKind::Gpu;
    match dtype {
        Dtype::Float32 if gpu => 4e-3,
        Dtype::Float32 => 1e-4,
        _ => 5e-2,
    }
}

/// quest asked for the piece check on its line: run it on `pieces`, send the verdict, and
/// end the process when quest asked for the check alone. Nothing otherwise.
pub(crate) fn when_asked(pieces: &dyn Pieces) {
    if ANSWERED.get() {
        return;
    }
    if let Some((piece, alone)) = crate::line::piece_check() {
        if !matches!(
            piece,
            Piece::Sample
                | Piece::KvCache
                | Piece::Speculate
                | Piece::Prefill
                | Piece::Batching
                | Piece::Server
        ) {
            answer(check(piece, pieces), alone);
        }
    }
}

/// [`when_asked`] for a sampler.
pub(crate) fn when_asked_sampler(sampler: &dyn Sampler) {
    if let Some((Piece::Sample, alone)) = crate::line::piece_check() {
        answer(check_sampler(sampler), alone);
    }
}

thread_local! {
    // One verdict a process: a piece checked its own way (attention in blocks) before the
    // model was handed it is not checked again by the model's seam.
    static ANSWERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub(crate) fn answer(verdict: Verdict, alone: bool) {
    ANSWERED.set(true);
    let json = serde_json::to_string(&verdict).unwrap_or_default();
    crate::line::send(&format!("checked {json}"));
    if alone {
        crate::line::send("end");
        std::process::exit(0);
    }
}

/// One call of a piece: its inputs from a seed, quest's output, the learner's.
struct Case {
    shape: String,
    dtype: Dtype,
    call: Call,
}

/// One call of a piece on its inputs (the same inputs for quest's and the learner's).
type Call = Box<dyn Fn(&dyn Pieces) -> Result<Array>>;

/// Runs every shape of `piece` on `pieces` against quest's own.
pub fn check(piece: Piece, pieces: &dyn Pieces) -> Verdict {
    let rows = cases(piece)
        .into_iter()
        .map(|case| Row {
            shape: case.shape.clone(),
            found: run_case(piece, &case, pieces),
        })
        .collect();
    Verdict {
        piece,
        rows,
        peaks: None,
    }
}

/// Attention computed in blocks ([`crate::lm::blocks`]): attention's shapes through
/// `small` (blocks of 4 keys: several a call, the last one short), then one decode query
/// of Qwen3-8B's heads (32 query heads, 8 key heads, 128 wide) over caches of 1000, 4096
/// and 16384 keys through `large` (blocks of `size`).
pub(crate) fn check_in_blocks(small: &dyn Pieces, large: &dyn Pieces, size: i32) -> Verdict {
    let piece = Piece::Attention;
    let mut rows: Vec<Row> = cases(piece)
        .into_iter()
        .map(|case| Row {
            shape: format!("{} · blocks of 4", case.shape),
            found: run_case(piece, &case, small),
        })
        .collect();
    let mut seed = 1000 * piece as u64 + 500;
    let mut peaks = None;
    for context in [1000, 4096, 16384] {
        for dtype in BOTH {
            seed += 1;
            let s = seed;
            let (heads, kv_heads, d) = LONG_HEADS;
            let case = Case {
                shape: format!(
                    "q [1, {heads}, 1, {d}] · k, v [1, {kv_heads}, {context}, {d}] · blocks of {size} · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| long_query(s, context, dtype)?.attend(p)),
            };
            let found = run_case(piece, &case, large);
            if context == 16384 && dtype == Dtype::Float32 && found.is_right() {
                peaks = scores_peak(large, s, context).ok();
            }
            rows.push(Row {
                shape: case.shape.clone(),
                found,
            });
        }
    }
    Verdict { piece, rows, peaks }
}

/// Qwen3-8B's attention heads: 32 query heads, 8 key heads, 128 wide.
const LONG_HEADS: (i32, i32, i32) = (32, 8, 128);

/// One decode query of [`LONG_HEADS`] over a cache of keys and values.
struct LongQuery {
    q: Array,
    k: Array,
    v: Array,
}

/// The query of [`check_in_blocks`]' long rows over `keys` keys, from `seed`.
fn long_query(seed: u64, keys: i32, dtype: Dtype) -> Result<LongQuery> {
    let (heads, kv_heads, d) = LONG_HEADS;
    Ok(LongQuery {
        q: random(&[1, heads, 1, d], seed, dtype)?,
        k: random(&[1, kv_heads, keys, d], seed + 7, dtype)?,
        v: random(&[1, kv_heads, keys, d], seed + 13, dtype)?,
    })
}

impl LongQuery {
    /// `pieces`' attention of the query over the cache, as the model calls it.
    fn attend(&self, pieces: &dyn Pieces) -> Result<Array> {
        let scale = 1.0 / (LONG_HEADS.2 as f32).sqrt();
        pieces.attention(&self.q, &self.k, &self.v, scale, Some(Mask::Causal))
    }
}

/// [`ScoresPeak`] of the long rows' query over `keys` keys (float32, from `seed`): the
/// inputs made and evaluated first, then each call evaluated alone.
fn scores_peak(blocks: &dyn Pieces, seed: u64, keys: i32) -> Result<ScoresPeak> {
    let query = long_query(seed, keys, Dtype::Float32)?;
    mlx_rs::transforms::eval([&query.q, &query.k, &query.v])?;
    let peak = |pieces: &dyn Pieces| -> Result<u64> {
        let before = mlx_rs::memory::active_memory()?;
        mlx_rs::memory::reset_peak_memory()?;
        query.attend(pieces)?.eval()?;
        Ok(mlx_rs::memory::peak_memory()?.saturating_sub(before) as u64)
    };
    Ok(ScoresPeak {
        keys,
        one_call_bytes: peak(&QuestPieces)?,
        blocks_bytes: peak(blocks)?,
    })
}

fn run_case(piece: Piece, case: &Case, pieces: &dyn Pieces) -> Found {
    let want = match (case.call)(&QuestPieces).and_then(|a| Ok(a.as_dtype(Dtype::Float32)?)) {
        Ok(want) => want,
        Err(e) => {
            return Found::Failed {
                message: format!("quest's own {piece} failed here: {e:#}"),
            }
        }
    };
    judge(
        piece,
        &want,
        || (case.call)(pieces),
        |got, want| compare(got, want, tolerance(case.dtype)),
    )
}

/// The learner's `piece` (`learner`) against quest's `want`: what it is as long as quest's
/// own did not run inside it, its graph holds none of MLX's fused ops that the piece
/// replaces ([`crate::lm::graph`]) and it has `want`'s shape, and then as `compare` says.
fn judge(
    piece: Piece,
    want: &Array,
    learner: impl FnOnce() -> Result<Array>,
    compare: impl FnOnce(&Array, &Array) -> Found,
) -> Found {
    let before = quest_runs(piece);
    let got = quietly(learner);
    if quest_runs(piece) != before {
        return Found::QuestRan;
    }
    let got = match got {
        Ok(got) => got,
        Err(found) => return found,
    };
    // The graph, not the source: what computed the output, whatever the code spells.
    match crate::lm::graph::seen(piece, &got, &[]) {
        Ok(Seen::Plain) => {}
        Ok(Seen::Fused { op, evaluated }) => return Found::Fused { op, evaluated },
        Ok(Seen::Evaluated) => return Found::Evaluated,
        Err(e) => {
            return Found::Failed {
                message: format!("{e:#}"),
            }
        }
    }
    if got.shape() != want.shape() {
        return Found::WrongShape {
            got: got.shape().to_vec(),
            want: want.shape().to_vec(),
        };
    }
    compare(&got, want)
}

/// Calls `f`, a panic caught and said as an found (`todo!()` as not written), without
/// the default hook's message on stderr.
pub(crate) fn quietly<T>(f: impl FnOnce() -> Result<T>) -> Result<T, Found> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    match result {
        Ok(Ok(got)) => Ok(got),
        Ok(Err(e)) => Err(Found::Failed {
            message: format!("{e:#}"),
        }),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".into());
            if message.starts_with("not yet implemented") || message.starts_with("not implemented")
            {
                Err(Found::NotWritten { message })
            } else {
                Err(Found::Failed {
                    message: format!("panicked: {message}"),
                })
            }
        }
    }
}

/// The largest difference of `got` from `want`, relative to `want`'s largest magnitude.
pub(crate) fn compare(got: &Array, want: &Array, allowed: f32) -> Found {
    let measure = || -> Result<f32> {
        let got = got.as_dtype(Dtype::Float32)?;
        let difference = max(abs(subtract(&got, want)?)?, None)?.item_cast::<f32>();
        let scale = max(abs(want)?, None)?.item_cast::<f32>().max(1.0);
        Ok(difference / scale)
    };
    match measure() {
        Ok(difference) if difference <= allowed => Found::Right { difference },
        // NaN compares false: wrong, and said as NaN.
        Ok(difference) => Found::Wrong {
            difference,
            allowed,
        },
        Err(e) => Found::Failed {
            message: format!("{e:#}"),
        },
    }
}

pub(crate) fn random(shape: &[i32], seed: u64, dtype: Dtype) -> Result<Array> {
    let key = mlx_rs::random::key(seed)?;
    Ok(mlx_rs::random::normal::<f32>(shape, None, None, &key)?.as_dtype(dtype)?)
}

fn uniform(shape: &[i32], seed: u64, low: f32, high: f32) -> Result<Array> {
    let key = mlx_rs::random::key(seed)?;
    Ok(mlx_rs::random::uniform::<_, f32>(low, high, shape, &key)?)
}

pub(crate) fn dtype_name(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::Float32 => "float32",
        Dtype::Float16 => "float16",
        Dtype::Bfloat16 => "bfloat16",
        _ => "other",
    }
}

const BOTH: [Dtype; 2] = [Dtype::Float32, Dtype::Float16];

/// Every shape a piece is checked on: the table an author adds a row to (each piece's
/// rows in its own function below, its seeds counted from `1000 · piece`).
fn cases(piece: Piece) -> Vec<Case> {
    let mut seed = 1000 * piece as u64;
    let mut next = || {
        seed += 1;
        seed
    };
    match piece {
        Piece::RmsNorm => rms_norm_cases(&mut next),
        Piece::Swiglu => swiglu_cases(&mut next),
        Piece::Rope => rope_cases(&mut next),
        Piece::Attention => attention_cases(&mut next),
        Piece::QuantizedMatmul => quantized_matmul_cases(&mut next),
        Piece::GatedDelta => gated_delta_cases(&mut next),
        // Their own checks: a sampler's draws, a cache's calls in sequence.
        Piece::Sample
        | Piece::KvCache
        | Piece::Speculate
        | Piece::Prefill
        | Piece::Batching
        | Piece::Server => Vec::new(),
        Piece::Mlp => mlp_cases(&mut next),
    }
}

fn rms_norm_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // [B, L, D] of a block's norms (one token; a prompt) and Qwen3's per-head
    // q/k norm [B, L, heads, head_dim].
    for (shape, eps) in [
        (vec![1, 1, 576], 1e-5),
        (vec![1, 7, 576], 1e-5),
        (vec![1, 3, 4, 128], 1e-6),
    ] {
        for dtype in BOTH {
            let s = next();
            let width = *shape.last().unwrap();
            let text = format!("x {shape:?} · eps {eps:e} · {}", dtype_name(dtype));
            let shape = shape.clone();
            cases.push(Case {
                shape: text,
                dtype,
                call: Box::new(move |p| {
                    let x = random(&shape, s, dtype)?;
                    let w = uniform(&[width], s + 7, 0.5, 1.5)?.as_dtype(dtype)?;
                    p.rms_norm(&x, &w, eps)
                }),
            });
        }
    }
    // A residual stream's large values (trained models carry a few channels in the
    // hundreds): in float16 a square past 256 passes 65504 and overflows, so a norm must
    // sum its squares in float32, as MLX's fallback does.
    let s = next();
    cases.push(Case {
        shape: "x [1, 2, 576] · eps 1e-5 · float16, values to ±1000".to_owned(),
        dtype: Dtype::Float16,
        call: Box::new(move |p| {
            let x = random(&[1, 2, 576], s, Dtype::Float32)?
                .multiply(Array::from_f32(300.0))?
                .as_dtype(Dtype::Float16)?;
            let w = uniform(&[576], s + 7, 0.5, 1.5)?.as_dtype(Dtype::Float16)?;
            p.rms_norm(&x, &w, 1e-5)
        }),
    });
    cases
}

fn swiglu_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    for shape in [vec![1, 1, 1536], vec![1, 5, 1536]] {
        for dtype in BOTH {
            let s = next();
            let text = format!("gate, up {shape:?} · {}", dtype_name(dtype));
            let shape = shape.clone();
            cases.push(Case {
                shape: text,
                dtype,
                call: Box::new(move |p| {
                    let gate = random(&shape, s, dtype)?.multiply(Array::from_f32(3.0))?;
                    let up = random(&shape, s + 7, dtype)?;
                    p.swiglu(&gate.as_dtype(dtype)?, &up)
                }),
            });
        }
    }
    cases
}

fn mlp_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // (L, hidden, intermediate, 4-bit group): SmolLM2's widths, a decode step's row and a
    // prompt's rows, with the matrices dense and held quantized.
    let rows = [
        (1, 576, 1536, None),
        (5, 576, 1536, None),
        (1, 576, 1536, Some(64)),
        (3, 256, 512, Some(32)),
    ];
    for (l, hidden, wide, group) in rows {
        for dtype in BOTH {
            let s = next();
            let held = group.map_or("dense".to_owned(), |g| format!("4 bits, group {g}"));
            cases.push(Case {
                shape: format!(
                    "x [1, {l}, {hidden}] · gate, up [{wide}, {hidden}] · down [{hidden}, {wide}] · {held} · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| {
                    let x = random(&[1, l, hidden], s, dtype)?;
                    let matrix = |out: i32, inputs: i32, seed: u64| -> Result<Array> {
                        let scale = Array::from_f32(1.0 / (inputs as f32).sqrt());
                        Ok(random(&[out, inputs], seed, Dtype::Float32)?
                            .multiply(scale)?
                            .as_dtype(dtype)?)
                    };
                    let weights = [
                        matrix(2 * wide, hidden, s + 7)?,
                        matrix(hidden, wide, s + 13)?,
                    ];
                    let project = move |x: &Array, w: &Array| -> Result<Array> {
                        Ok(match group {
                            None => mlx_rs::ops::matmul(x, w.transpose()?)?,
                            Some(g) => {
                                let (packed, scales, biases) = mlx_rs::ops::quantize(w, g, 4)?;
                                mlx_rs::ops::quantized_matmul(
                                    x, &packed, &scales, &biases, true, g, 4,
                                )?
                            }
                        })
                    };
                    let [gate_up, down] = &weights;
                    let layers = MlpLayers::new(
                        &x,
                        Box::new(|x| Ok(project(x, gate_up)?.split_equal(2, -1)?)),
                        Box::new(|x| project(x, down)),
                        Box::new(|gate, up| QuestPieces.swiglu(gate, up)),
                    );
                    let y = p.mlp(&x, &layers)?;
                    if y.dtype() != dtype {
                        anyhow::bail!(
                            "the MLP returned {} for a {} input: keep the input's dtype",
                            dtype_name(y.dtype()),
                            dtype_name(dtype)
                        );
                    }
                    Ok(y)
                }),
            });
        }
    }
    cases
}

fn rope_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // (heads, L, head_dim, dims, traditional, base, offset): a decode step deep in
    // the sequence, a prompt from 0, a prompt's next chunk after a cached prefix,
    // the other layout, a partial rotation (Phi-style), Qwen3's base.
    let rows = [
        (9, 1, 64, 64, false, 10000.0, 17),
        (9, 6, 64, 64, false, 10000.0, 0),
        (3, 5, 64, 64, false, 10000.0, 11),
        (4, 4, 64, 64, true, 10000.0, 3),
        (4, 3, 64, 32, false, 10000.0, 5),
        (2, 2, 128, 128, false, 1_000_000.0, 40),
    ];
    for (heads, l, head_dim, dims, traditional, base, offset) in rows {
        for dtype in BOTH {
            let s = next();
            let shape = vec![1, heads, l, head_dim];
            let layout = if traditional {
                "traditional"
            } else {
                "split-half"
            };
            cases.push(Case {
                shape: format!(
                    "x {shape:?} · dims {dims} · {layout} · base {base} · offset {offset} · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| {
                    let x = random(&shape, s, dtype)?;
                    p.rope(&x, dims, traditional, base, offset)
                }),
            });
        }
    }
    cases
}

fn attention_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // (heads, kv_heads, L, S, masked): GQA ratios 1, 3 and 8; one decode query
    // over a cache; a prompt; a prompt's chunk after a cached prefix.
    let rows = [
        (9, 3, 1, 12, false),
        (4, 4, 1, 7, false),
        (8, 1, 1, 9, false),
        (9, 3, 6, 6, true),
        (4, 4, 5, 5, true),
        (9, 3, 3, 10, true),
        (8, 1, 4, 11, true),
    ];
    for (heads, kv_heads, l, s_len, masked) in rows {
        for dtype in BOTH {
            let s = next();
            let d = 64;
            let mask = if masked { "causal" } else { "no mask" };
            cases.push(Case {
                shape: format!(
                    "q [1, {heads}, {l}, {d}] · k, v [1, {kv_heads}, {s_len}, {d}] · {mask} · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| {
                    let q = random(&[1, heads, l, d], s, dtype)?;
                    let k = random(&[1, kv_heads, s_len, d], s + 7, dtype)?;
                    let v = random(&[1, kv_heads, s_len, d], s + 13, dtype)?;
                    let mask = masked.then_some(Mask::Causal);
                    p.attention(&q, &k, &v, 1.0 / (d as f32).sqrt(), mask)
                }),
            });
        }
    }
    cases
}

fn quantized_matmul_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // (L, in, out, group): a decode step's vector and a prompt's rows, every
    // group size MLX's affine quantization has.
    let rows = [
        (1, 576, 192, 32),
        (1, 576, 192, 64),
        (1, 512, 96, 128),
        (4, 1536, 64, 64),
    ];
    for (l, inputs, outputs, group) in rows {
        for dtype in BOTH {
            let s = next();
            cases.push(Case {
                shape: format!(
                    "x [1, {l}, {inputs}] · W [{outputs}, {inputs}] · 4 bits, group {group} · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| {
                    let x = random(&[1, l, inputs], s, dtype)?;
                    let w = random(&[outputs, inputs], s + 7, dtype)?
                        .multiply(Array::from_f32(0.05))?
                        .as_dtype(dtype)?;
                    let (packed, scales, biases) = mlx_rs::ops::quantize(&w, group, 4)?;
                    p.quantized_matmul(&x, &packed, &scales, &biases, group, 4)
                }),
            });
        }
    }
    cases
}

fn gated_delta_cases(next: &mut dyn FnMut() -> u64) -> Vec<Case> {
    let mut cases = Vec::new();
    // (L, key heads, value heads, Dk, Dv): one token; a prompt; value heads
    // grouped over key heads.
    let rows = [(1, 2, 2, 32, 32), (4, 2, 2, 32, 32), (3, 1, 4, 16, 24)];
    for (l, hk, hv, dk, dv) in rows {
        for dtype in BOTH {
            let s = next();
            cases.push(Case {
                shape: format!(
                    "q, k [1, {l}, {hk}, {dk}] · v [1, {l}, {hv}, {dv}] · state [1, {hv}, {dv}, {dk}] · {}",
                    dtype_name(dtype)
                ),
                dtype,
                call: Box::new(move |p| {
                    // Keys and queries normed as the layer hands them over.
                    let unit = |t: Array| -> Result<Array> {
                        let norm = t.square()?.sum_axis(-1, true)?.sqrt()?;
                        Ok(t.divide(norm)?.as_dtype(dtype)?)
                    };
                    let q = unit(random(&[1, l, hk, dk], s, Dtype::Float32)?)?;
                    let k = unit(random(&[1, l, hk, dk], s + 7, Dtype::Float32)?)?;
                    let v = random(&[1, l, hv, dv], s + 13, dtype)?;
                    let g = uniform(&[1, l, hv], s + 19, 0.5, 0.99)?.as_dtype(dtype)?;
                    let beta = uniform(&[1, l, hv], s + 23, 0.1, 0.9)?.as_dtype(dtype)?;
                    let state = random(&[1, hv, dv, dk], s + 29, Dtype::Float32)?
                        .multiply(Array::from_f32(0.1))?;
                    let (y, state) = p.gated_delta(&q, &k, &v, &g, &beta, state)?;
                    // Both halves of the answer, side by side.
                    let y = y.as_dtype(Dtype::Float32)?.flatten(None, None)?;
                    let state = state.as_dtype(Dtype::Float32)?.flatten(None, None)?;
                    Ok(mlx_rs::ops::concatenate(&[y, state], 0)?)
                }),
            });
        }
    }
    cases
}

/// The sampler's check: with a key, draws from quest's rule and from the learner's must
/// agree exactly where the rule leaves one choice (greedy, top-k 1) and fall inside the
/// tokens quest's rule keeps elsewhere, every kept token of any weight drawn.
fn check_sampler(sampler: &dyn Sampler) -> Verdict {
    use crate::lm::sample::QuestSampler;
    let rows_of = |t: f32, p: f32, m: f32, k: i32| Sampling {
        temperature: t,
        top_p: p,
        min_p: m,
        top_k: k,
        seed: 7,
    };
    // Greedy, one token left, then each filter alone, then all three at a temperature
    // below 1: there a filter that reads the tempered probabilities keeps fewer tokens.
    let table = [
        rows_of(0.0, 1.0, 0.0, 0),
        rows_of(1.0, 1.0, 0.0, 1),
        rows_of(0.8, 1.0, 0.0, 5),
        rows_of(1.0, 0.5, 0.0, 0),
        rows_of(1.2, 1.0, 0.2, 0),
        rows_of(0.6, 0.9, 0.05, 12),
    ];
    let draws = 2000;
    let rows = table
        .iter()
        .enumerate()
        .map(|(i, sampling)| {
            let shape = format!(
                "logits [2, 64] · temperature {} · top-p {} · min-p {} · top-k {} · {draws} draws",
                sampling.temperature, sampling.top_p, sampling.min_p, sampling.top_k
            );
            let found = (|| -> Result<Found, Found> {
                let failed = |e: anyhow::Error| Found::Failed {
                    message: format!("{e:#}"),
                };
                let logits = random(&[2, 64], 500 + i as u64, Dtype::Float32)
                    .and_then(|l| Ok(l.multiply(Array::from_f32(2.0))?))
                    .map_err(failed)?;
                let key = mlx_rs::random::key(9 + i as u64).map_err(|e| failed(e.into()))?;
                let want = QuestSampler
                    .sample(&logits, sampling, draws, &key)
                    .map_err(failed)?;
                let compare = |got: &Array, want: &Array| -> Found {
                    let as_ids = |a: &Array| -> Result<Vec<u32>> {
                        // A broadcast (greedy's) is a view: made row-major, it is written
                        // out whole (an elementwise op may keep the view's strides).
                        let ids = a.as_dtype(Dtype::Uint32)?.contiguous()?;
                        Ok(ids.try_as_slice::<u32>()?.to_vec())
                    };
                    let (got, want) = match (as_ids(got), as_ids(want)) {
                        (Ok(got), Ok(want)) => (got, want),
                        (Err(e), _) | (_, Err(e)) => return failed(e),
                    };
                    let one_choice = sampling.temperature == 0.0 || sampling.top_k == 1;
                    // Tokens drawn by one and never by the other, as a share of the draws.
                    let per_row = draws as usize;
                    let mut outside = 0usize;
                    for row in 0..2 {
                        let slice = |v: &Vec<u32>| v[row * per_row..(row + 1) * per_row].to_vec();
                        let (g, w) = (slice(&got), slice(&want));
                        let kept: std::collections::BTreeSet<u32> = w.iter().copied().collect();
                        let drawn: std::collections::BTreeSet<u32> = g.iter().copied().collect();
                        outside += if one_choice {
                            g.iter().zip(&w).filter(|(a, b)| a != b).count()
                        } else {
                            g.iter().filter(|t| !kept.contains(t)).count()
                                + kept.difference(&drawn).count()
                        };
                    }
                    let difference = outside as f32 / (2 * per_row) as f32;
                    // Some kept token of tiny weight may go undrawn in 2000 by chance: allow
                    // one in a thousand.
                    let allowed = 1e-3;
                    if difference <= allowed {
                        Found::Right { difference }
                    } else {
                        Found::Wrong {
                            difference,
                            allowed,
                        }
                    }
                };
                Ok(judge(
                    Piece::Sample,
                    &want,
                    || sampler.sample(&logits, sampling, draws, &key),
                    compare,
                ))
            })()
            .unwrap_or_else(|found| found);
            Row { shape, found }
        })
        .collect();
    Verdict {
        piece: Piece::Sample,
        rows,
        peaks: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::graph::Fused;

    /// RMSNorm by MLX's ops, as the lesson's solution writes it; `weightless` leaves the
    /// weight out.
    struct ByOps {
        weightless: bool,
    }
    impl Pieces for ByOps {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let x32 = x.as_dtype(Dtype::Float32)?;
            let ms = x32.square()?.mean_axis(-1, true)?;
            let y = x32
                .multiply(ms.add(Array::from_f32(eps))?.rsqrt()?)?
                .as_dtype(x.dtype())?;
            Ok(if self.weightless {
                y
            } else {
                y.multiply(weight)?
            })
        }
    }

    /// The same ops with the squares summed in the input's dtype: right in float32 and on
    /// float16 values under 256, overflowed on the large ones.
    struct SquaredInHalf;
    impl Pieces for SquaredInHalf {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let ms = x.square()?.mean_axis(-1, true)?;
            let y = x.multiply(ms.add(Array::from_f32(eps))?.rsqrt()?)?;
            Ok(y.multiply(weight)?)
        }
    }

    #[test]
    fn a_norm_that_squares_in_float16_overflows_on_large_values() {
        let verdict = check(Piece::RmsNorm, &SquaredInHalf);
        let wrong: Vec<&Row> = verdict
            .rows
            .iter()
            .filter(|r| !matches!(r.found, Found::Right { .. }))
            .collect();
        assert_eq!(wrong.len(), 1, "{verdict:?}");
        assert!(wrong[0].shape.contains("values to ±1000"), "{verdict:?}");
    }

    /// The lazy learner's: no `rms_norm` of its own, so the trait's default runs.
    struct Defaulted;
    impl Pieces for Defaulted {}

    /// Written as a learner's starting code is.
    struct Unwritten;
    impl Pieces for Unwritten {
        fn rms_norm(&self, _: &Array, _: &Array, _: f32) -> Result<Array> {
            todo!("the norm")
        }
    }

    /// Its own arithmetic, but quest's norm called inside it.
    struct CallsQuest;
    impl Pieces for CallsQuest {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            QuestPieces.rms_norm(x, weight, eps)
        }
    }

    #[test]
    fn the_solution_passes_every_shape_and_each_trick_is_named() {
        let right = check(Piece::RmsNorm, &ByOps { weightless: false });
        assert!(right.passed(), "{right:?}");
        assert!(right.rows.len() >= 6);

        let wrong = check(Piece::RmsNorm, &ByOps { weightless: true });
        assert_eq!(wrong.right(), 0, "{wrong:?}");
        assert!(matches!(
            wrong.first_wrong().unwrap().found,
            Found::Wrong { difference, .. } if difference > 0.1
        ));

        for quest_s in [
            check(Piece::RmsNorm, &Defaulted),
            check(Piece::RmsNorm, &CallsQuest),
        ] {
            assert!(
                quest_s.rows.iter().all(|r| r.found == Found::QuestRan),
                "{quest_s:?}"
            );
        }

        let unwritten = check(Piece::RmsNorm, &Unwritten);
        assert!(unwritten.not_written(), "{unwritten:?}");
    }

    /// The wrong shape is said as such, with both shapes.
    struct Flattened;
    impl Pieces for Flattened {
        fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
            let silu = gate.multiply(mlx_rs::ops::sigmoid(gate)?)?;
            Ok(silu.multiply(up)?.flatten(None, None)?)
        }
    }

    #[test]
    fn a_wrong_shape_names_both() {
        let verdict = check(Piece::Swiglu, &Flattened);
        assert!(matches!(
            &verdict.rows[0].found,
            Found::WrongShape { got, want } if got == &vec![1536] && want == &vec![1, 1, 1536]
        ));
    }

    /// The MLP through its projections, SiLU by hand; `cast: false` makes its constant a
    /// float32 one, which turns a float16 MLP into float32.
    struct MlpByHand {
        cast: bool,
    }
    impl Pieces for MlpByHand {
        fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
            let (gate, up) = (layers.gate_proj(x)?, layers.up_proj(x)?);
            let mut one = Array::from_f32(1.0);
            if self.cast {
                one = one.as_dtype(gate.dtype())?;
            }
            let sigmoid = one.divide(one.add(gate.negative()?.exp()?)?)?;
            layers.down_proj(&gate.multiply(&sigmoid)?.multiply(&up)?)
        }
    }

    /// MLX's sigmoid, and quest's gate called from inside.
    struct MlpBySigmoid {
        quests_gate: bool,
    }
    impl Pieces for MlpBySigmoid {
        fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
            let (gate, up) = (layers.gate_proj(x)?, layers.up_proj(x)?);
            let hidden = if self.quests_gate {
                QuestPieces.swiglu(&gate, &up)?
            } else {
                gate.multiply(mlx_rs::ops::sigmoid(&gate)?)?.multiply(&up)?
            };
            layers.down_proj(&hidden)
        }
    }

    #[test]
    fn the_mlp_is_checked_dense_and_quantized_in_its_dtype() {
        for honest in [
            check(Piece::Mlp, &MlpByHand { cast: true }),
            check(Piece::Mlp, &MlpBySigmoid { quests_gate: false }),
        ] {
            assert!(honest.passed(), "{honest:?}");
            assert_eq!(honest.rows.len(), 8);
        }
        // A float32 constant: every float16 row says the dtype, every float32 row passes.
        let promoted = check(Piece::Mlp, &MlpByHand { cast: false });
        for row in &promoted.rows {
            match &row.found {
                Found::Failed { message } => {
                    assert!(row.shape.ends_with("float16"), "{row:?}");
                    assert!(message.contains("keep the input's dtype"), "{message}");
                }
                found => assert!(found.is_right() && row.shape.ends_with("float32")),
            }
        }
        for quest_s in [
            check(Piece::Mlp, &Defaulted),
            check(Piece::Mlp, &MlpBySigmoid { quests_gate: true }),
        ] {
            assert!(
                quest_s.rows.iter().all(|r| r.found == Found::QuestRan),
                "{quest_s:?}"
            );
        }
    }

    /// The lazy learner's fused norms, each reached another way: the graph names MLX's op
    /// on every shape, whatever the source spelled.
    enum FusedNorm {
        /// `mlx_rs::nn::RmsNorm { weight: Param::new(..), eps }.forward(x)`: a type's
        /// path in a struct literal, a trait method.
        Layer,
        /// The fused norm behind a fn pointer.
        Pointer,
        /// Computed on another thread.
        Thread,
        /// MLX's C API under mlx-rs (the exercise's crate cannot name it, nor write
        /// `unsafe`; quest's can, and the graph sees it all the same).
        CApi,
        /// A compiled function that calls it, traced before the check.
        Compiled,
        /// Evaluated inside the piece, then one more op over it.
        EvaluatedThenHidden,
        /// LayerNorm, of the same family.
        LayerNorm,
    }
    impl Pieces for FusedNorm {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            use mlx_rs::module::{Module, Param};
            Ok(match self {
                FusedNorm::Layer => mlx_rs::nn::RmsNorm {
                    weight: Param::new(weight.clone()),
                    eps,
                }
                .forward(x)?,
                FusedNorm::Pointer => {
                    let f: fn(&Array, Option<&Array>, f32) -> mlx_rs::error::Result<Array> =
                        |x, w, eps| mlx_rs::fast::rms_norm(x, w, eps);
                    f(x, Some(weight), eps)?
                }
                FusedNorm::Thread => {
                    let (x, weight) = (x.clone(), weight.clone());
                    std::thread::spawn(move || mlx_rs::fast::rms_norm(&x, Some(&weight), eps))
                        .join()
                        .unwrap()?
                }
                FusedNorm::CApi => {
                    let stream = mlx_rs::Stream::new();
                    // SAFETY: valid arrays and stream; the result is owned by the Array.
                    unsafe {
                        let mut res = mlx_sys::mlx_array_new();
                        let status = mlx_sys::mlx_fast_rms_norm(
                            &mut res,
                            x.as_ptr(),
                            weight.as_ptr(),
                            eps,
                            stream.as_ptr(),
                        );
                        anyhow::ensure!(status == 0, "mlx_fast_rms_norm failed");
                        Array::from_ptr(res)
                    }
                }
                FusedNorm::Compiled => COMPILED_NORM.with(|f| (f.borrow_mut())((x, weight)))?,
                FusedNorm::EvaluatedThenHidden => {
                    let y = mlx_rs::fast::rms_norm(x, Some(weight), eps)?;
                    y.eval()?;
                    y.add(Array::from_f32(0.0))?
                }
                FusedNorm::LayerNorm => {
                    mlx_rs::fast::layer_norm(x, Some(weight), None::<&Array>, eps)?
                }
            })
        }
    }

    type CompiledNorm =
        Box<dyn for<'a> FnMut((&'a Array, &'a Array)) -> mlx_rs::error::Result<Array>>;
    thread_local! {
        static COMPILED_NORM: std::cell::RefCell<CompiledNorm> =
            std::cell::RefCell::new(Box::new(mlx_rs::transforms::compile::compile(
                |(x, w): (&Array, &Array)| mlx_rs::fast::rms_norm(x, Some(w), 1e-5),
                false,
            )));
    }

    /// Honest by ops, but evaluated before it returns: nothing left to see.
    struct Evaluated;
    impl Pieces for Evaluated {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let y = ByOps { weightless: false }.rms_norm(x, weight, eps)?;
            y.eval()?;
            Ok(y)
        }
    }

    #[test]
    fn a_fused_norm_is_named_however_it_was_reached() {
        // Traced once before the check, as a learner's `main` could.
        let warm = Array::ones::<f32>(&[1, 1, 576]).unwrap();
        let w = Array::ones::<f32>(&[576]).unwrap();
        COMPILED_NORM
            .with(|f| (f.borrow_mut())((&warm, &w)))
            .unwrap()
            .eval()
            .unwrap();
        for (what, trick) in [
            ("a layer's struct literal", FusedNorm::Layer),
            ("a fn pointer", FusedNorm::Pointer),
            ("a thread", FusedNorm::Thread),
            ("the C API", FusedNorm::CApi),
            ("a compiled function", FusedNorm::Compiled),
            ("evaluated, then hidden", FusedNorm::EvaluatedThenHidden),
        ] {
            let verdict = check(Piece::RmsNorm, &trick);
            let evaluated = matches!(trick, FusedNorm::EvaluatedThenHidden);
            assert!(
                verdict.rows.iter().all(|r| r.found
                    == Found::Fused {
                        op: Fused::RmsNorm,
                        evaluated
                    }),
                "{what}: {verdict:?}"
            );
        }
        let layer_norm = check(Piece::RmsNorm, &FusedNorm::LayerNorm);
        assert!(
            layer_norm.rows.iter().all(|r| r.found
                == Found::Fused {
                    op: Fused::LayerNorm,
                    evaluated: false
                }),
            "{layer_norm:?}"
        );
        let evaluated = check(Piece::RmsNorm, &Evaluated);
        assert!(
            evaluated.rows.iter().all(|r| r.found == Found::Evaluated),
            "{evaluated:?}"
        );
    }

    /// Honest pieces unlike the solutions: the norm in float32 then cast back, RoPE by
    /// rotate_half, grouped-query attention with an additive mask and a softmax by hand,
    /// SiLU as 1/(1+e^-g). Each passes every shape.
    struct Honest;
    impl Pieces for Honest {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let x32 = x.as_dtype(Dtype::Float32)?;
            let ms = x32.square()?.mean_axis(-1, true)?;
            let y = x32.multiply(ms.add(Array::from_f32(eps))?.rsqrt()?)?;
            Ok(y.as_dtype(x.dtype())?.multiply(weight)?)
        }

        fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
            let one = Array::from_f32(1.0);
            let sigmoid = one.divide(one.add(gate.negative()?.exp()?)?)?;
            Ok(gate
                .multiply(sigmoid)?
                .multiply(up)?
                .as_dtype(gate.dtype())?)
        }

        fn rope(
            &self,
            x: &Array,
            dims: i32,
            traditional: bool,
            base: f32,
            offset: i32,
        ) -> Result<Array> {
            use mlx_rs::ops::{arange, concatenate, split_at_indices, stack};
            let shape = x.shape().to_vec();
            let (l, half) = (shape[2], dims / 2);
            let positions = arange::<_, f32>(offset, offset + l, None)?.reshape(&[l, 1])?;
            let inverse = arange::<_, f32>(0, half, None)?
                .multiply(Array::from_f32(-2.0 * base.ln() / dims as f32))?
                .exp()?;
            let angle = positions.multiply(&inverse)?;
            let parts = split_at_indices(x, &[dims], -1)?;
            let rotated = if traditional {
                let pairs = parts[0].reshape(&[shape[0], shape[1], l, half, 2])?;
                let ab = split_at_indices(&pairs, &[1], -1)?;
                let (a, b) = (ab[0].squeeze_axes(&[-1])?, ab[1].squeeze_axes(&[-1])?);
                let (cos, sin) = (angle.cos()?, angle.sin()?);
                let ra = a.multiply(&cos)?.subtract(b.multiply(&sin)?)?;
                let rb = a.multiply(&sin)?.add(b.multiply(&cos)?)?;
                stack(&[ra, rb], -1)?.reshape(&[shape[0], shape[1], l, dims])?
            } else {
                // rotate_half: x·cos + [-x2, x1]·sin, the angles repeated over both halves.
                let angle = concatenate(&[&angle, &angle], -1)?;
                let ab = split_at_indices(&parts[0], &[half], -1)?;
                let turned = concatenate(&[ab[1].negative()?, ab[0].clone()], -1)?;
                parts[0]
                    .multiply(angle.cos()?)?
                    .add(turned.multiply(angle.sin()?)?)?
            };
            Ok(concatenate(
                &[rotated.as_dtype(x.dtype())?, parts[1].clone()],
                -1,
            )?)
        }

        fn attention(
            &self,
            queries: &Array,
            keys: &Array,
            values: &Array,
            scale: f32,
            mask: Option<Mask>,
        ) -> Result<Array> {
            use mlx_rs::ops::{arange, gt, matmul, select};
            let (q, k) = (queries.shape().to_vec(), keys.shape().to_vec());
            let (b, heads, l, d) = (q[0], q[1], q[2], q[3]);
            let (kv, s) = (k[1], k[2]);
            // Grouped: each key head's queries side by side, [B, kv, group·L, D].
            let grouped = queries.reshape(&[b, kv, (heads / kv) * l, d])?;
            let scores = matmul(
                grouped.multiply(Array::from_f32(scale))?,
                keys.swap_axes(-1, -2)?,
            )?
            .as_dtype(Dtype::Float32)?;
            let scores = match mask {
                Some(Mask::Causal) => {
                    let query = arange::<_, i32>(s - l, s, None)?.reshape(&[l, 1])?;
                    let key = arange::<_, i32>(0, s, None)?.reshape(&[1, s])?;
                    let additive = select(
                        gt(&key, &query)?,
                        Array::from_f32(f32::NEG_INFINITY),
                        Array::from_f32(0.0),
                    )?;
                    let scores = scores.reshape(&[b, kv, heads / kv, l, s])?;
                    scores
                        .add(additive)?
                        .reshape(&[b, kv, (heads / kv) * l, s])?
                }
                None => scores,
            };
            let shifted = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;
            let weights = shifted.divide(shifted.sum_axis(-1, true)?)?;
            let out = matmul(weights.as_dtype(values.dtype())?, values)?;
            Ok(out.reshape(&[b, heads, l, d])?)
        }
    }

    #[test]
    fn honest_pieces_unlike_the_solutions_pass() {
        for piece in [Piece::RmsNorm, Piece::Swiglu, Piece::Rope, Piece::Attention] {
            let verdict = check(piece, &Honest);
            assert!(verdict.passed(), "{piece}: {verdict:?}");
        }
    }

    #[test]
    fn every_piece_of_the_seam_has_shapes() {
        for piece in Piece::ALL {
            if !matches!(
                piece,
                Piece::Sample
                    | Piece::KvCache
                    | Piece::Speculate
                    | Piece::Prefill
                    | Piece::Batching
                    | Piece::Server
            ) {
                assert!(cases(piece).len() >= 4, "{piece}");
            }
        }
        assert_eq!(
            check_sampler(&crate::lm::sample::QuestSampler).rows.len(),
            6
        );
    }

    #[test]
    fn quests_sampler_passes_its_own_check_but_counts_as_quests() {
        let verdict = check_sampler(&crate::lm::sample::QuestSampler);
        assert!(verdict.rows.iter().all(|r| r.found == Found::QuestRan));
    }
}
