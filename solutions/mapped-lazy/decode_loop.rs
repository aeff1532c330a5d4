// mapped-lazy, solved: a load that only records the work.
//
// `lm::load_lazy` builds the same model from lazy arrays and evaluates none of them:
// the dequantization to f32 and the stacking of fused matrices are recorded, not done.
// The first forward pass asks for its logits, and with them for every weight they
// depend on: the prefill pays for the load's work, once.

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use quest::lab::{Exercise, Timer};
use quest::lm::{self, Message};

fn main() -> Result<()> {
    let run = Exercise::from_env()?;

    // LOAD: records the weights' work; nothing is computed yet.
    let (model, tokenizer) = lm::load_lazy(&run.model)?;
    let messages = [Message::user(&run.prompt()?)];
    let prompt = tokenizer.apply_chat_template(&messages, true, false)?;
    let prompt_ids = tokenizer.encode(&prompt)?;
    let mut cache = lm::make_prompt_cache(&model);
    // The clock for the first token starts here: everything above is load time.
    let mut timer = Timer::start();

    // PREFILL: the whole prompt in one forward pass; evaluating its logits computes
    // every weight they need first (dequantized, stacked), then the prompt.
    let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;
    let mut y = argmax_axis(lm::last_position(&logits), -1, None)?;
    let mut tokens = vec![y.item_exact::<u32>()];
    timer.first_token(tokens[0]);

    // DECODE: one token in, one token out.
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
