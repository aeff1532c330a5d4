// quest's own model through the same loop: the reference.
use anyhow::Result;
use quest::lab::Exercise;
use quest::lm;

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.decode(&model, &tokenizer)
}
