// sampling: each step's next token drawn from the model's logits, on the device, from a
// seeded key, as mlx-lm's `make_sampler` draws it.
// Your task (see the lesson): write `sample` so that it draws what `sampling` asks for.
// quest checks it alone first, on random logits, then on the model's.
//
// `logits` is [rows, vocab], float32; return [rows, draws] token ids (uint32 or int32),
// every row's drawn from its own logits with `key`:
//
//   temperature 0   greedy: the argmax of each row, every draw
//   top-p (p < 1)   keep the most likely tokens until their probability reaches p
//                   (the one that crosses it stays)
//   min-p (m > 0)   keep the tokens at least m times as likely as the most likely one
//   top-k (k > 0)   keep the k most likely (ties with the k-th kept)
//   draw            `draws` tokens a row from softmax(logprobs / temperature) over what
//                   is kept, with `key`
//
// Each filter reads the model's own probabilities (temperature 1); a removed token gets
// −∞, which a draw never picks.

use anyhow::Result;
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
        todo!("greedy at temperature 0; else top-p, min-p, top-k, then the draw")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every step's token is MySampler's draw from here on.
    run.decode_sampled(&model, &tokenizer, &MySampler)
}
