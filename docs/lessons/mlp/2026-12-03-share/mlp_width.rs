// Measurement only, never a learner's solution: a random-weights model in SmolLM2-135M's
// shape (4-bit group-32 random weights, dequantized to f32 at load on the CPU, as quest
// holds the real model) with the MLP's intermediate width set by QUEST_MLP_WIDTH: 1536 is
// the real model's, 32 the narrowest a 32-wide quantization group allows (the MLP's work
// all but removed). Decode speed depends on the shapes and bytes, not on the values.
use anyhow::{Context, Result};
use quest::lab::Exercise;
use quest::lm::{random, Hold, Tokenizer};

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let width: i64 = std::env::var("QUEST_MLP_WIDTH")
        .context("QUEST_MLP_WIDTH: the MLP's intermediate width")?
        .parse()?;
    let shape = random::shape("SmolLM2-135M").context("quest's SmolLM2-135M shape")?;
    let mut config = (shape.config)();
    config["intermediate_size"] = width.into();
    let model = random::model_with(&config, random::SEED, 4, Hold::from_env()?)?;
    run.decode(&model, &Tokenizer::stand_in(49152))
}
