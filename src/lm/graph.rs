//! What computed an array, read off MLX's graph: the proof that a learner's piece is
//! theirs, whatever their source spells.
//!
//! A piece returns an MLX graph. Walked from its output down to the piece's inputs, it
//! lists every op that computes the result. Where a GPU keeps MLX's fused ops, their
//! nodes bear their names (`RMSNorm`, `RoPE`, `ScaledDotProductAttention`); the CPU keeps
//! none of them (`fast::rms_norm` there returns a graph of plain ops), so mlx-c's entry
//! points name that graph's last node after the fused op (`Multiply from RMSNorm`; quest's
//! patch of mlx-sys, `src/shims/seen.cpp`): every path to the fused op — a function, a layer's `forward`, a
//! fn pointer, a thread, a compiled function traced earlier, the C API — goes through
//! mlx-c and leaves its name. An output evaluated from such a node is still known by it
//! (the buffer is remembered), and an output already evaluated when it comes back hides
//! what computed it, which is said as such.
//!
//! The walk runs in quest's code in the exercise's process: in the piece check
//! (`lm::piece_check`) and at every call into the learner's piece in the model
//! (`lm::pieces::Counted`), stopping at the call's inputs, so it reads the piece's own
//! ops alone (tens of nodes, microseconds).

use std::ffi::c_char;

use anyhow::{ensure, Result};
use mlx_rs::Array;
use serde::{Deserialize, Serialize};

use crate::course::spec::Piece;

/// One of MLX's fused ops a piece replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fused {
    RmsNorm,
    LayerNorm,
    Rope,
    Attention,
    QuantizedMatmul,
    GatherQmm,
}

impl Fused {
    const ALL: [Fused; 6] = [
        Fused::RmsNorm,
        Fused::LayerNorm,
        Fused::Rope,
        Fused::Attention,
        Fused::QuantizedMatmul,
        Fused::GatherQmm,
    ];

    /// The op's name in MLX's graph.
    pub fn primitive(self) -> &'static str {
        match self {
            Fused::RmsNorm => "RMSNorm",
            Fused::LayerNorm => "LayerNorm",
            Fused::Rope => "RoPE",
            Fused::Attention => "ScaledDotProductAttention",
            Fused::QuantizedMatmul => "QuantizedMatmul",
            Fused::GatherQmm => "GatherQMM",
        }
    }

    /// Where mlx-rs offers it (its layers call the same).
    pub fn path(self) -> &'static str {
        match self {
            Fused::RmsNorm => "mlx_rs::fast::rms_norm",
            Fused::LayerNorm => "mlx_rs::fast::layer_norm",
            Fused::Rope => "mlx_rs::fast::rope",
            Fused::Attention => "mlx_rs::fast::scaled_dot_product_attention",
            Fused::QuantizedMatmul => "mlx_rs::ops::quantized_matmul",
            Fused::GatherQmm => "mlx_rs::ops::gather_qmm",
        }
    }

    fn named(primitive: &str) -> Option<Fused> {
        Fused::ALL.into_iter().find(|f| f.primitive() == primitive)
    }
}

impl std::fmt::Display for Fused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.primitive())
    }
}

/// MLX's fused ops that compute what `piece` is: the learner writes it in their place.
pub fn replaced_by(piece: Piece) -> &'static [Fused] {
    match piece {
        Piece::RmsNorm => &[Fused::RmsNorm, Fused::LayerNorm],
        Piece::Rope => &[Fused::Rope],
        Piece::Attention => &[Fused::Attention],
        Piece::QuantizedMatmul => &[Fused::QuantizedMatmul, Fused::GatherQmm],
        Piece::Swiglu
        | Piece::Mlp
        | Piece::GatedDelta
        | Piece::Sample
        | Piece::KvCache
        | Piece::Speculate
        | Piece::Prefill
        | Piece::Batching
        | Piece::Server => &[],
    }
}

/// What the walk found of a piece's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Plain ops: none of the fused ops the piece replaces.
    Plain,
    /// One of them computed it (`evaluated`: an array it computed, evaluated before the
    /// piece returned).
    Fused { op: Fused, evaluated: bool },
    /// The output was already evaluated when the piece returned it: what computed it is
    /// not in the graph.
    Evaluated,
}

/// Nodes walked at most from one output: a piece's own ops are tens.
const LIMIT: usize = 100_000;

/// Judges the output `out` of the learner's `piece`, called on `inputs`: the graph from
/// `out` down to `inputs` (and to evaluated arrays).
pub fn seen(piece: Piece, out: &Array, inputs: &[&Array]) -> Result<Seen> {
    let lines = names(out, inputs)?;
    let replaced = replaced_by(piece);
    for line in &lines {
        let (name, evaluated) = match line.strip_suffix(" (evaluated)") {
            Some(name) => (name, true),
            None => (line.as_str(), false),
        };
        // The last node of MLX's fallback for a fused op: `Multiply from RMSNorm`.
        let name = name.rsplit_once(" from ").map_or(name, |(_, fused)| fused);
        if let Some(op) = Fused::named(name).filter(|op| replaced.contains(op)) {
            return Ok(Seen::Fused { op, evaluated });
        }
    }
    if piece != Piece::Sample && lines.first().map(String::as_str) == Some("(evaluated)") {
        return Ok(Seen::Evaluated);
    }
    Ok(Seen::Plain)
}

