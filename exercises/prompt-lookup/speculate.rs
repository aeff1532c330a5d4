// prompt-lookup: speculative decoding without a draft model, written by you.
// Your task (see the lesson): write `propose` and `verify` so the loop decodes greedy
// decoding's tokens in fewer forward calls. quest checks `verify` alone first.
//
//   propose(context, k): the last n tokens of the context (n = 3, then 2, then 1), found
//     where they occurred before, latest first; the up to k tokens that followed them
//     there. No earlier occurrence: an empty guess.
//
//   verify(model, cache, last, proposed): one forward call of [last, proposed...];
//     pick[i] = argmax of the logits at position i. Keep proposed[i] while
//     proposed[i] == pick[i]; then add pick[agreed]. Trim the cache by
//     proposed.len() - agreed. Return the kept tokens.

use anyhow::Result;
use quest::lab::Exercise;
use quest::lm::speculate::Speculator;
use quest::lm::{self, Forward, LayerCache};

/// The longest n-gram looked up first.
const MAX_NGRAM: usize = 3;

struct PromptLookup;

impl Speculator for PromptLookup {
    fn propose(&mut self, context: &[u32], k: usize) -> Vec<u32> {
        todo!("the up to k tokens after the latest earlier match of the context's last n tokens")
    }

    fn verify(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>> {
        todo!("one forward call of [last, proposed...], keep what agrees, trim the rest")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.decode_speculative(&model, &tokenizer, &mut PromptLookup)
}
