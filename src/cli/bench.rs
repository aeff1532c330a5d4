//! `quest bench <lesson>`: wiring for `quest::bench` — build the loops, set up the peer,
//! run interleaved rounds, print the table, write JSON and SVG.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use quest::bench::peer::{Peer, PeerBuild, PeerModel};
use quest::bench::{plot, rates, BenchResult, Ceiling, LoopId, LoopRuns, Measured};
use quest::course::spec::DEFAULT_PROMPT;
use quest::course::{Lesson, Metric};
use quest::device::Backend;
use quest::lab::runner::{self, RunRequest};
use quest::lm::{self, ModelSource};

use quest::progress::{CodeRef, Run, Timestamp, LIBRARY_DECODE_TOK_S, SAME_KERNELS_DECODE_TOK_S};

use super::learner::{current_exercise, solution_path, starting_code_file, Learner};
use super::run::{build, request as run_request};
use super::said::explain_killed;
use super::{Ctx, RunArgs};

pub struct BenchOptions {
    pub run: RunArgs,
    pub rounds: usize,
    pub python: bool,
    /// Where the JSON and the SVG go.
    pub out: PathBuf,
}

pub fn bench(ctx: &Ctx, lesson: &Lesson, options: &BenchOptions) -> Result<()> {
    let id = lesson.meta.id.as_str();
    if lesson.spec.values.is_some() {
        anyhow::bail!(
            "{id}'s exercise measures random-weights shapes itself and computes values, not \
             a decode loop to compare: run it with `quest run {id}`; `quest fit` and \
             `quest slope` measure the same shapes at length"
        );
    }
    let request = run_request(lesson, &options.run);
    let max_tokens = request.max_tokens;
    let backend = Backend::detect();
    let (prompt_ids, ceiling, peer_weights) = measure_ceiling(&request, backend)?;

    // The exercise as it is when built: what "your exercise" measures.
    let (exercise, _, code) = current_exercise(lesson)?;
    let binaries = build_loops(ctx, lesson, &exercise)?;
    let peer = python_peer(options.python, &request.model)?;
    let stock = stock_peer(&peer);
    let python_note = peer.as_ref().err().cloned();
    if let Some(note) = &python_note {
        eprintln!("quest: benchmarking the Rust side alone ({note})");
    }
    let mut loops = loop_rows(&binaries, peer.is_ok(), stock.is_some());

    // Warm-up (not counted), then interleaved rounds: A B C D E, A B C D E, …
    eprintln!(
        "quest: warm-up, then {} interleaved rounds of {} tokens (each Rust run a fresh \
         process, as you run it; each Python round a fresh process that warms up first)",
        options.rounds, max_tokens
    );
    let warm = RunRequest {
        max_tokens: 4,
        ..request.clone()
    };
    let yours_ran_quest_kernels = warm_up(ctx, &binaries, &warm)?;
    let on_mlx = yours_ran_quest_kernels && peer.is_ok();
    let mlx_kernels = warm_up_on_mlx_kernels(ctx, &binaries, &warm, on_mlx, &mut loops)?;
    for round in 0..options.rounds {
        rust_round(ctx, &binaries, mlx_kernels.as_deref(), &request, &mut loops)?;
        if let Ok(peer) = &peer {
            python_round(
                ctx,
                peer,
                stock.as_ref(),
                &prompt_ids,
                max_tokens,
                peer_weights,
                &mut loops,
            )?;
        }
        let rates: Vec<String> = loops
            .iter()
            .map(|l| format!("{:.2}", l.runs[round].decode_tok_s))
            .collect();
        eprintln!("  round {}: {} tok/s", round + 1, rates.join(" / "));
    }

    // The bandwidth once more after the rounds: the ceiling from the better of the two,
    // so that load during one measurement does not put it under the loops.
    let ceiling = Ceiling {
        bandwidth_gb_s: ceiling.bandwidth_gb_s.max(rates::bandwidth()?),
        ..ceiling
    };
    let result = BenchResult {
        lesson: id.into(),
        model: request.model,
        backend,
        blas: blas_column(backend),
        prompt_tokens: prompt_ids.len(),
        max_tokens,
        rounds: options.rounds,
        ceiling,
        loops,
        python_note,
        date: quest::progress::Timestamp::now().to_string(),
    };
    print_and_save(&result, &options.out, id)?;
    record_against_library(ctx, lesson, code, &result)
}

