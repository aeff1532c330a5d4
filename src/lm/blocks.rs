//! Attention in blocks, as flash-decoding computes it: a query's keys taken a block at a
//! time, each block leaving a [`Partial`] (its largest score, the sum of its weights
//! `e^(s − max)`, and the values summed with those weights), and the partials combined at
//! the end into the softmax over every key. No step holds the scores of the whole cache.
//!
//! A learner writes the two halves ([`BlockAttention`]); [`InBlocks`] is quest's loop
//! around them, the model's attention: it cuts the cache into blocks of
//! `QUEST_ATTENTION_BLOCK` keys for a decode step, and hands a prompt's queries every key
//! at once with the causal mask (one block). [`when_asked`] is its piece check.

use anyhow::{bail, Result};
use mlx_rs::ops::{arange, le};
use mlx_rs::Array;

use crate::course::spec::Piece;
use crate::lm::pieces::{Mask, Pieces};

/// What one block of keys leaves of a query's attention. The shapes are the learner's to
/// choose, but none may grow with the block: a partial is the block summed up.
pub struct Partial {
    /// The values weighted by `e^(s − max)` and summed over the block's keys.
    pub out: Array,
    /// The block's largest score, per query.
    pub max: Array,
    /// `Σ e^(s − max)` over the block's keys, per query.
    pub sum: Array,
}

/// Attention computed a block of keys at a time.
pub trait BlockAttention: Send + Sync {
    /// `queries` `[B, H, L, D]` against one block of `keys` and `values` `[B, KV, T, D]`
    /// (each key head serving `H / KV` query heads), the scores scaled by `scale`. `mask`,
    /// `[L, T]` booleans, says which keys each query may see (none: every key).
    fn block(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<&Array>,
    ) -> Result<Partial>;

    /// Every block's partial, in the keys' order, into the attention's output
    /// `[B, H, L, D]`.
    fn combine(&self, partials: Vec<Partial>) -> Result<Array>;
}

impl<A: BlockAttention + ?Sized> BlockAttention for &A {
    fn block(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<&Array>,
    ) -> Result<Partial> {
        (**self).block(queries, keys, values, scale, mask)
    }

    fn combine(&self, partials: Vec<Partial>) -> Result<Array> {
        (**self).combine(partials)
    }
}

/// The keys a decode step's block holds: `QUEST_ATTENTION_BLOCK`.
pub fn block_size() -> Result<i32> {
    let size: i32 = crate::settings::ATTENTION_BLOCK.parse()?;
    anyhow::ensure!(
        size >= 1,
        "{} must be 1 or more",
        crate::settings::ATTENTION_BLOCK.name
    );
    Ok(size)
}

/// The model's attention through a learner's blocks: quest cuts the cache, the learner's
/// code computes and combines.
pub struct InBlocks<A> {
    blocks: A,
    size: i32,
}

impl<A: BlockAttention> InBlocks<A> {
    /// `blocks` with decode steps cut into blocks of `size` keys.
    pub fn new(blocks: A, size: i32) -> Self {
        InBlocks { blocks, size }
    }
}

impl<A: BlockAttention> Pieces for InBlocks<A> {
    fn attention(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<Mask>,
    ) -> Result<Array> {
        let (l, t) = (queries.shape()[2], keys.shape()[2]);
        if let (Some(Mask::Causal), true) = (mask, l > 1) {
            // A prompt: every key in one block, query i at position t − l + i seeing the
            // keys up to it.
            let query = arange::<_, i32>(t - l, t, None)?.reshape(&[l, 1])?;
            let key = arange::<_, i32>(0, t, None)?.reshape(&[1, t])?;
            let visible = le(&key, &query)?;
            let partial = self
                .blocks
                .block(queries, keys, values, scale, Some(&visible))?;
            return self.blocks.combine(vec![partial]);
        }
        let starts: Vec<i32> = (self.size..t).step_by(self.size as usize).collect();
        let (keys, values) = (
            keys.split_at_indices(&starts, 2)?,
            values.split_at_indices(&starts, 2)?,
        );
        let mut partials: Vec<Partial> = Vec::with_capacity(keys.len());
        for (i, (k, v)) in keys.iter().zip(&values).enumerate() {
            let partial = self.blocks.block(queries, k, v, scale, None)?;
            if let Some(first) = partials.first() {
                let shapes = |p: &Partial| {
                    [
                        p.out.shape().to_vec(),
                        p.max.shape().to_vec(),
                        p.sum.shape().to_vec(),
                    ]
                };
                if shapes(first) != shapes(&partial) {
                    bail!(
                        "block {i} ({} keys) left a partial shaped {:?} (out, max, sum), block 0 \
                         ({} keys) one shaped {:?}: a partial must not grow with its block. It \
                         is the block summed up: its largest score, Σ e^(s − max), and the \
                         values weighted by e^(s − max), per query",
                        k.shape()[2],
                        shapes(&partial),
                        keys[0].shape()[2],
                        shapes(first)
                    );
                }
            }
            partials.push(partial);
        }
        self.blocks.combine(partials)
    }
}