/// The name of every node that computes `out`, down to `stops` and evaluated arrays
/// (MLX's names; the last node of a fused op's fallback as `<op> from <fused>`; an
/// evaluated array a fused op computed as `<fused> (evaluated)`; a first line
/// `(evaluated)` where `out` itself was).
pub fn names(out: &Array, stops: &[&Array]) -> Result<Vec<String>> {
    let raw: Vec<mlx_sys::mlx_array> = stops.iter().map(|a| a.as_ptr()).collect();
    let mut text: *mut c_char = std::ptr::null_mut();
    // SAFETY: the vector is freed on every path; the text is quest_graph_seen's malloc'd
    // copy, read once and freed.
    unsafe {
        let vector = mlx_sys::mlx_vector_array_new_data(raw.as_ptr(), raw.len());
        let status = quest_graph_seen(&mut text, out.as_ptr(), vector, LIMIT);
        mlx_sys::mlx_vector_array_free(vector);
        ensure!(
            status == 0 && !text.is_null(),
            "MLX could not walk the graph"
        );
        let lines = std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .lines()
            .map(str::to_owned)
            .collect();
        quest_graph_seen_free(text);
        Ok(lines)
    }
}

extern "C" {
    /// vendor/mlx-sys/src/shims/seen.cpp.
    fn quest_graph_seen(
        text: *mut *mut c_char,
        out: mlx_sys::mlx_array,
        stops: mlx_sys::mlx_vector_array,
        limit: usize,
    ) -> i32;
    fn quest_graph_seen_free(text: *mut c_char);
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx_rs::module::{Module, Param};

    fn x() -> Array {
        let key = mlx_rs::random::key(3).unwrap();
        mlx_rs::random::normal::<f32>(&[1, 3, 64], None, None, &key).unwrap()
    }

    /// MLX's fused norm is seen by name however it is reached, its plain-op fallback on
    /// the CPU included; the same arithmetic by ops is the learner's own.
    #[test]
    fn the_fused_norm_is_seen_however_it_is_reached() {
        let (x, w) = (x(), Array::ones::<f32>(&[64]).unwrap());
        let fused = Seen::Fused {
            op: Fused::RmsNorm,
            evaluated: false,
        };
        let direct = mlx_rs::fast::rms_norm(&x, Some(&w), 1e-5).unwrap();
        assert_eq!(seen(Piece::RmsNorm, &direct, &[&x, &w]).unwrap(), fused);
        // A layer built by a struct literal and its trait method.
        let mut layer = mlx_rs::nn::RmsNorm {
            weight: Param::new(w.clone()),
            eps: 1e-5,
        };
        let by_layer = layer.forward(&x).unwrap();
        assert_eq!(seen(Piece::RmsNorm, &by_layer, &[&x, &w]).unwrap(), fused);
        // Through a fn pointer, on another thread.
        let f: fn(&Array, &Array, f32) -> Result<Array, mlx_rs::error::Exception> =
            |x, w, eps| mlx_rs::fast::rms_norm(x, Some(w), eps);
        let (tx, tw) = (x.clone(), w.clone());
        let threaded = std::thread::spawn(move || f(&tx, &tw, 1e-5).unwrap())
            .join()
            .unwrap();
        assert_eq!(seen(Piece::RmsNorm, &threaded, &[&x, &w]).unwrap(), fused);
        // Evaluated, then hidden under one more op.
        let evaluated = mlx_rs::fast::rms_norm(&x, Some(&w), 1e-5).unwrap();
        evaluated.eval().unwrap();
        let hidden = evaluated.add(Array::from_f32(0.0)).unwrap();
        assert_eq!(
            seen(Piece::RmsNorm, &hidden, &[&x, &w]).unwrap(),
            Seen::Fused {
                op: Fused::RmsNorm,
                evaluated: true
            }
        );
        // Returned evaluated: nothing to see.
        let by_ops = x
            .multiply(
                x.square()
                    .unwrap()
                    .mean_axis(-1, true)
                    .unwrap()
                    .rsqrt()
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(
            seen(Piece::RmsNorm, &by_ops, &[&x, &w]).unwrap(),
            Seen::Plain
        );
        by_ops.eval().unwrap();
        assert_eq!(
            seen(Piece::RmsNorm, &by_ops, &[&x, &w]).unwrap(),
            Seen::Evaluated
        );
        // A fused op the piece does not replace is not its business.
        let rotated = mlx_rs::fast::rope(&x, 64, false, 10000.0, 1.0, 0, None).unwrap();
        assert_eq!(seen(Piece::RmsNorm, &rotated, &[&x]).unwrap(), Seen::Plain);
        assert_eq!(
            seen(Piece::Rope, &rotated, &[&x]).unwrap(),
            Seen::Fused {
                op: Fused::Rope,
                evaluated: false
            }
        );
    }

    /// The walk stops at the inputs: a deep graph above them is not read.
    #[test]
    fn the_walk_stops_at_the_inputs() {
        let mut deep = x();
        for _ in 0..50 {
            deep = deep.multiply(Array::from_f32(1.0)).unwrap();
        }
        let y = deep.square().unwrap();
        assert_eq!(names(&y, &[&deep]).unwrap(), vec!["Square".to_owned()]);
        assert!(names(&y, &[]).unwrap().len() > 50);
    }
}
