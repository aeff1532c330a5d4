// linear-attention: Qwen3.5's gated delta rule, the recurrence every linear-attention
// layer of the model runs, written by you with MLX's ops.
// Your task (see the lesson): write `gated_delta` so the model computes what quest's
// recurrence computes. quest checks it alone first, on random tensors, then in the model.
//
// Instead of a cache that grows by a key and a value every token, each value head keeps
// one state matrix S ([Dv, Dk]) and updates it token by token, t = 0 … L − 1:
//
//   S = g_t · S                    forget: every entry decays by the head's g (0 < g < 1)
//   S = S + β_t (v_t − S k_t) ⊗ k_t  the delta rule: write v at key k, correcting what S
//                                    recalled there, with strength β
//   y_t = S q_t                    read the state with the query
//
// Shapes: `queries`, `keys` [B, L, Hk, Dk] (normed and scaled already); `values`
// [B, L, Hv, Dv], Hv a multiple of Hk (key head j serves value heads j·(Hv/Hk) …
// (j+1)·(Hv/Hk) − 1); `g`, `beta` [B, L, Hv]; `state` [B, Hv, Dv, Dk], float32.
// Return (y [B, L, Hv, Dv] in the queries' dtype, the new state).

use anyhow::Result;
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
        state: Array,
    ) -> Result<(Array, Array)> {
        todo!("your recurrence: the lesson's tasks say what to write")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every gated delta layer of the model updates its state with MyDelta from here on.
    let model = model.with_pieces(MyDelta);
    run.decode(&model, &tokenizer)
}
