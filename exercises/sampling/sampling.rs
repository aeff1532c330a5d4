// sampling: each step's next token drawn from the model's logits, on the device, from a
// seeded key: temperature, then top-k, then top-p, then one draw.
// Your task (see the lesson): finish `sample` so that it draws what `sampling` asks for.
//
// `logits` is [rows, vocab], float32; return [rows, draws] token ids, every row's drawn
// from its own logits with `key`.

use anyhow::Result;
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
        // TODO 1. Temperature: divide the logits by `sampling.temperature` (0 is greedy).
        // TODO 2. top-k: keep the `sampling.top_k` largest of each row (0 keeps all); set
        //         the others to minus infinity, which the draw never picks.
        // TODO 3. top-p: of those, keep the most likely tokens until their probability
        //         reaches `sampling.top_p` (the one that crosses it stays).
        let _ = sampling;
        let z = logits.clone();
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
