//! quest's own 4-bit matrix-vector product for MLX's CUDA backend (issue #12).
//!
//! A decode step multiplies one activation row by every weight matrix: a stream of
//! bytes. MLX 0.32's CUDA `qmv` streams 4-bit weights at about 1 TB/s on an H200 (ncu,
//! docs/benchmarks.md), against 3.6–4.2 TB/s for a copy. This kernel reads the same
//! layout (uint32 words of eight 4-bit values, float16 scales and biases per group) and
//! runs inside MLX's graph as a custom kernel (mlx-c's `mlx_fast_cuda_kernel_*`, which
//! mlx-rs does not wrap), so nothing is repacked and the rest of the step is unchanged.
//! Measured alone on the Qwen3-8B shape (docs/gpu/qmv4/): 1.67 TB/s against MLX's ~1 TB/s.
//!
//! How it differs from MLX's: `x` is staged once per block in shared memory, paired so that
//! one shift and one `lop3` turn a word into two float16 weights (the 0x6400 trick: the
//! bits of 1024 + q), each lane reads 16 bytes of a row per load and has the next load in
//! flight while it multiplies, a warp owns four rows, and the bias term is applied once
//! per 32 weights through the sum of `x` over them. The weights are centred (q − 8) before
//! the float16 dot, so that no large common part is cancelled after it.
//!
//! Used for one activation row (decode), 4 bits, float16, `k` a multiple of 32 and group
//! sizes that are multiples of 32; everything else, and every backend but CUDA, goes to
//! MLX's `quantized_matmul`. `QUEST_QMV=mlx|quest` chooses (read once; [`cuda_kernel`]).
//! MLX's stays the default: quest's is right on a real model (docs/gpu/qmv_check.sh) but
//! faster only where the GPU, not the host, sets the pace, which depends on the machine
//! (`quest qmv` compares both on the models at hand).

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use crate::lm::cuda_kernel::{self, Config, CustomKernel, Kernel, Kernels, Output};

// Rows per warp and threads per block: the best of six measured (docs/gpu/qmv4/).
const ROWS_PER_WARP: i32 = 4;
const THREADS: i32 = 256;

const HEADER: &str = r#"
// Two float16 weights, centred, from one shift and one lop3: the bits of (1024 + q),
// minus 1032, give q - 8 exactly.
__device__ __forceinline__ __half2 quest_pair(uint32_t word, int s) {
  uint32_t t = ((word >> (4 * s)) & 0x000F000Fu) | 0x64006400u;
  __half2 h;
  memcpy(&h, &t, 4);
  return __hsub2(h, __float2half2_rn(1032.f));
}
"#;

// The body MLX wraps in `(const uint32_t* w, const __half* scales, const __half* biases,
// const __half* x, __half* y)` with `N`, `K`, `GROUP`, `R` as compile-time constants.
// The weights are centred (q - 8, in -8..7) before the float16 dot: with q itself (mean
// 7.5) the dot carries 7.5 · Σx, which the bias term then cancels, and float16's error on
// that large part survived the cancellation (SmolLM2's real activations: logits off by
// 2x, measured on the H200 in docs/gpu/2026-12-01-qmv-run1). `x` is stored divided by 16
// so that the products stay far from float16's range even for large activations; the
// float sum is multiplied back.
const SOURCE: &str = r#"
  extern __shared__ __align__(16) unsigned char quest_smem[];
  __half2* xs = reinterpret_cast<__half2*>(quest_smem);        // K/2 pairs, permuted
  float* csum = reinterpret_cast<float*>(quest_smem + K * 2);  // K/32 sums of x
  constexpr int CHUNKS = K / 32;
  constexpr int GROUPS = K / GROUP;
  const uint4* wq = reinterpret_cast<const uint4*>(w);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int row0 = (blockIdx.x * (blockDim.x / 32) + (tid >> 5)) * R;

  // The first weights are asked for before x is staged: the load overlaps the staging.
  uint4 q[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    q[r] = (row0 + r < N && lane < CHUNKS) ? __ldg(&wq[(size_t)(row0 + r) * CHUNKS + lane])
                                           : make_uint4(0, 0, 0, 0);

  const __half2 sixteenth = __float2half2_rn(0.0625f);
  for (int i = tid; i < K / 8; i += blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(x)[i];
    const __half* h = reinterpret_cast<const __half*>(&v);
#pragma unroll
    for (int s = 0; s < 4; ++s) xs[i * 4 + s] = __hmul2(__halves2half2(h[s], h[s + 4]), sixteenth);
  }
  for (int c = tid; c < CHUNKS; c += blockDim.x) {
    float s = 0.f;
    for (int j = 0; j < 32; ++j) s += __half2float(x[c * 32 + j]);
    csum[c] = s;
  }
  __syncthreads();
  if (row0 >= N) return;

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;

  for (int c = lane; c < CHUNKS; c += 32) {
    uint4 next[R];
    const int cn = c + 32;
#pragma unroll
    for (int r = 0; r < R; ++r)
      next[r] = (cn < CHUNKS && row0 + r < N) ? __ldg(&wq[(size_t)(row0 + r) * CHUNKS + cn])
                                              : make_uint4(0, 0, 0, 0);
    __half2 xv[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) xv[i] = xs[c * 16 + i];
    const float cs = csum[c];
    const int g = (c * 32) / GROUP;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = min(row0 + r, N - 1);
      const float sc = __half2float(scales[(size_t)row * GROUPS + g]);
      const float bi = __half2float(biases[(size_t)row * GROUPS + g]);
      __half2 d = __float2half2_rn(0.f);
      const uint32_t words[4] = {q[r].x, q[r].y, q[r].z, q[r].w};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
        for (int s = 0; s < 4; ++s) d = __hfma2(quest_pair(words[wi], s), xv[wi * 4 + s], d);
      }
      // w = sc * q + bi = sc * (q - 8) + (bi + 8 sc)
      acc[r] += sc * 16.f * (__low2float(d) + __high2float(d)) + (bi + 8.f * sc) * cs;
      q[r] = next[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && row0 + r < N) y[row0 + r] = __float2half(v);
  }
