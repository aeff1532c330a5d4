// rope: the rotary position embedding every attention layer applies to its queries and
// keys, written with MLX's ops.
// Your task (see the lesson): finish `rope` so the model computes what MLX's fused RoPE
// computes.
//
// Each head's first `dims` channels are taken as `dims / 2` pairs; pair i at position p is
// turned by the angle p · base^(-2i/dims). Split-half layout (`traditional: false`): pair i
// is channels (i, i + dims/2). Traditional layout: pair i is channels (2i, 2i + 1).

use anyhow::Result;
use mlx_rs::ops::{arange, concatenate, cos, sin, split_at_indices, stack};
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
        let shape = x.shape().to_vec();
        let (l, half) = (shape[2], dims / 2);
        // One angle per position and pair, p · base^(-2i/dims) = p · exp(-2i/dims · ln base):
        // [L, dims/2].
        // TODO: these are the L positions of this call, counted from 0. Where do they start
        // in the sequence? (A decode step's one token is not at position 0.)
        let _ = offset;
        let positions = arange::<_, f32>(0, l, None)?.reshape(&[l, 1])?;
        let pair =
            arange::<_, f32>(0, half, None)?.multiply(Array::from_f32(-2.0 / dims as f32))?;
        let freq = pair.multiply(Array::from_f32(base.ln()))?.exp()?;
        let angle = positions.multiply(&freq)?;
        let (cos, sin) = (
            cos(&angle)?.as_dtype(x.dtype())?,
            sin(&angle)?.as_dtype(x.dtype())?,
        );
        // Channels past `dims` (a partial rotation) pass through unchanged.
        let parts = split_at_indices(x, &[dims], -1)?;
        let (a, b) = if traditional {
            let pairs = parts[0].reshape(&[shape[0], shape[1], l, half, 2])?;
            let ab = split_at_indices(&pairs, &[1], -1)?;
            (ab[0].squeeze_axes(&[-1])?, ab[1].squeeze_axes(&[-1])?)
        } else {
            let ab = split_at_indices(&parts[0], &[half], -1)?;
            (ab[0].clone(), ab[1].clone())
        };
        // The 2-D rotation of each pair (a, b) by its angle.
        let ra = a.multiply(&cos)?.subtract(b.multiply(&sin)?)?;
        let rb = a.multiply(&sin)?.add(b.multiply(&cos)?)?;
        let rotated = if traditional {
            stack(&[ra, rb], -1)?.reshape(&[shape[0], shape[1], l, dims])?
        } else {
            concatenate(&[ra, rb], -1)?
        };
        if dims == shape[3] {
            return Ok(rotated);
        }
        Ok(concatenate(&[rotated, parts[1].clone()], -1)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every attention layer rotates its queries and keys with MyRope from here on.
    let model = model.with_pieces(MyRope);
    run.decode(&model, &tokenizer)
}
