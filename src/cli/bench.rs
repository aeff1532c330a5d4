//! `quest bench <lesson>`: wiring for `quest::bench` — build the loops, set up the peer,
//! run interleaved rounds, print the table, write JSON and SVG.

use anyhow::Result;

use quest::bench::{bandwidth, peer::Peer, plot, BenchResult, Ceiling, LoopRuns, Measured};
use quest::course::Lesson;
use quest::lab::{self, Code, RunRequest};
use quest::lm::{self, Backend, ModelSource};

use super::Ctx;

pub struct BenchOptions {
    pub model: Option<String>,
    pub max_tokens: usize,
    pub rounds: usize,
    pub python: bool,
}

pub fn bench(ctx: &Ctx, lesson: &Lesson, options: &BenchOptions) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let model_spec = options
        .model
        .clone()
        .unwrap_or_else(|| lesson.meta.model.clone());
    let request = RunRequest {
        model: model_spec.clone(),
        prompt: lab::DEFAULT_PROMPT.into(),
        max_tokens: options.max_tokens,
    };
    let backend = Backend::detect();

    // What a decode step must read, and how fast this machine can read it.
    let (model, tokenizer) = lm::load(&model_spec)?;
    let prompt =
        tokenizer.apply_chat_template(&[lm::Message::user(&request.prompt)], true, false)?;
    let prompt_ids = tokenizer.encode(&prompt)?;
    let kv_per_position = kv_bytes_per_position(&model)?;
    let mean_context = prompt_ids.len() + options.max_tokens / 2;
    eprintln!(
        "quest: measuring memory bandwidth on the {} …",
        backend.name()
    );
    let ceiling = Ceiling {
        weight_bytes: model.weight_bytes() as u64,
        kv_bytes: (kv_per_position * mean_context) as u64,
        bandwidth_gb_s: bandwidth::measure()?,
    };
    drop(model);

    let binaries = [
        (
            "rust-hand",
            "Rust hand loop (.item per token)",
            lab::build(&ctx.root, id, Code::HandLoop)?,
        ),
        (
            "rust-pipelined",
            "Rust pipelined loop (solution)",
            lab::build(&ctx.root, id, Code::Solution)?,
        ),
        (
            "yours",
            "your exercise",
            lab::build(&ctx.root, id, Code::Exercise)?,
        ),
    ];
    let peer = if options.python {
        match (Peer::ensure(), lm::hub::resolve(&model_spec)?) {
            (Ok(peer), ModelSource::Gguf(path) | ModelSource::Directory(path)) => Ok((peer, path)),
            (Err(e), _) => Err(format!("{e:#}")),
        }
    } else {
        Err("--no-python".to_owned())
    };
    let python_note = peer.as_ref().err().cloned();
    if let Some(note) = &python_note {
        eprintln!("quest: benchmarking the Rust side alone ({note})");
    }

    let mut loops: Vec<LoopRuns> = binaries
        .iter()
        .map(|(id, label, _)| LoopRuns {
            id: (*id).into(),
            label: (*label).into(),
            runs: vec![],
        })
        .collect();
    if peer.is_ok() {
        loops.push(LoopRuns {
            id: "py-hand".into(),
            label: "Python hand loop (mlx-lm model)".into(),
            runs: vec![],
        });
        loops.push(LoopRuns {
            id: "py-generate".into(),
            label: "mlx-lm generate_step".into(),
            runs: vec![],
        });
    }

    // Warm-up (not counted), then interleaved rounds: A B C D E, A B C D E, …
    eprintln!(
        "quest: warm-up, then {} interleaved rounds of {} tokens",
        options.rounds, options.max_tokens
    );
    let warm = RunRequest {
        max_tokens: 4,
        ..request.clone()
    };
    for (_, _, binary) in &binaries {
        lab::run(binary, &warm)?;
    }
    for round in 0..options.rounds {
        for (i, (_, _, binary)) in binaries.iter().enumerate() {
            loops[i]
                .runs
                .push(Measured::from(lab::run(binary, &request)?));
        }
        if let Ok((peer, path)) = &peer {
            let [hand, generate] = peer.round(path, &prompt_ids, options.max_tokens, true)?;
            loops[3].runs.push(hand);
            loops[4].runs.push(generate);
        }
        let rates: Vec<String> = loops
            .iter()
            .map(|l| format!("{:.2}", l.runs[round].decode_tok_s))
            .collect();
        eprintln!("  round {}: {} tok/s", round + 1, rates.join(" / "));
    }

    let result = BenchResult {
        lesson: id.into(),
        model: model_spec,
        backend: backend.name().into(),
        prompt_tokens: prompt_ids.len(),
        max_tokens: options.max_tokens,
        rounds: options.rounds,
        ceiling,
        loops,
        python_note,
        date: quest::progress::Timestamp::now().to_string(),
    };
    report(&result);
    let dir = ctx.root.join("target/quest-bench");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join(format!("{id}.json"));
    let svg = dir.join(format!("{id}.svg"));
    std::fs::write(&json, serde_json::to_vec_pretty(&result)?)?;
    std::fs::write(&svg, plot::svg(&result))?;
    println!("\nJSON: {}\nplot: {}", json.display(), svg.display());
    Ok(())
}

/// Bytes the caches hold per position, measured: one token through an empty cache.
fn kv_bytes_per_position(model: &lm::Model) -> Result<usize> {
    let mut cache = lm::make_prompt_cache(model);
    let logits = model.forward(&lm::tokens_array(&[0]), &mut cache)?;
    mlx_rs::transforms::eval([&logits])?;
    Ok(cache.iter().map(|c| c.nbytes_used()).sum())
}

fn report(result: &BenchResult) {
    let c = &result.ceiling;
    println!();
    print!("{}", result.table());
    println!(
        "\nbytes per token: {:.1} MB weights + {:.2} MB KV cache (mean context); bandwidth {:.1} GB/s (measured copy) → ceiling {:.1} tok/s",
        c.weight_bytes as f64 / 1e6,
        c.kv_bytes as f64 / 1e6,
        c.bandwidth_gb_s,
        c.tok_s()
    );
    let tokens_equal = result.loops.iter().all(|l| {
        l.runs
            .iter()
            .all(|r| r.tokens == result.loops[0].runs[0].tokens)
    });
    if !tokens_equal {
        println!("warning: not every loop produced the same tokens; compare their JSON.");
    }
    if let Some(base) = result.baseline() {
        let base_ms = 1e3 / base.summary().median_tok_s;
        let bytes_ms = 1e3 / c.tok_s();
        println!(
            "time per token = fixed + bytes/bandwidth: {} spends {base_ms:.1} ms per token, of which {bytes_ms:.2} ms is streaming its bytes; the other {:.1} ms is the fixed term (compute, syncs, launches).",
            base.label,
            base_ms - bytes_ms
        );
    }
    if result.backend == "cpu" {
        println!("On MLX's CPU backend the per-token compute dwarfs the sync the lesson removes: expect the loops within noise of each other here, and the gap on a GPU.");
    }
}
