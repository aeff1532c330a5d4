// rope: the rotary position embedding every attention layer applies to its queries and
// keys, written by you with MLX's ops.
// Your task (see the lesson): write `rope` so the model computes what MLX's fused RoPE
// computes. quest checks it alone first, on random tensors, then in the model.
//
// `x` is [B, heads, L, head_dim]: L positions, the first at `offset` (0 for a prompt; the
// cache's length for a decode step's one token). Each head's first `dims` channels are
// `dims / 2` pairs; pair i at position p turns by the angle
//
//   θ(p, i) = p · base^(-2i/dims)            (a, b) -> (a·cos θ − b·sin θ,  a·sin θ + b·cos θ)
//
// Split-half layout (`traditional: false`): pair i is channels (i, i + dims/2).
// Traditional layout (`traditional: true`): pair i is channels (2i, 2i + 1).
// Channels past `dims` (a partial rotation) pass through unchanged. The result has x's
// shape and dtype.

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyRope;

impl Pieces for MyRope {
    fn rope(
        &self,
        x: &Array,
        dims: i32,
        traditional: bool,
        base: f32,
        offset: i32,
    ) -> Result<Array> {
        todo!("your RoPE: the lesson's tasks say what to write")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer rotates its queries and keys with MyRope from here on.
    let model = model.with_pieces(MyRope);
    run.decode(&model, &tokenizer)
}
