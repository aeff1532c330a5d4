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
    // TODO: the sum of the row's squares across the block, then every value of the row
    // times rsqrt(sum / D + eps[0]) times its weight, written to `out`.
    body: r#"
"#,
};

struct KernelNorm;

impl Pieces for KernelNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        // Right, in MLX's ops: each a node of the graph, built by the host every step.
        // TODO: launch NORM instead (`NORM.launch`), one block of 256 threads a row.
        let mean_square = x.square()?.mean_axis(-1, true)?;
        let inverse_rms = mean_square.add(Array::from_f32(eps))?.rsqrt()?;
        Ok(x.multiply(&inverse_rms)?.multiply(weight)?)
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
