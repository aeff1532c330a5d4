use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use quest::course::{Course, Lang, Lesson, TranslationStatus};
use quest::lab::runner;
use quest::render::{self, RenderOptions};

mod bench;
mod checks;
mod dev;
mod learner;
mod piece;
mod run;
mod said;
mod serve;
mod status;
mod submit;
mod values;

use run::{reset, run_and_record, watch};

#[derive(Parser)]
#[command(
    name = "quest",
    version,
    about = "A Rust workbook for LLM inference on MLX: read the lesson, write the decode loop, measure it"
)]
struct Cli {
    /// Language of lessons and messages (remembered once chosen).
    #[arg(long, global = true)]
    lang: Option<String>,
    /// How a quantized model's matrices are held: `auto` (dense f32 on a CPU, quantized on
    /// a GPU), `dense` or `quantized` (sets QUEST_WEIGHTS for the runs it starts).
    #[arg(long, global = true, value_parser = parse_weights)]
    weights: Option<quest::lm::Hold>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a lesson, build its exercise, run it on a real model and print TTFT and tok/s.
    Run {
        lesson: String,
        #[command(flatten)]
        run: RunArgs,
        /// Skip the lesson text; only build and run.
        #[arg(long, conflicts_with = "lesson_text")]
        no_lesson: bool,
        /// Show the whole lesson again, with what its figures rest on (its appendix).
        /// Without it, the first run shows the lesson and later runs its tasks.
        #[arg(long = "lesson", id = "lesson_text")]
        lesson_text: bool,
    },
    /// List the lessons.
    List {
        /// Each lesson's id, title, track, minutes, tags and status, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The course in a browser: a local web server on 127.0.0.1 that shows the lessons,
    /// your progress and your measured numbers, and follows the progress file live.
    Serve {
        /// The port to listen on; 0 picks any free one (the printed URL says which).
        #[arg(long, default_value_t = serve::DEFAULT_PORT)]
        port: u16,
        /// Open the page in the system's browser (xdg-open, or open on macOS).
        #[arg(long)]
        open: bool,
    },
    /// Show a lesson's hint: its first level, and one level more each time you ask again.
    Hint {
        lesson: String,
        /// Show this level of the hint alone (1 is the first).
        #[arg(long)]
        level: Option<u32>,
    },
    /// Put the lesson's exercise back as it was (asks first).
    Reset {
        lesson: String,
        /// Don't ask.
        #[arg(long)]
        yes: bool,
    },
    /// Re-run the exercise every time you save it.
    Watch {
        lesson: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Check your edited exercise against the lesson's rules, the solution's tokens,
    /// and measure it beside the starting code; with its card it completes the lesson.
    Submit {
        lesson: String,
        #[command(flatten)]
        run: RunArgs,
        /// Interleaved rounds of starting code and yours (default: the lesson's).
        #[arg(long)]
        rounds: Option<usize>,
        /// Predict a quiz answer before quest measures, `QUESTION=CHOICE` (repeat for each):
        /// recorded first, judged by the measurement; only a right first answer earns the
        /// lesson's first-try bonus.
        #[arg(long = "predict", value_parser = parse_answer)]
        predictions: Vec<(String, String)>,
    },
    /// Fill in the lesson's card: the measured numbers before and after, and the quiz.
    Card {
        lesson: String,
        /// The lesson's metric for its starting code, as quest measured it.
        #[arg(long)]
        before: Option<f64>,
        /// The lesson's metric for your code, as quest measured it.
        #[arg(long)]
        after: Option<f64>,
        /// A quiz answer, `QUESTION=CHOICE` (repeat for each question).
        #[arg(long = "answer", value_parser = parse_answer)]
        answers: Vec<(String, String)>,
    },
    /// For course authors: check every lesson, or regenerate what derives from them.
    #[command(subcommand)]
    Dev(dev::DevCommand),
    /// Level, XP, lessons and achievements.
    Status {
        /// Also list achievements and where the progress file is.
        #[arg(long)]
        verbose: bool,
        /// Move a damaged progress file aside (kept as a backup) and start fresh.
        #[arg(long)]
        repair: bool,
        /// The header's numbers (level, XP, lessons, achievements) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The lesson's loops side by side, Rust and Python (mlx-lm), against the decode ceiling.
    Bench {
        lesson: String,
        #[command(flatten)]
        run: RunArgs,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Skip the Python peers (mlx-lm).
        #[arg(long)]
        no_python: bool,
        /// Where the JSON and the SVG go (default: target/quest-bench in the project).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fit `time per token = fixed + bytes / bandwidth` on this machine from random-weights
    /// models of several sizes, with the hand and pipelined loops side by side.
    Fit {
        #[arg(long, help = quest::settings::FIT_SHAPES.help("Comma-separated shapes (SmolLM2-135M, SmolLM2-360M, Qwen3-0.6B, Qwen3-1.7B, Qwen3-4B, Qwen3-8B) or `all`"))]
        shapes: Option<String>,
        #[arg(long, default_value_t = 16)]
        max_tokens: usize,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Comma-separated weight widths to measure each shape in: 4 and 8 (MLX's affine
        /// quantization), 16 (dense in the float dtype: f16 on a GPU, f32 on a CPU);
        /// default: the layout the random model is made in.
        #[arg(long)]
        bits: Option<String>,
        /// The group size of the 4- and 8-bit layouts (32, 64 or 128).
        #[arg(long, default_value_t = 64)]
        group_size: i32,
        /// Print the shapes' configs as JSON (for the Python peer) and stop.
        #[arg(long)]
        configs: bool,
        /// Also mlx-lm's generate_step on each shape (the Python peer, as `quest bench`
        /// uses), a round after each of quest's: both loops side by side in one run.
        #[arg(long)]
        peer: bool,
    },
    /// Decode tok/s as the context grows, full attention beside Qwen3.5's hybrid layout:
    /// the context slope, from random-weights models.
    Slope {
        #[arg(long, help = quest::settings::SLOPE_SHAPES.help("Comma-separated shapes (any of `quest fit`'s, or Qwen3.5-0.8B, Qwen3.5-4B)"))]
        shapes: Option<String>,
        #[arg(long, help = quest::settings::SLOPE_CONTEXTS.help("Comma-separated context lengths"))]
        contexts: Option<String>,
        #[arg(long, value_enum, help = quest::settings::SLOPE_FILL.help("How the context gets into the cache: `prefill` (through the model) or `random` (random keys and values, no prefill)"))]
        fill: Option<quest::bench::slope::Fill>,
        /// Tokens decoded (and timed) per round.
        #[arg(long, default_value_t = 8)]
        max_tokens: usize,
        /// Rounds decoded from the same filled cache; the median is reported.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Decode tok/s as the batch grows, in total and per sequence: the prompt broadcast to
    /// B rows, one step per token for all of them, interleaved round by round.
    Batch {
        /// A model (name, GGUF, MLX directory; default: the course's model on a CPU).
        #[arg(long)]
        model: Option<String>,
        #[arg(long, help = quest::settings::BATCH_SHAPES.help("Comma-separated random-weights shapes instead (any of `quest fit`'s or `quest slope`'s)"))]
        shapes: Option<String>,
        /// Comma-separated batch sizes.
        #[arg(long, default_value = "1,2,4,8")]
        batch: String,
        #[arg(long, default_value_t = 32)]
        max_tokens: usize,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Where the JSON and the table go (default: target/quest-bench).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// On MLX's CUDA backend: one of quest's kernels (the 4-bit matvec, a decode step's
    /// q/k/v heads, a decode step's attention) against the MLX ops
    /// it replaces, on random-weights shapes and real models — decode speed interleaved,
    /// logits compared step by step.
    #[command(alias = "qmv")]
    Kernel {
        /// Which kernel: matvec (QUEST_QMV), qkv (QUEST_QKV) or attend (QUEST_ATTEND).
        #[arg(long, default_value = "matvec")]
        kernel: quest::kernels::Kernel,
        /// Comma-separated shapes (as for `quest fit`) or `all`; default: all, or none when
        /// --model names a real model.
        #[arg(long)]
        shapes: Option<String>,
        /// Also a real model (a name, GGUF file or MLX directory), e.g. smollm2-135m-instruct.
        #[arg(long)]
        model: Vec<String>,
        #[arg(long, default_value_t = 64)]
        max_tokens: usize,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Print shell completions (bash, zsh, fish, …).
    Completions { shell: clap_complete::Shell },
}

/// Which model an exercise runs on, for how many tokens, for how long at most.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct RunArgs {
    /// A model name, GGUF file, MLX directory or Hugging Face repo id (offline cache),
    /// or `random:<shape>[@bits]`: random 4-bit (or 8-bit) weights in a public model's
    /// shape (smollm2-135m, smollm2-360m, qwen3-0.6b … qwen3-8b, qwen3.5-0.8b, qwen3.5-4b).
    #[arg(long)]
    model: Option<String>,
    /// Tokens to generate (default: the lesson's).
    #[arg(long)]
    max_tokens: Option<usize>,
    /// The prompt to answer (default: the lesson's).
    #[arg(long)]
    prompt: Option<String>,
    /// Stop an exercise that runs longer than this many seconds (default: no limit;
    /// also `QUEST_TIME_LIMIT`).
    #[arg(long, env = "QUEST_TIME_LIMIT")]
    time_limit: Option<u64>,
}

fn parse_answer(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(q, a)| (q.trim().to_owned(), a.trim().to_owned()))
        .filter(|(q, a)| !q.is_empty() && !a.is_empty())
        .ok_or_else(|| format!("`{text}`: write an answer as QUESTION=CHOICE, e.g. term=fixed"))
}

fn parse_weights(text: &str) -> Result<quest::lm::Hold, String> {
    text.parse()
}

pub fn main() -> ExitCode {
    // The settings' names and defaults under --help come from the one settings table.
    let matches = Cli::command()
        .after_help(quest::settings::help())
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    runner::end_children_on_signal();
    // Before MLX's first GPU work, which reads MLX's limits on a CUDA graph.
    if let Err(error) = quest::device::graph_commit::set_for_this_process() {
        eprintln!("quest: {error:#}");
        return ExitCode::FAILURE;
    }
    if let Some(layout) = cli.weights {
        // Read by `lm::load` here and in the exercise binaries quest starts.
        std::env::set_var(quest::settings::WEIGHTS.name, layout.as_str());
    }
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Build failures were already explained by cargo above.
            if error.downcast_ref::<runner::BuildFailed>().is_none() {
                eprintln!("quest: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The project the lessons and exercises live in (`QUEST_ROOT` overrides, for tests).
fn project_root() -> PathBuf {
    quest::settings::ROOT
        .os()
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

struct Ctx {
    course: Course,
    lang: Lang,
    root: PathBuf,
}

impl Ctx {
    fn ui<'a>(&'a self, key: &'a str) -> &'a str {
        self.course.ui(key, self.lang)
    }
    fn ui_with(&self, key: &str, args: &[(&str, &str)]) -> String {
        self.course.ui_with(key, self.lang, args)
    }
    fn lesson(&self, id: &str) -> Result<Lesson> {
        self.course.ensure_known_lesson(id, self.lang)?;
        self.course.lesson(id, self.lang)
    }
    /// Tells a reader of a translation that the English text changed since.
    fn warn_if_stale(&self, lesson: &Lesson) {
        if matches!(
            lesson.translation_status(),
            Ok(TranslationStatus::Stale { .. })
        ) {
            eprintln!("! {}", self.ui("translation_stale"));
        }
    }
    fn options(&self) -> RenderOptions {
        RenderOptions::for_stdout(self.lang)
    }
}

/// Each command to its handler. What a handler starts from says what it needs: the
/// measurements on random weights no course, serving pages no backend, and the learner's
/// commands the course in the language chosen or remembered.
fn dispatch(cli: Cli) -> Result<()> {
    let lang = cli.lang.as_deref();
    match cli.command {
        Command::Completions { shell } => print_completions(shell),
        // Authors' tools run no model (prebuilding needs cargo, not a GPU).
        Command::Dev(command) => dev::run(&project_root(), &command),
        Command::Fit { configs: true, .. } => print_fit_configs(),
        Command::Fit {
            shapes,
            max_tokens,
            rounds,
            bits,
            group_size,
            peer,
            ..
        } => measure_fit(shapes, bits, group_size, peer, max_tokens, rounds),
        Command::Slope {
            shapes,
            contexts,
            fill,
            max_tokens,
            rounds,
        } => measure_slope(shapes, contexts, fill, max_tokens, rounds),
        Command::Batch {
            model,
            shapes,
            batch,
            max_tokens,
            rounds,
            out,
        } => measure_batch(model, shapes, batch, max_tokens, rounds, out),
        Command::Kernel {
            kernel,
            shapes,
            model,
            max_tokens,
            rounds,
        } => measure_kernel(kernel, shapes, model, max_tokens, rounds),
        Command::Status { repair: true, .. } => repair_progress(lang),
        Command::Serve { port, open } => serve_course(lang, port, open),
        Command::Run {
            lesson,
            run,
            no_lesson,
            lesson_text,
        } => {
            let show = match (no_lesson, lesson_text) {
                (true, _) => None,
                (false, true) => Some(render::Show::WithAppendix),
                (false, false) => Some(render::Show::Lesson),
            };
            run_lesson(&learner_ctx(lang)?, &lesson, &run, show)
        }
        Command::Submit {
            lesson,
            run,
            rounds,
            predictions,
        } => submit_lesson(&learner_ctx(lang)?, &lesson, run, rounds, predictions),
        Command::Card {
            lesson,
            before,
            after,
            answers,
        } => fill_card(&learner_ctx(lang)?, &lesson, before, after, answers),
        Command::Status { verbose, json, .. } => {
            status::status(&learner_ctx(lang)?, verbose, false, json)
        }
        Command::Bench {
            lesson,
            run,
            rounds,
            no_python,
            out,
        } => bench_lesson(&learner_ctx(lang)?, &lesson, run, rounds, no_python, out),
        Command::List { json: false } => list(&learner_ctx(lang)?),
        Command::List { json: true } => list_json(&learner_ctx(lang)?),
        Command::Hint { lesson, level } => hint(&learner_ctx(lang)?, &lesson, level),
        Command::Reset { lesson, yes } => reset(&learner_ctx(lang)?, &lesson, yes),
        Command::Watch { lesson, run } => watch(&learner_ctx(lang)?, &lesson, &run),
    }
}

/// The project root, once this binary's backend is known to be there: a CUDA build says
/// so where there is no GPU, before anything runs on the CPU instead.
fn backend_root() -> Result<PathBuf> {
    let root = project_root();
    quest::device::require_built_backend()?;
    Ok(root)
}

/// The course, in the language chosen on the command line (English where none is), and
/// that choice.
fn course_ctx(root: PathBuf, lang: Option<&str>) -> Result<(Ctx, Option<Lang>)> {
    let course = Course::load(&root.join("lessons"))?;
    let mut ctx = Ctx {
        course,
        lang: Lang::En,
        root,
    };
    // Read here, not by clap: an unknown language is said in the course's words.
    let chosen = match lang {
        None => None,
        Some(code) => Some(code.parse::<Lang>().map_err(|_| {
            let list: Vec<&str> = Lang::ALL.iter().map(|lang| lang.code()).collect();
            anyhow::anyhow!(ctx.ui_with(
                "unknown_lang",
                &[("lang", code), ("list", &list.join(", "))]
            ))
        })?),
    };
    ctx.lang = chosen.unwrap_or(Lang::En);
    Ok((ctx, chosen))
}

/// The course as a learner's command sees it: on this binary's backend, in the language
/// chosen now or remembered from before.
fn learner_ctx(lang: Option<&str>) -> Result<Ctx> {
    let (mut ctx, chosen) = course_ctx(backend_root()?, lang)?;
    ctx.lang = remembered_lang(&ctx, chosen)?;
    Ok(ctx)
}

fn print_completions(shell: clap_complete::Shell) -> Result<()> {
    clap_complete::generate(shell, &mut Cli::command(), "quest", &mut std::io::stdout());
    Ok(())
}

fn print_fit_configs() -> Result<()> {
    quest::device::require_built_backend()?;
    println!(
        "{}",
        serde_json::to_string_pretty(&quest::lm::random::configs())?
    );
    Ok(())
}

// The measurements on random weights need no course: they also run where only the
// binary was carried (a GPU box).

fn measure_fit(
    shapes: Option<String>,
    bits: Option<String>,
    group_size: i32,
    peer: bool,
    max_tokens: usize,
    rounds: usize,
) -> Result<()> {
    let root = backend_root()?;
    let args = bench::FitArgs {
        shapes,
        bits,
        group_size,
        peer,
        max_tokens: max_tokens.max(2),
        rounds: rounds.max(1),
    };
    bench::fit(&root, &args)
}

fn measure_slope(
    shapes: Option<String>,
    contexts: Option<String>,
    fill: Option<quest::bench::slope::Fill>,
    max_tokens: usize,
    rounds: usize,
) -> Result<()> {
    let root = backend_root()?;
    let args = bench::SlopeArgs {
        shapes,
        contexts,
        fill,
        max_tokens: max_tokens.max(1),
        rounds: rounds.max(1),
    };
    bench::slope(&root, &args)
}

fn measure_batch(
    model: Option<String>,
    shapes: Option<String>,
    batches: String,
    max_tokens: usize,
    rounds: usize,
    out: Option<PathBuf>,
) -> Result<()> {
    let root = backend_root()?;
    let args = bench::BatchArgs {
        model,
        shapes,
        batches,
        max_tokens: max_tokens.max(2),
        rounds: rounds.max(1),
        out: out.unwrap_or_else(|| root.join("target/quest-bench")),
    };
    bench::batch(&args)
}

fn measure_kernel(
    kernel: quest::kernels::Kernel,
    shapes: Option<String>,
    models: Vec<String>,
    max_tokens: usize,
    rounds: usize,
) -> Result<()> {
    let root = backend_root()?;
    let args = bench::KernelArgs {
        kernel,
        shapes,
        models,
        max_tokens: max_tokens.max(2),
        rounds: rounds.max(1),
    };
    bench::kernel(&root, &args)
}

/// Repair must work exactly when the progress file cannot be read: the remembered
/// language is not asked for.
fn repair_progress(lang: Option<&str>) -> Result<()> {
    let (ctx, _) = course_ctx(backend_root()?, lang)?;
    status::status(&ctx, false, true, false)
}

/// Serving pages runs nothing of MLX, so it needs no backend. Read-only: the remembered
/// language is read, never stored, and a damaged progress file is shown on the page, not
/// fatal here.
fn serve_course(lang: Option<&str>, port: u16, open: bool) -> Result<()> {
    let (ctx, chosen) = course_ctx(project_root(), lang)?;
    serve::serve(ctx, chosen, port, open)
}

/// `show`: `None` shows nothing; `Show::Lesson` the lesson the first time and its tasks
/// after, once the progress file says it was read; never a hint.
fn run_lesson(ctx: &Ctx, id: &str, run: &RunArgs, show: Option<render::Show>) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    ctx.warn_if_stale(&lesson);
    if let Some(show) = show {
        let mut store = quest::progress::Store::open_default()?;
        let read = store.state().lesson(id).is_some_and(|r| r.has_read());
        let show = if show == render::Show::Lesson && read {
            render::Show::Tasks
        } else {
            show
        };
        print!(
            "{}",
            render::terminal(&lesson, &ctx.course, show, &ctx.options())
        );
        if show == render::Show::Tasks {
            println!("{}\n", ctx.ui_with("run_tasks_only", &[("id", id)]));
        }
        if !read {
            store.update(|state| {
                state.lesson_mut(id).read = true;
                Ok(())
            })?;
        }
    }
    run_and_record(ctx, &lesson, run)
}

fn submit_lesson(
    ctx: &Ctx,
    id: &str,
    run: RunArgs,
    rounds: Option<usize>,
    predictions: Vec<(String, String)>,
) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let options = submit::SubmitOptions {
        run,
        rounds,
        predictions,
    };
    submit::submit(ctx, &lesson, &options)
}

fn fill_card(
    ctx: &Ctx,
    id: &str,
    before: Option<f64>,
    after: Option<f64>,
    answers: Vec<(String, String)>,
) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let numbers = [("before", before), ("after", after)]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_owned(), value?)))
        .collect();
    let answers = answers.into_iter().collect();
    submit::card(ctx, &lesson, submit::CardInput { numbers, answers })
}

fn bench_lesson(
    ctx: &Ctx,
    id: &str,
    run: RunArgs,
    rounds: usize,
    no_python: bool,
    out: Option<PathBuf>,
) -> Result<()> {
    let lesson = ctx.lesson(id)?;
    let options = bench::BenchOptions {
        run,
        rounds: rounds.max(1),
        python: !no_python,
        out: out.unwrap_or_else(|| ctx.root.join("target/quest-bench")),
    };
    bench::bench(ctx, &lesson, &options)
}

fn list(ctx: &Ctx) -> Result<()> {
    let store = quest::progress::Store::open_default()?;
    println!("{}", ctx.ui("lessons"));
    let mut broken = 0;
    // The id column fits the longest id, so titles line up.
    let w = ctx
        .course
        .tracks
        .iter()
        .flat_map(|t| &t.lessons)
        .map(|id| id.chars().count())
        .max()
        .unwrap_or(0)
        .max(14);
    for track in &ctx.course.tracks {
        println!("  {}", track.title.get(ctx.lang));
        for id in &track.lessons {
            // One broken lesson must not hide the others: it is listed with its error.
            let lesson = match ctx.course.lesson(id, ctx.lang) {
                Ok(lesson) => lesson,
                Err(error) => {
                    broken += 1;
                    println!(
                        "    {id:<w$} {}",
                        ctx.ui_with("lesson_broken", &[("error", &format!("{error:#}"))])
                    );
                    continue;
                }
            };
            let status = ctx.ui(quest::progress::LessonStatus::of(store.state().lesson(id)).key());
            let minutes = ctx.ui_with("minutes", &[("n", &lesson.spec.minutes.to_string())]);
            let xp = ctx.ui_with("xp", &[("n", &lesson.spec.xp.to_string())]);
            let stale = match lesson.translation_status() {
                Ok(TranslationStatus::Stale { .. }) => format!("  ({})", ctx.ui("stale_short")),
                _ => String::new(),
            };
            println!(
                "    {id:<w$} [{status}] {}  ({minutes}, {xp}){stale}",
                lesson.meta.title
            );
            if let Some(shows) = ctx.course.where_it_shows(&lesson, ctx.lang) {
                println!("    {:<w$} {shows}", "");
            }
        }
    }
    if broken > 0 {
        anyhow::bail!(ctx.ui_with("lessons_broken", &[("n", &broken.to_string())]));
    }
    Ok(())
}

/// `quest hint`: the hint's next level, every level before it above (`progress::hint_step`
/// says why), or the one asked for; the furthest level read is kept in the progress file.
fn hint(ctx: &Ctx, id: &str, asked: Option<u32>) -> Result<()> {
    use quest::progress::HintThen;
    let lesson = ctx.lesson(id)?;
    ctx.warn_if_stale(&lesson);
    let hints = lesson
        .hints()
        .with_context(|| format!("{} has no hint section", lesson.path.display()))?;
    let of = hints.levels.len();
    let levels = u32::try_from(of)?;
    let mut store = quest::progress::Store::open_default()?;
    let step = store.update(|state| {
        let reached = state.lesson(id).map_or(0, |record| record.hint_level);
        let Some(step) = quest::progress::hint_step(levels, reached, asked) else {
            anyhow::bail!(ctx.ui_with("hint_no_level", &[("id", id), ("of", &of.to_string())]));
        };
        if step.reached != reached {
            state.lesson_mut(id).hint_level = step.reached;
        }
        Ok(step)
    })?;
    let options = ctx.options();
    let text = render::hint(&lesson, &ctx.course, step.shown.clone(), &options)
        .with_context(|| format!("{} has no hint section", lesson.path.display()))?;
    print!("{text}");
    // Past the last hint: the solution, or the lesson itself for one without an exercise.
    let rest = match &lesson.spec.solution {
        Some(solution) => ctx.ui_with(
            "hint_rest_solution",
            &[("path", &solution.display().to_string())],
        ),
        None => {
            let path = lesson.path.strip_prefix(&ctx.root).unwrap_or(&lesson.path);
            ctx.ui_with("hint_rest_lesson", &[("path", &path.display().to_string())])
        }
    };
    let footer = match step.then {
        HintThen::More { next } => ctx.ui_with(
            "hint_next",
            &[
                ("id", id),
                ("n", &next.to_string()),
                ("of", &of.to_string()),
            ],
        ),
        // A hint of one level reads as it always did.
        HintThen::Last if of == 1 => return Ok(()),
        HintThen::Last => format!("{} {rest}", ctx.ui("hint_last")),
        HintThen::NoneLeft => format!("{} {rest}", ctx.ui_with("hint_none_left", &[("id", id)])),
    };
    print!("\n{}", render::markdown(&footer, &options));
    Ok(())
}

/// `quest list --json`: what the course page lists, for scripts and tests.
fn list_json(ctx: &Ctx) -> Result<()> {
    let store = quest::progress::Store::open_default()?;
    let mut lessons = Vec::new();
    for track in &ctx.course.tracks {
        for id in &track.lessons {
            let lesson = ctx.course.lesson(id, ctx.lang)?;
            let status = quest::progress::LessonStatus::of(store.state().lesson(id));
            let shows_on: Vec<&str> = lesson.spec.shows_on.iter().map(|k| k.key()).collect();
            lessons.push(serde_json::json!({
                "id": id,
                "title": lesson.meta.title,
                "track": track.id,
                "minutes": lesson.spec.minutes,
                "xp": lesson.spec.xp,
                "tags": lesson.spec.tags,
                "status": status.key(),
                "shows_on": shows_on,
            }));
        }
    }
    println!("{}", serde_json::to_string_pretty(&lessons)?);
    Ok(())
}

/// `--lang` is remembered in the progress file; without it, the remembered one is used.
fn remembered_lang(ctx: &Ctx, chosen: Option<Lang>) -> Result<Lang> {
    let mut store = quest::progress::Store::open_default()?;
    match chosen {
        Some(lang) if store.state().lang != Some(lang) => {
            store.update(|state| {
                state.lang = Some(lang);
                Ok(())
            })?;
            Ok(lang)
        }
        Some(lang) => Ok(lang),
        None => Ok(store.state().lang.unwrap_or(ctx.lang)),
    }
}
