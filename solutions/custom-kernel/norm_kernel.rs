// custom-kernel: the norm as one CUDA kernel of your own, inside the model.
// Your task (see the lesson): write the kernel's body, and launch it from `rms_norm` in
// place of MLX's ops, so that every norm of the step is one node of the graph.
//
// RMSNorm: x · rsqrt(mean(x²) + eps) · weight, over the last axis (D values a row).

use anyhow::Result;
use mlx_rs::{Array, Dtype};
use quest::kernels::YourKernel;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

/// The norm in CUDA: MLX writes the function around the body, taking `x`, `weight` and
/// `eps` (`const` pointers), then `out`, and `D` (the row's width) as a `constexpr int`.
/// One thread block a row: `blockIdx.x` is the row, `threadIdx.x` one of `blockDim.x`.
const NORM: YourKernel = YourKernel {
    name: "my_norm",
    inputs: &[
        ("x", Dtype::Float16),
        ("weight", Dtype::Float16),
        ("eps", Dtype::Float32),
    ],
    outputs: &[("out", Dtype::Float16)],
    body: r#"
  const __half* row = x + (size_t)blockIdx.x * D;
  __half* row_out = out + (size_t)blockIdx.x * D;
  // Each thread's share of the squares, in float32.
  float sum = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = __half2float(row[i]);
    sum += v * v;
  }
  // Across the warp, then the warps' sums across the block.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffff, sum, offset);
  }
  __shared__ float warp_sums[32];
  if (threadIdx.x % 32 == 0) {
    warp_sums[threadIdx.x / 32] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; w++) {
      total += warp_sums[w];
    }
    warp_sums[0] = rsqrtf(total / D + eps[0]);
  }
  __syncthreads();
  const float inverse_rms = warp_sums[0];
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    row_out[i] = __float2half(__half2float(row[i]) * inverse_rms * __half2float(weight[i]));
  }
"#,
};

/// Threads a block: a multiple of 32 (a warp).
const THREADS: i32 = 256;

struct KernelNorm;

impl Pieces for KernelNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        let d = x.shape()[x.ndim() - 1];
        let rows = x.size() as i32 / d;
        // Every input an array of at least one value; the weight in x's dtype, as the
        // kernel reads it.
        let eps = Array::from_slice(&[eps], &[1]);
        let weight = weight.as_dtype(x.dtype())?;
        NORM.launch(
            &[x, &weight, &eps],
            (x.shape(), x.dtype()),
            (rows, 1, 1),
            (THREADS, 1, 1),
            &[("D", d)],
        )
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // Off an NVIDIA GPU your kernel cannot run: NVRTC compiles it (for an H200, at
    // SmolLM2's width) and the run stops there, saying what NVRTC said.
    NORM.compile_or_stop(&[("D", 576)])?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every norm of every layer, and the final one, is KernelNorm's from here on.
    let model = model.with_pieces(KernelNorm);
    // The loop, then the ops of one decode step counted and the host's µs per op here.
    run.decode_counting_ops(&model, &tokenizer)
}
