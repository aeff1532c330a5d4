// linear-attention: Qwen3.5's gated delta rule, the recurrence every linear-attention
// layer of the model runs, written with MLX's ops.
//
// Instead of a cache that grows by a key and a value every token, each value head keeps
// one state matrix S ([Dv, Dk]) and updates it token by token:
//   S = g · S                  forget: every entry decays by the head's g (0 < g < 1)
//   S = S + β (v − S k) ⊗ k    the delta rule: write v at key k, correcting what S
//                              recalled there, with strength β
//   y = S q                    read the state with the query

use anyhow::Result;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{broadcast_to, stack};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyDelta;

impl Pieces for MyDelta {
    fn gated_delta(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        g: &Array,
        beta: &Array,
        mut state: Array,
    ) -> Result<(Array, Array)> {
        let shape = queries.shape();
        let (b, l, key_heads, dk) = (shape[0], shape[1], shape[2], shape[3]);
        let value_heads = values.shape()[2];
        // Each key head serves value_heads / key_heads value heads: repeat it for its group.
        let grouped = |t: &Array| -> Result<Array> {
            let t = t.reshape(&[b, l, key_heads, 1, dk])?;
            let repeated = broadcast_to(&t, &[b, l, key_heads, value_heads / key_heads, dk])?;
            Ok(repeated.reshape(&[b, l, value_heads, dk])?)
        };
        let (q, k) = (grouped(queries)?, grouped(keys)?);
        let mut ys = Vec::new();
        for t in 0..l {
            // Token t's rows: [B, H, D]; its g and β, one per head, as [B, H, 1, 1] / [B, H, 1].
            let (q_t, k_t, v_t) = (q.index((.., t)), k.index((.., t)), values.index((.., t)));
            let g_t = g.index((.., t)).expand_dims(-1)?.expand_dims(-1)?;
            let beta_t = beta.index((.., t)).expand_dims(-1)?;
            state = state.multiply(&g_t)?;
            let k_row = k_t.expand_dims(-2)?; // [B, H, 1, Dk]
            let recalled = mlx_rs::ops::matmul(&state, k_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?; // S k
            let delta = v_t.subtract(recalled)?.multiply(&beta_t)?;
            state = state.add(delta.expand_dims(-1)?.multiply(&k_row)?)?;
            let y = mlx_rs::ops::matmul(&state, q_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?; // S q
            ys.push(y.as_dtype(queries.dtype())?);
        }
        Ok((stack(&ys, 1)?, state))
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every gated delta layer of the model updates its state with MyDelta from here on.
    let model = model.with_pieces(MyDelta);
    run.decode(&model, &tokenizer)
}
