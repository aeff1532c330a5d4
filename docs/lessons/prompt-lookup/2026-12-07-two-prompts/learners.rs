// prompt-lookup: a learner's speculator (the solution's math, its own loop for `agreed`).
//
// propose(context, k): find the last n tokens of the context (n = 3, then 2, then 1) where
// they occurred before, latest first; the up to k tokens that followed them there are the
// guess. No earlier occurrence: no guess.
//
// verify(model, cache, last, proposed): one forward call of [last, proposed...]. Position i
// of the logits is the model's greedy token after input i. Keep the proposed tokens up to
// the first the model disagrees with, then the model's own token after them. The cache now
// holds every input: trim the positions of the guesses not kept.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use quest::lab::Exercise;
use quest::lm::speculate::Speculator;
use quest::lm::{self, Forward, LayerCache};

/// The longest n-gram looked up first.
const MAX_NGRAM: usize = 3;

struct PromptLookup;

impl Speculator for PromptLookup {
    fn propose(&mut self, context: &[u32], k: usize) -> Vec<u32> {
        for n in (1..=MAX_NGRAM).rev() {
            if context.len() <= n {
                continue;
            }
            let tail = &context[context.len() - n..];
            // The latest earlier occurrence of the tail, and what followed it.
            for start in (0..context.len() - n).rev() {
                if &context[start..start + n] == tail {
                    return context[start + n..].iter().take(k).copied().collect();
                }
            }
        }
        Vec::new()
    }

    fn verify(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>> {
        let mut input = vec![last];
        input.extend_from_slice(proposed);
        let logits = model.forward(&lm::tokens_array(&input), cache)?;
        let picks = argmax_axis(&logits, -1, None)?;
        let picks: Vec<u32> = picks.as_slice::<u32>().to_vec();
        let mut agreed = 0;
        while agreed < proposed.len() && proposed[agreed] == picks[agreed] {
            agreed += 1;
        }
        lm::trim_prompt_cache(cache, (proposed.len() - agreed) as i32);
        let mut kept = proposed[..agreed].to_vec();
        kept.push(picks[agreed]);
        Ok(kept)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.decode_speculative(&model, &tokenizer, &mut PromptLookup)
}
