// mlp: every layer's feed-forward, the SwiGLU MLP, written by you with MLX's ops.
// Your task (see the lesson): write `mlp` so the model computes what quest's MLP
// computes. quest checks it alone first, on random tensors, then in the model.
//
//   mlp(x)  = down_proj(silu(gate_proj(x)) · up_proj(x))
//   silu(g) = g · sigmoid(g) = g / (1 + e^(−g))
//
// `x` is [B, L, 576], the block's normed input. `layers` holds the block's three
// projections, the model's own (dense or quantized: call them, they multiply):
// `layers.gate_proj(x)?` and `layers.up_proj(x)?` give [B, L, 1536],
// `layers.down_proj(h)?` takes [B, L, 1536] back to [B, L, 576].
// The result keeps x's shape and dtype (float32 here, float16 on a GPU).

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, MlpLayers, Pieces};

struct MyMlp;

impl Pieces for MyMlp {
    fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
        todo!("gate and up of x, silu of the gate times up, then down")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's MLP is MyMlp's from here on.
    let model = model.with_pieces(MyMlp);
    run.decode(&model, &tokenizer)
}
