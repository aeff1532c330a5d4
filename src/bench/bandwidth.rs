//! The machine's memory bandwidth as MLX sees it on the current device: time a copy of a
//! buffer far larger than any cache (it reads and writes every byte once).

use std::time::Instant;

use anyhow::Result;
use mlx_rs::transforms::eval;
use mlx_rs::Array;

/// Bytes in the buffer copied (256 MiB of f32).
const BUFFER_BYTES: usize = 256 << 20;

/// The best of several timed copies, in GB/s (read + write counted).
pub fn measure() -> Result<f64> {
    let n = (BUFFER_BYTES / 4) as i32;
    let source = mlx_rs::ops::ones::<f32>(&[n])?;
    eval([&source])?;
    let mut best: f64 = 0.0;
    for _ in 0..5 {
        let start = Instant::now();
        // `x * 1` cannot be skipped and streams the buffer through once.
        let copy = source.multiply(Array::from_f32(1.0))?;
        eval([&copy])?;
        let seconds = start.elapsed().as_secs_f64();
        best = best.max(2.0 * BUFFER_BYTES as f64 / seconds / 1e9);
    }
    Ok(best)
}