/// What a decode step must read, and how fast this machine can read it: the prompt's
/// tokens, the ceiling, and the layout the peers must run (the one the Rust loops run).
fn measure_ceiling(
    request: &RunRequest,
    backend: Backend,
) -> Result<(Vec<u32>, Ceiling, &'static str)> {
    let (model, tokenizer) = lm::load(&request.model)?;
    let prompt_ids = tokenizer.encode_user_prompt(&request.prompt)?;
    let cache_bytes = quest::bench::cache_bytes(&model)?;
    let mean_context = prompt_ids.len() + request.max_tokens / 2;
    eprintln!(
        "quest: measuring memory bandwidth on the {} …",
        backend.name()
    );
    let ceiling = Ceiling {
        weight_bytes: model.weight_bytes() as u64,
        kv_bytes: cache_bytes.at(mean_context) as u64,
        bandwidth_gb_s: rates::bandwidth()?,
    };
    let peer_weights = if model.layout.is_dense() {
        "dense"
    } else {
        "quantized"
    };
    // The BLAS matters on the CPU only: on a GPU the matmuls are MLX's own kernels.
    let runs_on = match backend {
        Backend::Cpu => quest::device::blas::describe(),
        gpu => format!("the GPU ({})", gpu.name()),
    };
    eprintln!(
        "quest: {} weights ({:.0} MB per token) on {runs_on}",
        model.layout,
        model.weight_bytes() as f64 / 1e6,
    );
    Ok((prompt_ids, ceiling, peer_weights))
}

/// The three Rust loops built: the lesson's starting code, its solution, the exercise.
fn build_loops(ctx: &Ctx, lesson: &Lesson, exercise: &Path) -> Result<[(LoopId, PathBuf); 3]> {
    Ok([
        (
            LoopId::RustStarting,
            build(ctx, &starting_code_file(lesson)?.0, true)?,
        ),
        (
            LoopId::RustSolution,
            build(ctx, &solution_path(lesson)?, true)?,
        ),
        (LoopId::Yours, build(ctx, exercise, true)?),
    ])
}

/// The Python peer (mlx-lm) and the model it loads, or why there is none.
fn python_peer(python: bool, model_spec: &str) -> Result<Result<(Peer, PeerModel), String>> {
    if !python {
        return Ok(Err("--no-python".to_owned()));
    }
    let model = match lm::random::Spec::parse(model_spec) {
        Some(spec) => {
            let spec = spec?;
            let mut config = (spec.shape.config)();
            config["quantization"] = serde_json::json!({"group_size": 32, "bits": spec.bits});
            PeerModel::Config(config)
        }
        None => match lm::hub::resolve(model_spec)? {
            ModelSource::Gguf(path) | ModelSource::Directory(path) => PeerModel::Path(path),
        },
    };
    Ok(match Peer::ensure() {
        Ok(peer) => Ok((peer, model)),
        Err(e) => Err(format!("{e:#}")),
    })
}

/// mlx-lm as a pip user gets it (the stock wheel's BLAS, quantized weights), when the
/// matched peer runs on another build.
fn stock_peer(peer: &Result<(Peer, PeerModel), String>) -> Option<Peer> {
    match peer {
        Ok(_) if quest::device::blas::BUILT_WITH.starts_with("openblas-") => {
            match Peer::ensure_build(PeerBuild::Stock) {
                Ok(stock) => Some(stock),
                Err(e) => {
                    eprintln!("quest: no stock-wheel peer row ({e:#})");
                    None
                }
            }
        }
        _ => None,
    }
}

