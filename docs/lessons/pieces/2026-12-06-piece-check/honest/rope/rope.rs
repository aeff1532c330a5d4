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
use mlx_rs::ops::{arange, concatenate, negative, power, split_at_indices};
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
        // x·cos + rotate(x)·sin, where rotate turns each pair (a, b) into (−b, a).
        let shape = x.shape().to_vec();
        let (b, h, l, half) = (shape[0], shape[1], shape[2], dims / 2);
        let i = arange::<_, f32>(0, half, None)?;
        let inv = power(Array::from_f32(base), i.multiply(Array::from_f32(-2.0 / dims as f32))?)?;
        let p = arange::<_, f32>(offset, offset + l, None)?.reshape(&[l, 1])?;
        let theta = p.multiply(&inv)?; // [L, half]
        let parts = split_at_indices(x, &[dims], -1)?;
        let head = &parts[0];
        let (cos, sin) = (theta.cos()?, theta.sin()?);
        let turned = if traditional {
            let pairs = head.reshape(&[b, h, l, half, 2])?;
            let ab = split_at_indices(&pairs, &[1], -1)?;
            let (a, bb) = (ab[0].clone(), ab[1].clone());
            let (c, s) = (cos.reshape(&[l, half, 1])?, sin.reshape(&[l, half, 1])?);
            let rotated = concatenate(&[negative(&bb)?, a.clone()], -1)?;
            pairs
                .multiply(&c)?
                .add(rotated.multiply(&s)?)?
                .reshape(&[b, h, l, dims])?
        } else {
            let ab = split_at_indices(head, &[half], -1)?;
            let rotated = concatenate(&[negative(&ab[1])?, ab[0].clone()], -1)?;
            let (c, s) = (
                concatenate(&[cos.clone(), cos], -1)?,
                concatenate(&[sin.clone(), sin], -1)?,
            );
            head.multiply(&c)?.add(rotated.multiply(&s)?)?
        };
        let turned = turned.as_dtype(x.dtype())?;
        if dims == shape[3] {
            return Ok(turned);
        }
        Ok(concatenate(&[turned, parts[1].clone()], -1)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer rotates its queries and keys with MyRope from here on.
    let model = model.with_pieces(MyRope);
    run.decode(&model, &tokenizer)
}
