// lazy-prefill: the pipelined decode loop of mlx-path, and a prefill that computes too much.
//
// The prefill runs the whole prompt through the model, head included, so it computes
// the next-token logits of every prompt position; only the last position's are used.
// Your task (see the lesson): prefill all but the last prompt token, evaluating only
// the caches, then run the last token alone to get the first token's logits.

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

    // The default stream: on MLX's CUDA backend a stream of its own was much slower (mlx-path).
    let tokens = {
        // PREFILL: the whole prompt in one forward pass: logits for every position.
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

        // The tokens reach the host once, at the end.
        let mut tokens = vec![first];
        tokens.extend(pending.iter().map(|t| t.item_exact::<u32>()));
        timer.done();
        tokens
    };

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
