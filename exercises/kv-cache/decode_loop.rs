// kv-cache: a decode loop that remembers nothing.
//
// Each step makes a fresh, empty cache and runs the whole sequence so far (the prompt
// and every token written) through the model again, to get one more token.
// Your task (see the lesson): keep one cache, made once, and feed one token per step.

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
    // One cache per layer: `forward` writes each position's keys and values into it.
    let mut cache = lm::make_prompt_cache(&model);
    let mut timer = Timer::start();

    // PREFILL: the whole prompt in one forward pass.
    let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
    let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
    let mut tokens = vec![y.item_exact::<u32>()];
    timer.first_token(tokens[0]);

    // DECODE, remembering nothing: the sequence so far, prompt and tokens written.
    let mut ids = prompt_ids.clone();
    ids.push(tokens[0]);
    for _ in 1..run.max_tokens {
        let mut cache = lm::make_prompt_cache(&model); // a fresh, empty cache every step
        let logits = model.forward(&lm::tokens_array(&ids), &mut cache)?; // every position again
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let token = y.item_exact::<u32>();
        timer.token(token); // this token is on the host: one per-token time
        tokens.push(token);
        ids.push(token);
    }
    timer.done();

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
