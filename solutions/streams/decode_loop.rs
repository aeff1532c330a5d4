// streams, solved: the loop on the default stream, where the model's own work already is.
//
// A stream of its own split one step's graph in two: the ops the loop built went to the new
// stream, while the cache's writes and views and quest's kernels went to the default stream
// (they name no stream, so they take the default). Every array that crosses from one stream
// to the other needs a fence, and on MLX's CUDA backend the host waits on each one. On one
// stream nothing crosses.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::async_eval;
use quest::lab::{Exercise, Timer};
use quest::lm::{self, Message};

fn main() -> Result<()> {
    let run = Exercise::from_env()?;

    let (model, tokenizer) = lm::load(&run.model)?;
    let messages = [Message::user(&run.prompt()?)];
    let prompt = tokenizer.apply_chat_template(&messages, true, false)?;
    let prompt_ids = tokenizer.encode(&prompt)?;
    let mut cache = lm::make_prompt_cache(&model);
    let mut timer = Timer::start();

    // The default stream: every op of the step, the model's and the loop's, on one stream.
    let tokens = {
        // PREFILL: the whole prompt in one forward pass fills the cache.
        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
        let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let first = y.item_exact::<u32>();
        timer.first_token(first);

        // DECODE: one token in, one forward pass, one token out, and no waiting.
        let mut pending = Vec::with_capacity(run.max_tokens);
        for _ in 1..run.max_tokens {
            let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
            y = argmax_axis(lm::last_position(&logits), -1, None)?;
            async_eval([&y])?;
            pending.push(y.clone());
        }
        let mut tokens = vec![first];
        tokens.extend(pending.iter().map(|t| t.item_exact::<u32>()));
        timer.done();
        tokens
    };

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
