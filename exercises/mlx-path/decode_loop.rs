// mlx-path: a hand-written decode loop on MLX.
//
// Load the model, prefill the prompt once, then one token per forward pass through
// the same weights, with a KV cache that grows by one position per step.
// Your task (see the lesson): take the per-token `.item()` out of the DECODE loop.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
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

    // PREFILL: the whole prompt in one forward pass fills the cache.
    let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
    let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
    let mut tokens = vec![y.item_exact::<u32>()]; // the eval that forces the lazy graph
    timer.first_token(tokens[0]);

    // DECODE: one token in, one forward pass through the same weights, one token out.
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let token = y.item_exact::<u32>(); // a GPU sync per token — the hand loop's cost
        tokens.push(token);
        timer.token(token); // this token is on the host now: quest sees each one arrive
    }
    timer.done();

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
