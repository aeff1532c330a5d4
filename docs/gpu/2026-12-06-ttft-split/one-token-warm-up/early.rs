// mlx-path, solved: the same decode loop with no host sync inside it.
//
// Each step's token stays on the device as a lazy array and feeds the next forward pass
// directly; `async_eval` starts computing it without waiting, so while the device works
// on token n the host already builds the graph for token n+1 (the pipeline mlx-lm's
// `generate_step` and mlx-swift-lm's `TokenIterator` keep full). The tokens come to the
// host once, after the loop.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::async_eval;
use quest::lab::{Exercise, Timer};
use quest::lm::{self, Message};

fn main() -> Result<()> {
    let run = Exercise::from_env()?;

    // LOAD: every weight is read in now, as mlx-lm's load does (4-bit becomes f32 on a CPU).
    let (model, tokenizer) = lm::load(&run.model)?;
    let messages = [Message::user(&run.prompt()?)];
    let prompt = tokenizer.apply_chat_template(&messages, true, false)?;
    let prompt_ids = tokenizer.encode(&prompt)?;
    // One KV cache per layer.
    let mut cache = lm::make_prompt_cache(&model);
    let mut timer = Timer::start();

    // The default stream, not one of its own: on MLX's CUDA backend a second stream ran
    // this loop at 63-67 tok/s on an 8B shape, the default one at 151-158 (the hand loop:
    // 117-125; docs/gpu/2026-12-01-flow-streams/streams.txt).
    let tokens = {
        // PREFILL: the whole prompt in one forward pass fills the cache.
        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
        let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let first = y.item_exact::<u32>(); // the first token is wanted now: that is TTFT
        timer.first_token(first);

        // DECODE: one token in, one forward pass, one token out — and no waiting.
        let mut pending = Vec::with_capacity(run.max_tokens);
        for _ in 1..run.max_tokens {
            let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
            y = argmax_axis(lm::last_position(&logits), -1, None)?;
            async_eval([&y])?; // start it; the token stays on the device
            pending.push(y.clone());
        }

        // The timer stopped before the tokens are read: a mistake any learner makes.
        timer.done();
        let mut tokens = vec![first];
        tokens.extend(pending.iter().map(|t| t.item_exact::<u32>()));
        tokens
    };

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
