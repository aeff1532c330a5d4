// sampling: each step's next token drawn from the model's logits, on the device, from a
// seeded key: temperature, then top-k, then top-p, then one draw.
// Your task (see the lesson): write `sample` so that it draws what `sampling` asks for.
// quest checks it alone first, on random logits, then on the model's.
//
// `logits` is [rows, vocab], float32; return [rows, draws] token ids (uint32 or int32),
// every row's drawn from its own logits with `key`:
//
//   temperature 0       greedy: the argmax of each row, every draw
//   z = logits / temperature
//   top-k (k > 0)       keep the k largest of each row (ties with the k-th kept); the
//                       others to −∞, which a draw never picks
//   top-p (p < 1)       of those, keep the most likely tokens until their probability
//                       reaches p (the one that crosses it stays); the others to −∞
//   draw                `draws` tokens a row from softmax(z):
//                       mlx_rs::random::categorical(&z, -1, ShapeOrCount::Count(draws), key)

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
        todo!("greedy at temperature 0; else temperature, top-k, top-p, then the draw")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every step's token is MySampler's draw from here on.
    run.decode_sampled(&model, &tokenizer, &MySampler)
}
