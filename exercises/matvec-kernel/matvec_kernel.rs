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

use anyhow::Result;
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
    // TODO: for output row n, every lane sums its share of the row's groups (scale · Σ q·x
    // + bias · Σ x, in float32), the warp adds its lanes' sums, and one lane writes
    // y[blockIdx.y · N + n].
    body: r#"
"#,
};

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
        // TODO: launch MATVEC (`MATVEC.launch`): one warp an output row, eight warps a
        // block, one grid row per row of x; N, K and GROUP as the constants.
        todo!("your 4-bit matvec kernel: the lesson's tasks say what to write")
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