/// A row for each loop that runs: the Rust ones, then the peers that are there.
fn loop_rows(binaries: &[(LoopId, PathBuf)], python: bool, stock: bool) -> Vec<LoopRuns> {
    let mut loops: Vec<LoopRuns> = binaries.iter().map(|(id, _)| LoopRuns::new(*id)).collect();
    if python {
        loops.extend([LoopId::PyHand, LoopId::PyGenerate].map(LoopRuns::new));
    }
    if stock {
        loops.push(LoopRuns::new(LoopId::PyGenerateStock));
    }
    loops
}

/// Each round's run goes to its loop's row by name.
fn push(loops: &mut [LoopRuns], id: LoopId, run: Measured) {
    if let Some(row) = loops.iter_mut().find(|l| l.id == id) {
        row.runs.push(run);
    }
}

/// Runs each Rust loop once, not counted; says whether the learner's ran quest's kernels.
fn warm_up(ctx: &Ctx, binaries: &[(LoopId, PathBuf)], warm: &RunRequest) -> Result<bool> {
    let mut yours_ran_quest_kernels = false;
    for (id, binary) in binaries {
        let report = runner::run(binary, warm).map_err(|e| explain_killed(ctx, e))?;
        yours_ran_quest_kernels |= *id == LoopId::Yours && !report.quest_kernels.is_empty();
    }
    Ok(yours_ran_quest_kernels)
}

/// The environment that turns every one of quest's kernels off (MLX's own instead).
fn kernels_off() -> Vec<(&'static str, &'static str)> {
    quest::kernels::Kernel::ALL
        .iter()
        .map(|kernel| (kernel.setting().name, "mlx"))
        .collect()
}

/// Where quest's CUDA kernels ran in the learner's exercise (`wanted`: and mlx-lm runs
/// beside it), it runs once more with them off, beside mlx-lm on the same (MLX's)
/// kernels: what "faster than the library" judges. Warms that run up, gives it a row
/// after the learner's, and returns its binary.
fn warm_up_on_mlx_kernels(
    ctx: &Ctx,
    binaries: &[(LoopId, PathBuf)],
    warm: &RunRequest,
    wanted: bool,
    loops: &mut Vec<LoopRuns>,
) -> Result<Option<PathBuf>> {
    let mlx_kernels = wanted.then(|| {
        binaries
            .iter()
            .find(|(id, _)| *id == LoopId::Yours)
            .map(|(_, binary)| binary.clone())
    });
    let Some(binary) = mlx_kernels.flatten() else {
        return Ok(None);
    };
    runner::run_with_env(&binary, warm, &kernels_off()).map_err(|e| explain_killed(ctx, e))?;
    let at = loops
        .iter()
        .position(|l| l.id == LoopId::Yours)
        .map_or(loops.len(), |i| i + 1);
    loops.insert(at, LoopRuns::new(LoopId::YoursMlxKernels));
    Ok(Some(binary))
}

/// One round of the Rust loops, each a fresh process, and the learner's on MLX's kernels.
fn rust_round(
    ctx: &Ctx,
    binaries: &[(LoopId, PathBuf)],
    mlx_kernels: Option<&Path>,
    request: &RunRequest,
    loops: &mut [LoopRuns],
) -> Result<()> {
    for (id, binary) in binaries {
        let run = runner::run(binary, request).map_err(|e| explain_killed(ctx, e))?;
        push(loops, *id, Measured::from(run));
    }
    if let Some(binary) = mlx_kernels {
        let run = runner::run_with_env(binary, request, &kernels_off())
            .map_err(|e| explain_killed(ctx, e))?;
        push(loops, LoopId::YoursMlxKernels, Measured::from(run));
    }
    Ok(())
}

/// One round of the Python peers: mlx-lm's hand loop and generate, then the stock wheel's.
fn python_round(
    ctx: &Ctx,
    (peer, model): &(Peer, PeerModel),
    stock: Option<&Peer>,
    prompt_ids: &[u32],
    max_tokens: usize,
    weights: &str,
    loops: &mut [LoopRuns],
) -> Result<()> {
    let [hand, generate] = peer
        .round(model, prompt_ids, max_tokens, true, weights)
        .map_err(|e| explain_killed(ctx, e))?;
    push(loops, LoopId::PyHand, hand);
    push(loops, LoopId::PyGenerate, generate);
    if let Some(stock) = stock {
        let generate = stock
            .round_generate(model, prompt_ids, max_tokens, true)
            .map_err(|e| explain_killed(ctx, e))?;
        push(loops, LoopId::PyGenerateStock, generate);
    }
    Ok(())
}

