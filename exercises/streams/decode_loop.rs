// streams: the same pipelined decode loop, on a stream of its own.
//
// This is mlx-path's loop without a host sync inside it, run inside
// `with_stream` on a new stream of the default device: every op the loop builds goes
// to that stream, unless something inside the model puts it on another.
// Your task (see the lesson): run it once as it is and read the decode rate; then run the
// loop on the default stream, the one the model's own work uses, and measure again.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::async_eval;
use mlx_rs::{Device, Stream};
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

    // TODO: a stream of its own. Run the loop on the default stream instead.
    let stream = Stream::new_with_device(&Device::try_default()?);
    let (tokens, timer) = mlx_rs::with_stream(&stream, || -> Result<_> {
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
        Ok((tokens, timer))
    })?;

    let text = tokenizer.decode(lm::until_eos(&tokens, &tokenizer))?;
    println!("{text}");
    run.report(&timer, &model, prompt_ids.len(), &tokens, &text)
}
