// bits-per-weight, solved: the same model, its matrices requantized to 4 bits.
//
// `model.requantize` takes every matrix of the loaded model — the projections, the
// feed-forward, the embedding table that is also the head — to its float values
// (dequantizing what the file stored), then quantizes it with MLX's affine scheme:
// 4 bits a weight, and a scale and a bias for every 32 weights of a row. Each token
// now reads about a fifth of the bytes dense f32 reads. Whether it decodes faster
// depends on whether the matmul streams those bytes or computes on them.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::async_eval;
use mlx_rs::{Device, Stream};
use quest::lab::{Exercise, Timer};
use quest::lm::{self, Layout, Message};

fn main() -> Result<()> {
    let run = Exercise::from_env()?;

    // LOAD: every weight is read in now (4-bit becomes f32 on a CPU, as stored on a GPU).
    let (mut model, tokenizer) = lm::load(&run.model)?;
    // REQUANTIZE: 4 bits a weight, a scale and a bias per group of 32.
    model.requantize(Layout::q4(32)?)?;
    let messages = [Message::user(&run.prompt()?)];
    let prompt = tokenizer.apply_chat_template(&messages, true, false)?;
    let prompt_ids = tokenizer.encode(&prompt)?;
    let mut cache = lm::make_prompt_cache(&model);
    let stream = Stream::new_with_device(&Device::try_default()?);
    let mut timer = Timer::start();

    let (tokens, timer) = mlx_rs::with_stream(&stream, || -> Result<_> {
        // PREFILL: the whole prompt in one forward pass fills the cache.
        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
        let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let first = y.item_exact::<u32>();
        timer.first_token(first);

        // DECODE: each step reads every weight once, in the layout it is held in.
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