/// The table on stdout, then the JSON and the plot under `out`.
fn print_and_save(result: &BenchResult, out: &Path, id: &str) -> Result<()> {
    report(result);
    println!();
    write_json(out, id, result)?;
    let svg = out.join(format!("{id}.svg"));
    std::fs::write(&svg, plot::svg(result))?;
    println!("plot: {}", svg.display());
    Ok(())
}

/// What a result's `blas` says: the BLAS and its kernels on the CPU, `-` on a GPU (its
/// matmuls are MLX's own kernels there).
fn blas_column(backend: Backend) -> String {
    if backend == Backend::Cpu {
        quest::device::blas::describe()
    } else {
        "-".into()
    }
}

/// The learner's median goes on their record with the library's median beside it, so
/// that "faster than the library" is judged on one machine, in one benchmark, with the
/// learner's median on the library's kernels (`BenchResult::same_kernels_tok_s`): that
/// is what it compares, never a rate quest's own CUDA kernels made.
fn record_against_library(
    ctx: &Ctx,
    lesson: &Lesson,
    code: CodeRef,
    result: &BenchResult,
) -> Result<()> {
    let (Some(yours), Some(library)) =
        (result.find(LoopId::Yours), result.find(LoopId::PyGenerate))
    else {
        return Ok(());
    };
    let (library_tok_s, mine) = (library.summary().median_tok_s, yours.summary());
    let mut metrics: std::collections::BTreeMap<String, f64> = [
        (Metric::TtftMs.key().to_owned(), mine.median_ttft_ms),
        (Metric::DecodeTokS.key().to_owned(), mine.median_tok_s),
        (LIBRARY_DECODE_TOK_S.to_owned(), library_tok_s),
    ]
    .into();
    if let Some(same) = result.same_kernels_tok_s() {
        metrics.insert(SAME_KERNELS_DECODE_TOK_S.to_owned(), same);
    }
    let mut learner = Learner::open(ctx)?;
    learner.update(ctx, |state| {
        state.lesson_mut(&lesson.meta.id).runs.push(Run {
            at: Timestamp::now(),
            code,
            backend: result.backend.recorded_name(),
            tokens_generated: result.max_tokens as u32,
            prompt_tokens: result.prompt_tokens as u32,
            lang: ctx.lang,
            metrics,
            weights: None,
        });
        Ok(())
    })
}

