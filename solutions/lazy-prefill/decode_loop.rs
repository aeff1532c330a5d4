// lazy-prefill, solved: the prompt's last token goes through the head alone.
//
// `prompt[..L-1]` runs through the model and only the caches are evaluated: the logits
// of that call are never asked for, so MLX never computes them (lazy evaluation drops an
// array nobody evaluates). Then the last prompt token runs alone, on the filled caches,
// and its logits — one position, not L — give the first token. mlx-lm's
// `generate_step` prefills the same way.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::{async_eval, eval};
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
        // PREFILL, all but the last prompt token: evaluate the caches, never the logits.
        let (rest, last) = prompt_ids.split_at(prompt_ids.len() - 1);
        if !rest.is_empty() {
            model.forward(&lm::tokens_array(rest), &mut cache)?; // logits dropped, never evaluated
            eval(cache.iter().flat_map(|c| c.state()))?;
        }
        // The last prompt token alone: one position through the head.
        let logits = model.forward(&lm::tokens_array(last), &mut cache)?;
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
