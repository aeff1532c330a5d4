// mlp: the SwiGLU gate every layer's feed-forward calls, written with MLX's ops.
//
// Each layer's MLP is down_proj(silu(gate_proj(x)) · up_proj(x)), with
// silu(x) = x · sigmoid(x). quest computes both projections (one matmul, gate and up
// stacked) and down_proj; the gate between them, silu(gate) · up, is yours.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MySwiGlu;

impl Pieces for MySwiGlu {
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        // gate and up: [B, L, 1536], one value per channel of the intermediate width.
        // silu lets each gate value through in proportion to its own sigmoid.
        let silu = gate.divide(gate.negative()?.exp()?.add(Array::from_f32(1.0))?)?;
        Ok(silu.multiply(up)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's gate is MySwiGlu's from here on.
    let model = model.with_pieces(MySwiGlu);
    run.decode(&model, &tokenizer)
}