fn report(result: &BenchResult) {
    let c = &result.ceiling;
    println!();
    print!("{}", result.table());
    println!(
        "\nbytes per token: {:.1} MB weights + {:.2} MB KV cache (mean context); bandwidth {:.1} GB/s (measured: {}) → ceiling {:.1} tok/s",
        c.weight_bytes as f64 / 1e6,
        c.kv_bytes as f64 / 1e6,
        c.bandwidth_gb_s,
        rates::bandwidth_method(),
        c.tok_s()
    );
    // The stock-wheel row runs another layout (4-bit), whose tokens may differ; on a
    // random-weights model the peers draw their own weights.
    let random = lm::random::Spec::parse(&result.model).is_some();
    let tokens_equal = result
        .loops
        .iter()
        .filter(|l| l.id != LoopId::PyGenerateStock && !(random && l.id.is_python()))
        .all(|l| {
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
        // A negative fixed term means the bandwidth read low (see below): say nothing.
        if bytes_ms <= base_ms {
            println!(
            "{} spends {base_ms:.1} ms per token, of which {bytes_ms:.2} ms is streaming its bytes at the measured bandwidth; the other {:.1} ms is the rest (syncs, launches, host work, and arithmetic where it takes longer than the reads).",
            base.label,
            base_ms - bytes_ms
        );
        }
    }
    let fastest = result
        .loops
        .iter()
        .map(|l| l.summary().median_tok_s)
        .fold(0.0, f64::max);
    if fastest > c.tok_s() {
        println!("The loops read their bytes faster than quest measured this machine's bandwidth ({}): the ceiling is not a bound in this run (another process may have shared the memory while it was measured); read the ceiling column as a comparison between rows.", rates::bandwidth_method());
    }
    if result.backend == Backend::Cpu {
        println!("On MLX's CPU backend quest runs dense f32 weights on the BLAS (`--weights quantized` keeps 4-bit, whose x86 kernels are compute-bound); the sync the lesson removes is a few percent of a step here: expect the loops close together, and the gap on a GPU.");
    }
}

pub struct FitArgs {
    pub shapes: Option<String>,
    /// `--bits 4,8,16`: the widths to measure each shape in.
    pub bits: Option<String>,
    pub group_size: i32,
    pub max_tokens: usize,
    pub rounds: usize,
    /// `--peer`: mlx-lm's generate_step beside each shape.
    pub peer: bool,
}

/// `quest fit`: the decode-ceiling formula measured on this machine.
pub fn fit(root: &std::path::Path, args: &FitArgs) -> Result<()> {
    use quest::bench::fit;
    let backend = Backend::detect();
    let gpu = backend != Backend::Cpu;
    let default = quest::settings::FIT_SHAPES.on(gpu);
    let names = args.shapes.clone().unwrap_or_else(|| default.into());
    let shapes = parse_fit_shapes(&names)?;
    let layouts = match &args.bits {
        Some(bits) => bits
            .split(',')
            .map(|width| quest::lm::Layout::from_bits(width, args.group_size))
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    // Before the peer's venv is made: that can take minutes the first time.
    anyhow::ensure!(!args.peer || layouts.is_empty(), fit::PEER_WITH_LAYOUTS);
    let options = fit::FitOptions {
        shapes,
        layouts,
        prompt_tokens: 16,
        max_tokens: args.max_tokens,
        rounds: args.rounds,
        peer: if args.peer {
            Some(Peer::ensure()?)
        } else {
            None
        },
    };
    let dir = root.join("target/quest-bench");
    let name = format!("fit-{}", backend.name());
    let measured = rates::Rates::measure()?;
    // After every shape: a run stopped early keeps what it measured.
    let result = fit::run(
        &options,
        measured,
        |line| eprintln!("quest: {line}"),
        |partial| write_json_quietly(&dir, &name, partial),
    )?;
    println!("{}", result.table());
    println!(
        "measured on the {} (the better of before and after the run): bandwidth {:.1} GB/s ({}), compute rate {:.1} G multiply-adds/s",
        backend.name(),
        result.rates.bandwidth_gb_s,
        rates::bandwidth_method(),
        result.rates.compute_gmac_s
    );
    write_json(&dir, &name, &result)
}

/// Comma-separated whole numbers of at least 1; `what` says what one is, for the error.
fn parse_counts(list: &str, what: &str) -> Result<Vec<usize>> {
    list.split(',')
        .map(|c| match c.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(anyhow::anyhow!("`{c}` is not {what}")),
        })
        .collect()
}

/// Comma-separated shape names, or `all`: the six of `quest fit` (for the commands that run
/// every fit shape; `slope` and `batch` take names only).
fn parse_fit_shapes(names: &str) -> Result<Vec<&'static quest::lm::random::PublicShape>> {
    if names == "all" {
        Ok(quest::lm::random::SHAPES.iter().collect())
    } else {
        parse_shapes(names)
    }
}

/// Comma-separated shape names.
fn parse_shapes(names: &str) -> Result<Vec<&'static quest::lm::random::PublicShape>> {
    use quest::lm::random;
    names
        .split(',')
        .map(|n| {
            random::shape(n.trim()).ok_or_else(|| {
                let known: Vec<_> = random::SHAPES
                    .iter()
                    .chain(random::HYBRID_SHAPES)
                    .map(|s| s.name)
                    .collect();
                anyhow::anyhow!("unknown shape `{n}`; shapes: {}", known.join(", "))
            })
        })
        .collect()
}