/// quest asked for the piece check on its line: check `blocks` (attention's shapes cut
/// into blocks of 4 keys, and decode queries over caches to 16k keys cut as the model cuts
/// them), send the verdict, and end the process when quest asked for the check alone.
pub(crate) fn when_asked<A: BlockAttention>(blocks: &A, size: i32) {
    if let Some((Piece::Attention, alone)) = crate::line::piece_check() {
        let verdict = crate::lm::pieces::uncounted(|| {
            crate::lm::piece_check::check_in_blocks(
                &InBlocks::new(blocks, 4),
                &InBlocks::new(blocks, size),
                size,
            )
        });
        crate::lm::piece_check::answer(verdict, alone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::piece_check::{check_in_blocks, random};
    use mlx_rs::ops::{exp, matmul, maximum, select};
    use mlx_rs::Dtype;

    /// The blocks written from the math (the lesson's solution, in short); with
    /// `no_rescale`, each block's sums added as they are, on its own max.
    struct Written {
        no_rescale: bool,
        keys_kept: bool,
    }

    impl BlockAttention for Written {
        fn block(
            &self,
            queries: &Array,
            keys: &Array,
            values: &Array,
            scale: f32,
            mask: Option<&Array>,
        ) -> Result<Partial> {
            let (q, k) = (queries.shape().to_vec(), keys.shape().to_vec());
            let grouped = queries.reshape(&[q[0], k[1], q[1] / k[1], q[2], q[3]])?;
            let (keys, values) = (keys.expand_dims(2)?, values.expand_dims(2)?);
            let scores = matmul(&grouped, keys.swap_axes(-1, -2)?)?
                .as_dtype(Dtype::Float32)?
                .multiply(Array::from_f32(scale))?;
            let scores = match mask {
                Some(m) => select(m, &scores, Array::from_f32(f32::NEG_INFINITY))?,
                None => scores,
            };
            let max = scores.max_axis(-1, true)?;
            let weights = exp(scores.subtract(&max)?)?;
            let sum = weights.sum_axis(-1, true)?;
            let out = if self.keys_kept {
                keys.as_dtype(Dtype::Float32)?
            } else {
                matmul(&weights, values.as_dtype(Dtype::Float32)?)?
            };
            Ok(Partial { out, max, sum })
        }

        fn combine(&self, partials: Vec<Partial>) -> Result<Array> {
            let mut top = partials[0].max.clone();
            for p in &partials[1..] {
                top = maximum(&top, &p.max)?;
            }
            let (mut out, mut sum) = (Array::from_f32(0.0), Array::from_f32(0.0));
            for p in &partials {
                let r = if self.no_rescale {
                    Array::from_f32(1.0)
                } else {
                    exp(p.max.subtract(&top)?)?
                };
                out = out.add(p.out.multiply(&r)?)?;
                sum = sum.add(p.sum.multiply(&r)?)?;
            }
            let out = out.divide(&sum)?;
            let s = out.shape().to_vec();
            Ok(out.reshape(&[s[0], s[1] * s[2], s[3], s[4]])?)
        }
    }

    const RIGHT: Written = Written {
        no_rescale: false,
        keys_kept: false,
    };

    /// Blocks written from the math pass every shape; sums left on each block's own max
    /// pass only where a call is one block.
    #[test]
    fn the_check_passes_the_math_and_refuses_unrescaled_blocks() {
        let verdict = check_in_blocks(&InBlocks::new(&RIGHT, 4), &InBlocks::new(&RIGHT, 256), 256);
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.rows.len(), 20);
        let wrong = Written {
            no_rescale: true,
            keys_kept: false,
        };
        let verdict = check_in_blocks(&InBlocks::new(&wrong, 4), &InBlocks::new(&wrong, 256), 256);
        assert!(!verdict.passed());
        // The prompts (one block, the causal mask) are right all the same.
        assert!(verdict.right() > 0, "{verdict:?}");
    }

    /// A partial that holds the block's keys grows with the block: refused, said why.
    #[test]
    fn a_partial_that_grows_with_its_block_is_refused() {
        let kept = Written {
            no_rescale: false,
            keys_kept: true,
        };
        let q = random(&[1, 4, 1, 8], 1, Dtype::Float32).unwrap();
        let k = random(&[1, 2, 10, 8], 2, Dtype::Float32).unwrap();
        let error = InBlocks::new(&kept, 4)
            .attention(&q, &k, &k, 0.5, None)
            .unwrap_err();
        assert!(
            format!("{error}").contains("a partial must not grow with its block"),
            "{error}"
        );
        // Cut the same way, the math's blocks give one softmax over every key.
        let whole = crate::lm::pieces::QuestPieces
            .attention(&q, &k, &k, 0.5, None)
            .unwrap();
        let blocks = InBlocks::new(&RIGHT, 4)
            .attention(&q, &k, &k, 0.5, None)
            .unwrap();
        let diff = mlx_rs::ops::abs(blocks.subtract(&whole).unwrap())
            .unwrap()
            .max(None)
            .unwrap()
            .item_cast::<f32>();
        assert!(diff < 1e-5, "{diff}");
    }
}
