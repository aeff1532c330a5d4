// batch: the cached decode loop, written for any batch, run with a batch of one.
//
// `forward` takes `[batch, positions]`: here the prompt is one row, `[1, 42]`, so the
// prefill fills the cache of one sequence and each step writes one token.
// Your task (see the lesson): give it four rows of the prompt, and measure the step.

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
    // One cache per layer, holding every sequence of the batch.
    let mut cache = lm::make_prompt_cache(&model);
    let mut timer = Timer::start();

    // PREFILL: the prompt as one row, [1, 42].
    let prompts = lm::tokens_array(&prompt_ids);
    let batch = prompts.shape()[0];
    let logits = model.forward(&prompts, &mut cache)?;
    let mut y = argmax_axis(lm::last_position(&logits), -1, None)?; // one token per row
    let mut rows: Vec<Vec<u32>> = y.as_slice::<u32>().iter().map(|&t| vec![t]).collect();
    timer.first_token(y.as_slice::<u32>());

    // DECODE: each step, one token per row in, [batch, 1]; one token per row out.
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[batch, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        for (row, &token) in rows.iter_mut().zip(y.as_slice::<u32>()) {
            row.push(token);
        }
        timer.token(y.as_slice::<u32>()); // this step's tokens are on the host
    }
    timer.done();

    let text = tokenizer.decode(lm::until_eos(&rows[0], &tokenizer))?;
    println!("{text}");
    run.report_rows(&timer, &model, prompt_ids.len(), &rows, &text)
}
