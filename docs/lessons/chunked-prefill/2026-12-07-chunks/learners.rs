// chunked-prefill: a learner's prefill (the solution's math, each chunk's logits kept as it goes).
//
// prefill(model, cache, prompt, chunk): for each run of at most `chunk` tokens of the
// prompt, in order, one forward call into the cache; evaluate the cache's keys and values
// before the next chunk, as mlx-lm does, so MLX holds one chunk's graph at a time.
// Return the last chunk's logits at its last position, [1, vocab].

use anyhow::{bail, Result};
use mlx_rs::transforms::eval;
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
        let mut last: Option<Array> = None;
        for part in prompt.chunks(chunk) {
            let logits = model.forward(&lm::tokens_array(part), cache)?;
            // This chunk's keys and values computed now; its logits only if it is the last.
            eval(cache.iter().flat_map(|layer| layer.state()))?;
            last = Some(lm::last_position(&logits));
        }
        match last {
            Some(logits) => Ok(logits),
            None => bail!("an empty prompt has nothing to prefill"),
        }
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.decode_prefilled(&model, &tokenizer, &mut Chunked)
}