pub struct KernelArgs {
    pub kernel: quest::kernels::Kernel,
    pub shapes: Option<String>,
    pub models: Vec<String>,
    pub max_tokens: usize,
    pub rounds: usize,
}

/// `quest kernel`: one of quest's CUDA kernels against the MLX ops it replaces.
pub fn kernel(root: &std::path::Path, args: &KernelArgs) -> Result<()> {
    use quest::bench::kernel;
    use quest::lm::random;
    use quest::lm::Hold;
    // The arguments first, then the machine: a mistake in them is said on any machine.
    // With real models named and no shapes, only the real models.
    let default_shapes = if args.models.is_empty() { "all" } else { "" };
    let names = args.shapes.clone().unwrap_or_else(|| default_shapes.into());
    let shapes = if names.is_empty() {
        Vec::new()
    } else {
        parse_fit_shapes(&names)?
    };
    if shapes.is_empty() && args.models.is_empty() {
        anyhow::bail!("`quest kernel` has nothing to compare: name shapes (`--shapes all`) or a model (`--model`)");
    }
    let backend = Backend::detect();
    if backend != Backend::Cuda {
        anyhow::bail!(
            "`quest kernel` compares CUDA kernels; this build runs MLX on the {} (it needs \
             quest built against MLX's CUDA wheel, on a machine with an NVIDIA GPU)",
            backend.name()
        );
    }
    let options = kernel::KernelOptions {
        kernel: args.kernel,
        max_tokens: args.max_tokens,
        rounds: args.rounds,
    };
    let mut points = Vec::new();
    let mut compare = |name: &str, model: &quest::lm::Model, prompt: &[u32]| -> Result<()> {
        let point = kernel::compare(name, model, prompt, &options)?;
        // The table's row for this model, as progress.
        let table = kernel::table(std::slice::from_ref(&point));
        eprintln!("quest: {}", table.lines().nth(1).unwrap_or(""));
        points.push(point);
        Ok(())
    };
    for name in &args.models {
        eprintln!("quest: {name}: loading…");
        let (model, tokenizer) = quest::lm::load_with(name, Hold::Quantized)?;
        let text = tokenizer.apply_chat_template(
            &[quest::lm::Message::user(DEFAULT_PROMPT)],
            true,
            false,
        )?;
        compare(name, &model, &tokenizer.encode(&text)?)?;
    }
    let prompt = random::prompt(16);
    for shape in shapes {
        eprintln!("quest: {}: making random 4-bit weights…", shape.name);
        compare(shape.name, &random::model(&(shape.config)(), 0)?, &prompt)?;
    }
    println!("{}", kernel::table(&points));
    write_json(
        &root.join("target/quest-bench"),
        &format!("kernel-{}-cuda", args.kernel.name()),
        &points,
    )
}

pub struct SlopeArgs {
    pub shapes: Option<String>,
    pub contexts: Option<String>,
    pub fill: Option<quest::bench::slope::Fill>,
    pub max_tokens: usize,
    pub rounds: usize,
}

/// `quest slope`: decode speed against context length, full attention beside the hybrid layout.
pub fn slope(root: &std::path::Path, args: &SlopeArgs) -> Result<()> {
    use quest::bench::slope;
    let backend = Backend::detect();
    let gpu = backend != Backend::Cpu;
    let (default_shapes, default_contexts) = (
        quest::settings::SLOPE_SHAPES.on(gpu),
        quest::settings::SLOPE_CONTEXTS.on(gpu),
    );
    let shapes = parse_shapes(args.shapes.as_deref().unwrap_or(default_shapes))?;
    let contexts = parse_counts(
        args.contexts.as_deref().unwrap_or(default_contexts),
        "a context length (a whole number of tokens, at least 1)",
    )?;
    let fill = match args.fill {
        Some(fill) => fill,
        None => match quest::settings::SLOPE_FILL.on(gpu) {
            "random" => slope::Fill::Random,
            _ => slope::Fill::Prefill,
        },
    };
    let options = slope::SlopeOptions {
        shapes,
        fill,
        contexts,
        max_tokens: args.max_tokens,
        rounds: args.rounds,
    };
    let bandwidth = rates::bandwidth()?;
    let result = slope::run(&options, bandwidth, |line| eprintln!("quest: {line}"))?;
    println!("{}", result.table());
    write_json(
        &root.join("target/quest-bench"),
        &format!("slope-{}", backend.name()),
        &result,
    )
}

