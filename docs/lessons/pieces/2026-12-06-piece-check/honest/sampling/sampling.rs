// sampling: each step's next token drawn from the model's logits, on the device, from a
// seeded key: temperature, then top-k, then top-p, then one draw.
// Your task (see the lesson): finish `sample` so that it draws what `sampling` asks for.
//
// `logits` is [rows, vocab], float32; return [rows, draws] token ids, every row's drawn
// from its own logits with `key`.

use anyhow::Result;
use mlx_rs::ops::indexing::{argmax_axis, IndexOp};
use mlx_rs::ops::{
    broadcast_to, cumsum, min_axis, select, softmax_axis, sort_axis,
};
use mlx_rs::random::{categorical, ShapeOrCount};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Sampler, Sampling};

struct MySampler;

impl Sampler for MySampler {
    fn sample(
        &self,
        logits: &Array,
        sampling: &Sampling,
        draws: i32,
        key: &Array,
    ) -> Result<Array> {
        let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);
        // Temperature 0 is greedy: the argmax, every draw.
        if sampling.temperature == 0.0 {
            let best = argmax_axis(logits, -1, true)?;
            return Ok(broadcast_to(&best, &[rows, draws])?);
        }
        let minus_inf = Array::from_f32(f32::NEG_INFINITY);
        // 1. Temperature: below 1 sharpens the distribution, above 1 flattens it.
        let mut z = logits.multiply(Array::from_f32(1.0 / sampling.temperature))?;
        // 2. top-k: the k-th largest of each row is a threshold; a partition finds it
        // without sorting the row.
        if sampling.top_k > 0 && sampling.top_k < vocab {
            let at = vocab - sampling.top_k;
            // The k-th largest read off a full sort (slower than a partition, the same value).
            let kth = sort_axis(&z, -1)?.index((.., at..at + 1));
            z = select(z.lt(&kth)?, &minus_inf, &z)?;
        }
        // 3. top-p: sorted ascending, each token's mass above it is what the larger ones
        // hold (a reversed, exclusive cumulative sum); the nucleus is every token with less
        // than top_p above it, so the one that crosses top_p stays.
        if sampling.top_p < 1.0 {
            let sorted = sort_axis(&z, -1)?;
            let probabilities = softmax_axis(&sorted, -1, true)?;
            let above = cumsum(&probabilities, -1, true, false)?;
            let nucleus = select(
                above.lt(Array::from_f32(sampling.top_p))?,
                &sorted,
                Array::from_f32(f32::INFINITY),
            )?;
            let smallest = min_axis(&nucleus, -1, true)?;
            z = select(z.lt(&smallest)?, &minus_inf, &z)?;
        }
        // 4. The draw: `draws` tokens a row from softmax(z), on the device, from `key`.
        Ok(categorical(&z, -1, ShapeOrCount::Count(draws), key)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every step's token is MySampler's draw from here on.
    run.decode_sampled(&model, &tokenizer, &MySampler)
}
