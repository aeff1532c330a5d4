//! The two rates of `time ≈ fixed + max(bytes / bandwidth, operations / compute rate)`, as
//! MLX reaches them on the device that runs, at the threads it runs with.
//!
//! A ceiling is only a bound if no loop beats the rate it divides by, so each rate is the
//! best of several tries of the fastest way quest knows to do that one thing here:
//! - bandwidth on a CPU: matrix-vector products (the BLAS's, as decode runs them) through
//!   256 MiB of matrices of decode's widths, bytes read counted. A copy or MLX's sum reads
//!   slower than decode does on this kind of machine, so a ceiling from either is beaten
//!   (docs/cpu/2026-12-02-rates/);
//! - bandwidth on a GPU: a copy of 2 GiB (read + write counted), faster there than any
//!   decode quest measured;
//! - compute rate: a square matrix product in the float type that runs (f32 on a CPU, on
//!   the BLAS; f16 on a GPU), multiply-adds counted.

use std::time::Instant;

use anyhow::Result;
use mlx_rs::transforms::eval;
use mlx_rs::{Array, Dtype};
use serde::{Deserialize, Serialize};

use crate::device::Backend;

/// Both rates, measured one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// GB/s: the bytes term's divisor.
    pub bandwidth_gb_s: f64,
    /// G multiply-adds a second: the operations term's divisor.
    pub compute_gmac_s: f64,
}

impl Rates {
    pub fn measure() -> Result<Self> {
        Ok(Rates {
            bandwidth_gb_s: bandwidth()?,
            compute_gmac_s: compute()?,
        })
    }

    /// The better of each rate: measured again after a run, so that a moment of another
    /// process's load during one measurement does not set the ceiling below the run.
    pub fn best(self, other: Rates) -> Rates {
        Rates {
            bandwidth_gb_s: self.bandwidth_gb_s.max(other.bandwidth_gb_s),
            compute_gmac_s: self.compute_gmac_s.max(other.compute_gmac_s),
        }
    }
}

/// (rows, columns) of the matrices the CPU's bandwidth is read through: the MLP's of
/// SmolLM2-135M, SmolLM2-360M and Qwen3-0.6B. The BLAS reads narrow matrices faster than
/// wide ones (docs/cpu/2026-12-02-rates/), and the smallest shapes decode fastest: their
/// widths are the ones to bound.
const CPU_MATRICES: [(i32, i32); 3] = [(1536, 576), (2560, 960), (3072, 1024)];
/// Passes through each width's matrices: the best is kept, so more passes come closer to
/// what the memory allows while another process shares it.
const CPU_PASSES: usize = 12;

/// The best read rate, in GB/s (see the module's doc for how, on each backend).
pub fn bandwidth() -> Result<f64> {
    // The BLAS's threads as decode will run them (set once per process).
    crate::device::blas::init()?;
    if Backend::detect() == Backend::Cpu {
        matvec_bandwidth()
    } else {
        copy_bandwidth(2 << 30)
    }
}

/// Matrix-vector products through 256 MiB of each width in [`CPU_MATRICES`], in one
/// evaluation each, as decode's projections are: the best of [`CPU_PASSES`] of each.
fn matvec_bandwidth() -> Result<f64> {
    const BYTES: usize = 256 << 20;
    let mut best: f64 = 0.0;
    for (rows, cols) in CPU_MATRICES {
        let matrix_bytes = rows as usize * cols as usize * 4;
        let count = BYTES.div_ceil(matrix_bytes);
        // `ones` is materialized whole (a fill), and the values do not change the time.
        let matrices = (0..count)
            .map(|_| mlx_rs::ops::ones::<f32>(&[rows, cols]))
            .collect::<Result<Vec<_>, _>>()?;
        eval(&matrices)?;
        let x = mlx_rs::ops::ones::<f32>(&[1, cols])?;
        eval([&x])?;
        for _ in 0..CPU_PASSES {
            let start = Instant::now();
            let products = matrices
                .iter()
                .map(|w| x.matmul(w.t()))
                .collect::<Result<Vec<_>, _>>()?;
            eval(&products)?;
            let seconds = start.elapsed().as_secs_f64();
            best = best.max((count * matrix_bytes) as f64 / seconds / 1e9);
        }
    }
    Ok(best)
}

/// The best of ten copies of `buffer_bytes`, read and write counted.
fn copy_bandwidth(buffer_bytes: usize) -> Result<f64> {
    let n = (buffer_bytes / 4) as i32;
    let source = mlx_rs::ops::ones::<f32>(&[n])?;
    eval([&source])?;
    let mut best: f64 = 0.0;
    for _ in 0..10 {
        let start = Instant::now();
        // `x * 1` cannot be skipped and streams the buffer through once.
        let copy = source.multiply(Array::from_f32(1.0))?;
        eval([&copy])?;
        let seconds = start.elapsed().as_secs_f64();
        best = best.max(2.0 * buffer_bytes as f64 / seconds / 1e9);
    }
    Ok(best)
}

/// The best of several square matrix products in the backend's float type, in G
/// multiply-adds a second: n × n × n of them in each (1024 on a CPU, 8192 on a GPU, where
/// a smaller one is too short to time well).
pub fn compute() -> Result<f64> {
    crate::device::blas::init()?;
    let backend = Backend::detect();
    let (n, tries) = if backend == Backend::Cpu {
        (1024, 5)
    } else {
        (8192, 10)
    };
    let dtype: Dtype = backend.float_dtype();
    let a = mlx_rs::ops::ones::<f32>(&[n, n])?.as_dtype(dtype)?;
    let b = mlx_rs::ops::ones::<f32>(&[n, n])?.as_dtype(dtype)?;
    eval([&a, &b])?;
    eval([&a.matmul(&b)?])?; // warm-up: the first product picks and loads the kernels
    let mut best: f64 = 0.0;
    for _ in 0..tries {
        let start = Instant::now();
        eval([&a.matmul(&b)?])?;
        let seconds = start.elapsed().as_secs_f64();
        best = best.max((n as f64).powi(3) / seconds / 1e9);
    }
    Ok(best)
}

/// How [`bandwidth`] reads on this backend, for a printed line.
pub fn bandwidth_method() -> &'static str {
    if Backend::detect() == Backend::Cpu {
        "matrix-vector reads on the BLAS"
    } else {
        "a copy, read + write"
    }
}