pub struct BatchArgs {
    pub model: Option<String>,
    pub shapes: Option<String>,
    pub batches: String,
    pub max_tokens: usize,
    pub rounds: usize,
    pub out: PathBuf,
}

/// `quest batch`: total and per-sequence decode rates at several batch sizes.
pub fn batch(args: &BatchArgs) -> Result<()> {
    use quest::bench::batch::{self, BatchOptions, BatchResult, Subject};
    use quest::lm::random;
    let backend = Backend::detect();
    let batches = parse_counts(
        &args.batches,
        "a batch size (a whole number of sequences, at least 1)",
    )?;
    // A real model on a CPU (the course's); random-weights shapes on a GPU box, which
    // may hold no model files.
    let shapes = match (&args.model, &args.shapes) {
        (Some(_), Some(_)) => anyhow::bail!("give --model or --shapes, not both"),
        (None, None) if backend != Backend::Cpu => {
            Some(quest::settings::BATCH_SHAPES.gpu.to_owned())
        }
        (_, shapes) => shapes.clone(),
    };
    let mut subjects = Vec::new();
    match shapes {
        Some(names) => {
            for shape in parse_shapes(&names)? {
                eprintln!("quest: building random {} …", shape.name);
                subjects.push(Subject {
                    name: format!("random:{}", shape.name),
                    model: quest::bench::warmed(random::model(&(shape.config)(), 0)?)?,
                    prompt: random::prompt(16),
                });
            }
        }
        None => {
            let name = args
                .model
                .clone()
                .unwrap_or_else(|| lm::DEFAULT_MODEL.to_owned());
            let (model, tokenizer) = lm::load(&name)?;
            let model = quest::bench::warmed(model)?;
            let prompt =
                tokenizer.apply_chat_template(&[lm::Message::user(DEFAULT_PROMPT)], true, false)?;
            subjects.push(Subject {
                name,
                model,
                prompt: tokenizer.encode(&prompt)?,
            });
        }
    }
    let options = BatchOptions {
        batches,
        max_tokens: args.max_tokens,
        rounds: args.rounds,
    };
    let models = batch::run(&subjects, &options, |line| eprintln!("quest: {line}"))?;
    let result = BatchResult {
        backend,
        blas: blas_column(backend),
        max_tokens: args.max_tokens,
        rounds: args.rounds,
        date: Timestamp::now().to_string(),
        models,
    };
    let table = result.table();
    println!("{table}");
    let name = format!("batch-{}", backend.name());
    write_json(&args.out, &name, &result)?;
    std::fs::write(args.out.join(format!("{name}.txt")), &table)?;
    Ok(())
}

/// Writes a measurement's result as `DIR/NAME.json` and says where.
fn write_json(dir: &std::path::Path, name: &str, result: &impl serde::Serialize) -> Result<()> {
    write_json_quietly(dir, name, result)?;
    println!("JSON: {}", dir.join(format!("{name}.json")).display());
    Ok(())
}

/// Writes `dir/name.json` whole or not at all (a temporary file, then a rename), so that a
/// run killed while it writes leaves the last complete file.
fn write_json_quietly(
    dir: &std::path::Path,
    name: &str,
    result: &impl serde::Serialize,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("making {} for the results", dir.display()))?;
    let json = dir.join(format!("{name}.json"));
    let partial = dir.join(format!(".{name}.json.partial"));
    std::fs::write(&partial, serde_json::to_vec_pretty(result)?)
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &json).with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}
