// matvec-kernel: the 4-bit matrix-vector product as one CUDA kernel of your own, inside
// the model: every projection of every layer reads its packed weights through it.
// Your task (see the lesson): write the kernel's body, and launch it from
// `quantized_matmul` in place of MLX's quantized matmul.
//
// `w` is [N, K / 8], uint32: each word packs eight 4-bit values, the first in the lowest
// bits, so value j of a word is q_j = (word >> 4j) & 15. Along a row, each run of GROUP
// values shares one of `scales` and `biases` ([N, K / GROUP]): the weight is
// scale · q + bias. For each row m of x ([M, K]) and each output n:
//
//   y[m, n] = Σ_k x[m, k] · (scale[n, k / GROUP] · q[n, k] + bias[n, k / GROUP])
//           = Σ_groups ( scale · Σ_k q · x  +  bias · Σ_k x )

use anyhow::{ensure, Result};
use mlx_rs::{Array, Dtype};
use quest::kernels::YourKernel;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

/// The product in CUDA: MLX writes the function around the body, taking `w`, `scales`,
/// `biases` and `x` (`const` pointers), then `y`, and `N`, `K`, `GROUP` as `constexpr
/// int`s. One warp an output row: lane `threadIdx.x % 32` of warp `threadIdx.x / 32`;
/// `blockIdx.y` is the row of x.
const MATVEC: YourKernel = YourKernel {
    name: "my_matvec",
    inputs: &[
        ("w", Dtype::Uint32),
        ("scales", Dtype::Float16),
        ("biases", Dtype::Float16),
        ("x", Dtype::Float16),
    ],
    outputs: &[("y", Dtype::Float16)],
    body: r#"
  const int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) {
    return;
  }
  const __half* x_row = x + (size_t)blockIdx.y * K;
  // Row n: K / 8 words, read four at a time (16 bytes: 32 values, one group's or part of
  // one, since GROUP is a multiple of 32). Consecutive lanes read consecutive 16 bytes.
  const uint4* w_row = reinterpret_cast<const uint4*>(w + (size_t)n * (K / 8));
  const __half* scale_row = scales + (size_t)n * (K / GROUP);
  const __half* bias_row = biases + (size_t)n * (K / GROUP);
  float sum = 0.0f;
#pragma unroll 4
  for (int c = lane; c < K / 32; c += 32) {
    const uint4 q = w_row[c];
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    const __half* xs = x_row + c * 32;
    float dot = 0.0f;
    float x_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float v = __half2float(xs[i * 8 + j]);
        dot += (float)((words[i] >> (4 * j)) & 15u) * v;
        x_sum += v;
      }
    }
    const int g = c * 32 / GROUP;
    sum += __half2float(scale_row[g]) * dot + __half2float(bias_row[g]) * x_sum;
  }
  // The warp's 32 partial sums, added across its lanes.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffff, sum, offset);
  }
  if (lane == 0) {
    y[(size_t)blockIdx.y * N + n] = __float2half(sum);
  }
"#,
};

/// Threads a block: eight warps, eight output rows.
const THREADS: i32 = 256;

struct KernelMatvec;

impl Pieces for KernelMatvec {
    fn quantized_matmul(
        &self,
        x: &Array,
        weight: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        ensure!(bits == 4, "my_matvec reads 4-bit values, not {bits}-bit");
        ensure!(
            group_size % 32 == 0,
            "my_matvec reads 32 values at a time: group size {group_size}"
        );
        let k = x.shape()[x.ndim() - 1];
        let n = weight.shape()[0];
        let m = x.size() as i32 / k;
        let mut shape = x.shape().to_vec();
        *shape.last_mut().unwrap() = n;
        // The kernel reads float16: a float32 x (and its scales) goes in as float16.
        let half = |a: &Array| a.as_dtype(Dtype::Float16);
        let y = MATVEC.launch(
            &[weight, &half(scales)?, &half(biases)?, &half(x)?],
            (&shape, Dtype::Float16),
            ((n + THREADS / 32 - 1) / (THREADS / 32), m, 1),
            (THREADS, 1, 1),
            &[("N", n), ("K", k), ("GROUP", group_size)],
        )?;
        Ok(y.as_dtype(x.dtype())?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    // Off an NVIDIA GPU your kernel cannot run: NVRTC compiles it (for an H200, at the
    // shape of SmolLM2's gate and up) and the run stops there, saying what NVRTC said.
    MATVEC.compile_or_stop(&[("N", 1536), ("K", 576), ("GROUP", 32)])?;
    // The matrices as the file stores them, 4 bits a weight.
    let (model, tokenizer) = lm::load_with(&run.model, lm::Hold::Quantized)?;
    // Every projection of every layer multiplies through KernelMatvec from here on.
    let model = model.with_pieces(KernelMatvec);
    run.decode(&model, &tokenizer)
}
