// mlp: every layer's feed-forward, the SwiGLU MLP, written with MLX's ops.
//
// Each layer's MLP is down_proj(silu(gate_proj(x)) · up_proj(x)), with
// silu(g) = g · sigmoid(g) = g / (1 + e^(−g)). The three projections are the model's own
// layers, dense or quantized as it holds them; the arithmetic between them is yours.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, MlpLayers, Pieces};

struct MyMlp;

impl Pieces for MyMlp {
    fn mlp(&self, x: &Array, layers: &MlpLayers) -> Result<Array> {
        // x: [B, L, 576]. Two views of it, each [B, L, 1536].
        let gate = layers.gate_proj(x)?;
        let up = layers.up_proj(x)?;
        // A constant in the gate's own dtype: a float32 one would make float16 float32.
        let dtype = gate.dtype();
        let one = Array::from_f32(1.0).as_dtype(dtype)?;
        // sigmoid(g) = 1 / (1 + e^(−g)), element by element; silu(g) = g · sigmoid(g).
        let decay = gate.negative()?.exp()?;
        let sigmoid = one.divide(one.add(&decay)?)?;
        let silu = gate.multiply(&sigmoid)?;
        // The gate lets each of up's 1536 channels through by its own amount.
        let hidden = silu.multiply(&up)?;
        // Back to the residual stream's width: [B, L, 576].
        layers.down_proj(&hidden)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's MLP is MyMlp's from here on.
    let model = model.with_pieces(MyMlp);
    run.decode(&model, &tokenizer)
}
