use anyhow::Result;
use quest::lm;

fn main() -> Result<()> {
    let spec = std::env::args().nth(1).unwrap_or(lm::DEFAULT_MODEL.into());
    let (model, tokenizer) = lm::load(&spec)?;
    let prompt = tokenizer.apply_chat_template(&[lm::Message::user("What is the capital of France? Answer in one sentence.")], true, false)?;
    println!("{prompt}");
    let ids = tokenizer.encode(&prompt)?;
    println!("{ids:?}");
    let mut cache = lm::make_prompt_cache(&model);
    let t0 = std::time::Instant::now();
    let logits = model.forward(&lm::tokens_array(&ids), &mut cache)?;
    let mut y = mlx_rs::ops::indexing::argmax_axis(&lm::weights::last_position(&logits), -1, None)?;
    let mut out = vec![];
    for _ in 0..32 {
        let t = y.item_exact::<u32>();
        out.push(t);
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = mlx_rs::ops::indexing::argmax_axis(&lm::weights::last_position(&logits), -1, None)?;
    }
    println!("{out:?} {:?}", t0.elapsed());
    println!("{}", tokenizer.decode(&out)?);
    Ok(())
}
