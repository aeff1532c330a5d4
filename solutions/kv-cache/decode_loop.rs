// kv-cache, solved: one cache per layer, made once, and one token per step.
//
// The prefill writes the keys and values of every prompt position into the cache; each
// decode step runs only the newest token, reads the cached keys and values of the
// positions before it, and appends its own. The work per step no longer grows with
// the sequence: only the attention read over the cache does.

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
    // One cache per layer, made once: it keeps every position's keys and values.
    let mut cache = lm::make_prompt_cache(&model);
    let mut timer = Timer::start();

    // PREFILL: the whole prompt in one forward pass fills the cache.
    let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
    let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
    let mut tokens = vec![y.item_exact::<u32>()];
    timer.first_token(tokens[0]);

    // DECODE: one token in, the same cache one position longer, one token out.
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let token = y.item_exact::<u32>();
        tokens.push(token);
        timer.token(token); // this token is on the host: one per-token time
    }
    timer.done();

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
