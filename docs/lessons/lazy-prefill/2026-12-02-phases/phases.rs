// The lazy-prefill lesson's two prefills, phase by phase: a measurement, not an exercise.
//
// Built as quest builds an exercise and run as a fresh process per measurement (see
// README.md here): `QUEST_PHASES=one` times the one-call prefill (the lesson's starting
// code: all 42 positions through the head, the last row read), `QUEST_PHASES=split` the
// split (41 positions, only the caches evaluated; then the last position alone). Each
// phase is timed to its own evaluation. The first prefill of the process is what a
// learner's TTFT measures; three more after it show what a warmed process pays.
use std::time::Instant;

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::eval;
use quest::lab::Exercise;
use quest::lm::{self, Message};

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let mode = std::env::var("QUEST_PHASES").unwrap_or_else(|_| "one".into());
    let (model, tokenizer) = lm::load(&run.model)?;
    let prompt = tokenizer.apply_chat_template(&[Message::user(&run.prompt)], true, false)?;
    let ids = tokenizer.encode(&prompt)?;
    let mut rows = Vec::new();
    for attempt in 0..4 {
        let mut cache = lm::make_prompt_cache(&model);
        let start = Instant::now();
        if mode == "split" {
            let (rest, last) = ids.split_at(ids.len() - 1);
            // Phase 1: record the 41 positions, evaluate only the caches.
            let t = Instant::now();
            model.forward(&lm::tokens_array(rest), &mut cache)?;
            let record = ms(t);
            eval(cache.iter().flat_map(|c| c.state()))?;
            let caches = ms(t) - record;
            // Phase 2: the last position alone, through the head.
            let t = Instant::now();
            let logits = model.forward(&lm::tokens_array(last), &mut cache)?;
            let y = argmax_axis(lm::last_position(&logits), -1, None)?;
            let token = y.item_exact::<u32>();
            let last_ms = ms(t);
            rows.push(format!(
                "{{\"mode\":\"split\",\"attempt\":{attempt},\"record_ms\":{record:.2},\"caches_ms\":{caches:.2},\"last_ms\":{last_ms:.2},\"total_ms\":{:.2},\"token\":{token}}}",
                ms(start)
            ));
        } else {
            let t = Instant::now();
            let logits = model.forward(&lm::tokens_array(&ids), &mut cache)?;
            let record = ms(t);
            let y = argmax_axis(lm::last_position(&logits), -1, None)?;
            let token = y.item_exact::<u32>();
            rows.push(format!(
                "{{\"mode\":\"one\",\"attempt\":{attempt},\"record_ms\":{record:.2},\"eval_ms\":{:.2},\"total_ms\":{:.2},\"token\":{token}}}",
                ms(t) - record,
                ms(start)
            ));
        }
    }
    // One decode step after the prefill, for scale: one position through everything.
    let mut cache = lm::make_prompt_cache(&model);
    model.forward(&lm::tokens_array(&ids), &mut cache)?;
    eval(cache.iter().flat_map(|c| c.state()))?;
    let t = Instant::now();
    let logits = model.forward(&lm::tokens_array(&ids[..1]), &mut cache)?;
    argmax_axis(lm::last_position(&logits), -1, None)?.item_exact::<u32>();
    rows.push(format!(
        "{{\"mode\":\"{mode}\",\"decode_step_ms\":{:.2},\"positions\":{}}}",
        ms(t),
        ids.len()
    ));
    for row in rows {
        println!("{row}");
    }
    Ok(())
}