"#;

thread_local! {
    // One kernel object per `k` (its shared memory, x and its sums, is fixed when it is
    // made), and a call description per output shape and group size.
    static KERNELS: RefCell<Kernels<i32, (Vec<i32>, i32)>> = RefCell::default();
}

fn make_kernel(k: &i32) -> Result<CustomKernel> {
    let shared = k * 2 + (k / 32) * 4;
    CustomKernel::new(
        "quest_qmv4",
        &["w", "scales", "biases", "x"],
        &["y"],
        SOURCE,
        HEADER,
        shared,
    )
}

/// `x · Wᵀ` for a 4-bit matrix through quest's kernel, when it applies (see the module
/// docs); `None` leaves the product to MLX.
pub fn matvec(
    x: &Array,
    weight: &Array,
    scales: &Array,
    biases: &Array,
    group_size: i32,
    bits: i32,
) -> Result<Option<Array>> {
    if bits != 4 || !cuda_kernel::in_use(Kernel::Matvec)? {
        return Ok(None);
    }
    let k = *x.shape().last().unwrap_or(&0);
    let n = weight.shape().first().copied().unwrap_or(0);
    let applies = weight.ndim() == 2
        && x.size() == k as usize
        && k % 32 == 0
        && group_size % 32 == 0
        && k % group_size == 0
        && weight.shape()[1] == k / 8
        && weight.dtype() == Dtype::Uint32
        && x.dtype() == Dtype::Float16
        && scales.dtype() == Dtype::Float16
        && biases.dtype() == Dtype::Float16;
    if !applies {
        return Ok(None);
    }
    let mut out_shape: Vec<i32> = x.shape().to_vec();
    *out_shape.last_mut().expect("x has a last axis") = n;
    let rows_per_block = (THREADS / 32) * ROWS_PER_WARP;
    let blocks = (n + rows_per_block - 1) / rows_per_block;
    let config = |(shape, group): &(Vec<i32>, i32)| {
        Config::new(
            &[Output {
                shape,
                dtype: Dtype::Float16,
            }],
            (blocks * THREADS, 1, 1),
            (THREADS, 1, 1),
            &[("N", n), ("K", k), ("GROUP", *group), ("R", ROWS_PER_WARP)],
        )
    };
    let y = KERNELS.with(|kernels| {
        kernels.borrow_mut().apply(
            &k,
            make_kernel,
            &(out_shape, group_size),
            config,
            &[weight, scales, biases, x],
        )
    })?;
    Ok(y.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::cuda_kernel::Impl;
    use crate::lm::Backend;

    #[test]
    fn off_cuda_the_product_is_left_to_mlx() {
        // This test build runs MLX on the CPU: quest's kernel never applies.
        let x = Array::zeros::<f32>(&[1, 1, 256])
            .unwrap()
            .as_dtype(Dtype::Float16)
            .unwrap();
        let w = Array::zeros::<u32>(&[8, 32]).unwrap();
        let s = Array::zeros::<f32>(&[8, 8])
            .unwrap()
            .as_dtype(Dtype::Float16)
            .unwrap();
        cuda_kernel::set(Kernel::Matvec, Impl::Quest);
        let y = matvec(&x, &w, &s, &s, 32, 4).unwrap();
        cuda_kernel::set(Kernel::Matvec, Impl::Mlx);
        assert!(y.is_none() || Backend::detect() == Backend::Cuda);
    }
}
