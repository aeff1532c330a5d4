// sampling: each step's next token drawn from the model's logits, on the device, from a
// seeded key, as mlx-lm's `make_sampler` draws it: top-p, min-p and top-k on the
// log-probabilities, the temperature only at the draw.

use anyhow::Result;
use mlx_rs::ops::indexing::{argmax_axis, IndexOp};
use mlx_rs::ops::{
    broadcast_to, cumsum, logsumexp_axis, max_axis, min_axis, partition_axis, select, sort_axis,
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
        // 1. Log-probabilities: the filters read the model's own distribution.
        let mut logprobs = logits.subtract(logsumexp_axis(logits, -1, true)?)?;
        // 2. top-p: sorted ascending, each token's mass above it is what the more likely
        // ones hold (a reversed, exclusive cumulative sum); the nucleus is every token with
        // less than top_p above it, so the one that crosses top_p stays.
        if sampling.top_p < 1.0 {
            let sorted = sort_axis(&logprobs, -1)?;
            let above = cumsum(sorted.exp()?, -1, true, false)?;
            let nucleus = select(
                above.lt(Array::from_f32(sampling.top_p))?,
                &sorted,
                Array::from_f32(f32::INFINITY),
            )?;
            let smallest = min_axis(&nucleus, -1, true)?;
            logprobs = select(logprobs.lt(&smallest)?, &minus_inf, &logprobs)?;
        }
        // 3. min-p: p ≥ min_p · p_max is log p ≥ log p_max + ln(min_p).
        if sampling.min_p > 0.0 {
            let floor = max_axis(&logprobs, -1, true)?.add(Array::from_f32(sampling.min_p.ln()))?;
            logprobs = select(logprobs.lt(&floor)?, &minus_inf, &logprobs)?;
        }
        // 4. top-k: the k-th largest of each row is a threshold; a partition finds it
        // without sorting the row.
        if sampling.top_k > 0 && sampling.top_k < vocab {
            let at = vocab - sampling.top_k;
            let kth = partition_axis(&logprobs, at, -1)?.index((.., at..at + 1));
            logprobs = select(logprobs.lt(&kth)?, &minus_inf, &logprobs)?;
        }
        // 5. The draw: the temperature, then `draws` tokens a row from softmax, from `key`.
        let z = logprobs.multiply(Array::from_f32(1.0 / sampling.temperature))?;
        Ok(categorical(&z, -1, ShapeOrCount::Count(draws), key)?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every step's token is MySampler's draw from here on.
    run.decode_sampled(&model, &tokenizer, &MySampler)
}
