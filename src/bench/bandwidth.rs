//! The machine's memory bandwidth as MLX sees it on the current device: time a copy of a
//! buffer far larger than any cache (it reads and writes every byte once).

use std::time::Instant;

use anyhow::Result;
use mlx_rs::transforms::eval;
use mlx_rs::Array;

/// The best of several timed copies, in GB/s (read + write counted). The buffer is 256 MiB
/// on a CPU and 2 GiB on a GPU, where a smaller copy is too short to time well.
pub fn measure() -> Result<f64> {
    let buffer_bytes: usize = if crate::device::Backend::detect() == crate::device::Backend::Cpu {
        256 << 20
    } else {
        2 << 30
    };
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
