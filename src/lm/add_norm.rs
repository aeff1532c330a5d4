//! A decode step's residual add and the RMS norm after it, in one CUDA kernel (issue #12).
//!
//! Each block adds its attention output to the residual stream and norms the sum for the
//! feed-forward, then adds the feed-forward's output and norms that for the next block:
//! with MLX's ops, an `add` and an `rms_norm` each time, two ops the host records and
//! launches. This kernel reads the stream and the addend once and writes both the sum
//! (the stream goes on) and its norm.
//!
//! The arithmetic is MLX's, in MLX's order: the sum in float16 (`add`), then the norm of
//! that float16 sum in float32 and `w * half(x · r)` in float16 (`rms_norm`). One block of
//! threads owns one row.
//!
//! Used for one position per sequence (decode) in float16 with widths up to 8192;
//! everything else, and every backend but CUDA, runs MLX's ops. `QUEST_ADDNORM=mlx|quest`
//! chooses (read once; [`cuda_kernel`]); MLX's ops by default: on the H200 this kernel was
//! right (SmolLM2's greedy tokens 63/63, logits within 9.4e-3) but no faster (×0.92–1.10),
//! since a custom kernel's call costs the host about what the two ops it replaces do
//! (docs/benchmarks.md, issue #12, session 5). With quest's matvec on, the add and the norm
//! are folded into the matvecs instead (lm::qmv::Fold) and this kernel is not used.

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use crate::lm::cuda_kernel::{
    self, Config, CustomKernel, Kernel, KernelSource, KernelSpec, Kernels, Output,
};

/// Threads per block (one block a row).
const THREADS: i32 = 256;
const MAX_WIDTH: i32 = 8192;

// The body MLX wraps in `(const __half* h, const __half* delta, const __half* w,
// __half* sum, __half* normed)`; the header gives DIM, EPS and BLOCK.
const SOURCE: &str = r#"
  constexpr int PER = (DIM + BLOCK - 1) / BLOCK;
  __shared__ float partial[BLOCK / 32];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const size_t base = (size_t)blockIdx.y * DIM;
  float xs[PER];
  float ss = 0.f;
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int i = tid + p * BLOCK;
    xs[p] = 0.f;
    if (i < DIM) {
      const __half s = __hadd(h[base + i], delta[base + i]);
      sum[base + i] = s;
      xs[p] = __half2float(s);
      ss += xs[p] * xs[p];
    }
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) partial[tid >> 5] = ss;
  __syncthreads();
  if (tid < 32) {
    float t = lane < BLOCK / 32 ? partial[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (lane == 0) partial[0] = t;
  }
  __syncthreads();
  const float r = rsqrtf(partial[0] / DIM + EPS);
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int i = tid + p * BLOCK;
    if (i < DIM) normed[base + i] = __hmul(w[i], __float2half(xs[p] * r));
  }
"#;

/// What makes one compiled kernel: the width and epsilon are in its source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    width: i32,
    eps: u32,
}

impl Key {
    fn header(&self) -> String {
        format!(
            "constexpr int DIM = {};\nconstexpr float EPS = {:e}f;\nconstexpr int BLOCK = {};\n",
            self.width,
            f32::from_bits(self.eps),
            THREADS
        )
    }

    fn spec(&self) -> KernelSpec {
        KernelSpec {
            name: "quest_add_norm",
            inputs: ["h", "delta", "w"].map(|n| (n, Dtype::Float16)).to_vec(),
            outputs: ["sum", "normed"].map(|n| (n, Dtype::Float16)).to_vec(),
            source: SOURCE,
            header: self.header(),
            shared_memory: 0,
        }
    }

    fn make(&self) -> Result<CustomKernel> {
        self.spec().make()
    }

    fn config(&self, shape: &[i32]) -> Result<Config> {
        let rows = shape.iter().product::<i32>() / self.width;
        let out = Output {
            shape,
            dtype: Dtype::Float16,
        };
        Config::new(
            &[out, Output { shape, ..out }],
            (THREADS, rows, 1),
            (THREADS, 1, 1),
            &[],
        )
    }
}

thread_local! {
    // A kernel object per width and epsilon, and its call description per shape.
    static KERNELS: RefCell<Kernels<Key, Vec<i32>>> = RefCell::default();
}

/// `(h + delta, rms_norm(h + delta) · weight)` through quest's kernel, when it is in use
/// and applies (see the module docs); `None` leaves it to MLX's ops.
pub fn add_norm(h: &Array, delta: &Array, weight: &Array, eps: f32) -> Result<Option<[Array; 2]>> {
    if !cuda_kernel::in_use(Kernel::AddNorm)? {
        return Ok(None);
    }
    let shape = h.shape();
    let width = *shape.last().unwrap_or(&0);
    let applies = shape.len() == 3
        && shape[1] == 1
        && delta.shape() == shape
        && weight.shape() == [width]
        && width > 0
        && width <= MAX_WIDTH
        && [h, delta, weight]
            .iter()
            .all(|a| a.dtype() == Dtype::Float16);
    if !applies {
        return Ok(None);
    }
    let key = Key {
        width,
        eps: eps.to_bits(),
    };
    let arrays = KERNELS.with(|kernels| {
        kernels.borrow_mut().apply(
            &key,
            Key::make,
            &shape.to_vec(),
            |shape| key.config(shape),
            &[h, delta, weight],
        )
    })?;
    let pair: [Array; 2] = arrays
        .try_into()
        .map_err(|_| anyhow::anyhow!("mlx: quest's add-norm kernel returned the wrong outputs"))?;
    Ok(Some(pair))
}

/// This kernel's full source for SmolLM2-135M's and Qwen3-8B's widths, to compile off the
/// GPU (`quest dev kernels`).
pub fn sources() -> Result<Vec<KernelSource>> {
    [(576, 1e-5f32), (4096, 1e-6)]
        .iter()
        .map(|&(width, eps)| {
            let key = Key {
                width,
                eps: eps.to_bits(),
            };
            key.spec().source(format!("add_norm-{width}.cu"), &[])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::cuda_kernel::Impl;
    use crate::device::Backend;

    #[test]
    fn the_header_names_every_constant_the_source_uses() {
        let header = Key {
            width: 4096,
            eps: 1e-6f32.to_bits(),
        }
        .header();
        for name in ["DIM = 4096", "EPS = 1e-6f", "BLOCK = 256"] {
            assert!(header.contains(name), "{name} missing from\n{header}");
        }
    }

    #[test]
    fn off_cuda_the_sum_and_norm_are_left_to_mlx() {
        let h = crate::lm::zeros_f16(&[1, 1, 64]);
        let w = crate::lm::zeros_f16(&[64]);
        cuda_kernel::set(Kernel::AddNorm, Impl::Quest);
        let out = add_norm(&h, &h, &w, 1e-6).unwrap();
        cuda_kernel::set(Kernel::AddNorm, Impl::Mlx);
        assert!(out.is_none() || Backend::detect() == Backend::Cuda);
    }
}
