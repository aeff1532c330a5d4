// chunked-prefill: the prompt through the cache a chunk at a time, written by you.
// Your task (see the lesson): write `prefill` so the model takes the prompt in chunks of
// at most `chunk` tokens. quest checks `prefill` alone first.
//
//   prefill(model, cache, prompt, chunk): for each run of at most `chunk` tokens of the
//     prompt, in order, one forward call into the cache; evaluate the cache's keys and
//     values (`layer.state()`) before the next chunk. Return the last chunk's logits at
//     its last position, [1, vocab].

use anyhow::Result;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::prefill::Prefill;
use quest::lm::{self, Forward, LayerCache};

struct Chunked;

impl Prefill for Chunked {
    fn prefill(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        prompt: &[u32],
        chunk: usize,
    ) -> Result<Array> {
        todo!("the prompt in runs of at most `chunk` tokens, one forward call each, the cache evaluated after each")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.decode_prefilled(&model, &tokenizer, &mut Chunked)
}
