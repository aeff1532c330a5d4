//! The exercise's side of the lab: what runs inside an exercise's process. [`Exercise`]
//! reads what quest asked, runs the journey's loop ([`greedy`], [`Exercise::decode`] and
//! its kin) with a [`Timer`] marking its moments, and writes the [`Report`] quest reads
//! back ([`super::runner`] is quest's side, which builds and starts it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::clock;
use super::{graph_ops, host_cost_per_op, OpCost};
use crate::course::Metric;
use crate::kernels::Kernels;
use crate::lm::{Forward, LayerCache, Model};

/// The BLAS line a report carries: MLX's CPU backend's BLAS, empty on a GPU (its matmuls
/// are MLX's own kernels there).
fn cpu_blas() -> String {
    match crate::device::Backend::detect() {
        crate::device::Backend::Cpu => crate::device::blas::describe(),
        _ => String::new(),
    }
}

/// Bumped whenever a field of [`Report`] changes meaning.
pub const REPORT_SCHEMA: u32 = 3;

/// What quest asks an exercise to do.
pub struct Exercise {
    pub model: String,
    pub max_tokens: usize,
    report_path: Option<PathBuf>,
    /// When the exercise began: until [`Exercise::prompt`] it is loading.
    began: Instant,
    /// The prompt, once asked for, and when.
    prompt: std::cell::OnceCell<(String, Instant)>,
    /// The forward calls that decoded the tokens, where a loop keeps several a call.
    forward_calls: std::cell::Cell<usize>,
    /// The most bytes MLX held during a prefill quest's loop measured.
    prefill_peak_bytes: std::cell::Cell<u64>,
    /// The requests of the trace [`Exercise::serve`] served (0: none).
    served_requests: std::cell::Cell<usize>,
}

/// The most tokens a speculative decoder proposes a step ([`Exercise::decode_speculative`]).
pub const SPECULATE_K: usize = 4;

/// For a loop that runs no model (a course's test fixture): no weights, no kernels.
pub struct NoModel;

impl Forward for NoModel {
    fn forward(&self, _tokens: &mlx_rs::Array, _cache: &mut [LayerCache]) -> Result<mlx_rs::Array> {
        anyhow::bail!("NoModel runs no model: it only tells a report there was none")
    }
    fn make_cache(&self) -> Vec<LayerCache> {
        Vec::new()
    }
    fn kernels(&self) -> Kernels {
        Kernels::NONE
    }
}

impl Exercise {
    pub fn from_env() -> Result<Self> {
        use crate::settings;
        let max_tokens: usize = settings::MAX_TOKENS.parse()?;
        // Run by hand, the learner chooses the pieces; run by quest, quest's line does.
        if !crate::line::connected() {
            let pieces = settings::PIECES.value();
            anyhow::ensure!(
                ["yours", "quest"].contains(&pieces.as_str()),
                "{}={pieces}: it takes `yours` or `quest`",
                settings::PIECES.name
            );
        }
        Ok(Self {
            model: settings::MODEL.value(),
            max_tokens: max_tokens.max(1),
            report_path: settings::REPORT.os().map(PathBuf::from),
            began: Instant::now(),
            prompt: std::cell::OnceCell::new(),
            forward_calls: std::cell::Cell::new(0),
            served_requests: std::cell::Cell::new(0),
            prefill_peak_bytes: std::cell::Cell::new(0),
        })
    }

    /// The prompt to answer. Call it once the model is loaded: quest hands the prompt over
    /// only then, and its clock's time to first token starts as it does ([`clock`]), so
    /// the load is not in it and no prefill can start before it. Run by hand, the prompt
    /// is `QUEST_PROMPT`'s (or the default). Asked again, the same prompt.
    pub fn prompt(&self) -> Result<String> {
        if let Some((prompt, _)) = self.prompt.get() {
            return Ok(prompt.clone());
        }
        let prompt = match crate::line::ready()? {
            Some(prompt) => prompt,
            None => crate::settings::PROMPT.value(),
        };
        let _ = self.prompt.set((prompt.clone(), Instant::now()));
        Ok(prompt)
    }

    /// Writes the report for quest (or prints the numbers when run by hand): one
    /// sequence's tokens, decoded by `model` (its weight layout, the bytes a step reads and
    /// the kernels that ran go in the report).
    pub fn report(
        &self,
        timer: &Timer,
        model: &dyn Forward,
        prompt_tokens: usize,
        tokens: &[u32],
        text: &str,
    ) -> Result<()> {
        self.report_rows(timer, model, prompt_tokens, &[tokens.to_vec()], text)
    }

    /// [`Exercise::report`] for a batch: the tokens of each sequence (row), all of one
    /// length, decoded together (each step wrote one token to every row). The decode rate
    /// counts every row's tokens; `text` is row 0's.
    pub fn report_rows(
        &self,
        timer: &Timer,
        model: &dyn Forward,
        prompt_tokens: usize,
        rows: &[Vec<u32>],
        text: &str,
    ) -> Result<()> {
        self.report_rows_with(timer, model, prompt_tokens, rows, text, None)
    }

    fn report_rows_with(
        &self,
        timer: &Timer,
        model: &dyn Forward,
        prompt_tokens: usize,
        rows: &[Vec<u32>],
        text: &str,
        ops: Option<(usize, &OpCost)>,
    ) -> Result<()> {
        let requests = self.served_requests.get();
        // A served trace's requests have tokens of their own lengths: all of them, in
        // order of id, are what the run decoded.
        let tokens = if requests > 0 {
            rows.concat()
        } else {
            rows.first().cloned().unwrap_or_default()
        };
        anyhow::ensure!(
            requests > 0 || rows.iter().all(|row| row.len() == tokens.len()),
            "every row of a batch writes one token per step, but these rows hold {:?} tokens",
            rows.iter().map(Vec::len).collect::<Vec<_>>()
        );
        let kernels = model.kernels();
        let kernel_use = model.kernel_use();
        let (weights, weight_bytes) = model.weights();
        let fed = model.fed();
        let (prefill_fed, steps_fed) = timer.split_fed(&fed);
        // Every token the timer was not handed goes to quest's clock now, all at once (a
        // served trace's went as they were emitted).
        let unhanded = if requests > 0 { 0 } else { tokens.len() };
        for step in timer.handed().min(unhanded)..unhanded {
            let ids: Vec<u32> = rows.iter().map(|row| row[step]).collect();
            crate::line::send_step("rest", &ids);
        }
        // How often the model called each piece, counted by quest's seam.
        if let Ok(calls) = serde_json::to_string(&crate::lm::pieces::calls()) {
            crate::line::send(&format!("calls {calls}"));
        }
        // The bytes a step reads, as quest's model counts them: quest takes them from here,
        // never from the report file.
        crate::line::send(&format!("weights {weight_bytes}"));
        crate::line::send("end");
        let loaded = self.prompt.get().map_or(timer.start, |(_, at)| *at);
        let reading = TimerReading {
            load_ms: loaded.saturating_duration_since(self.began).as_secs_f64() * 1e3,
            ttft_ms: timer.ttft().as_secs_f64() * 1e3,
            decode_tok_s: timer.decode_tok_s(tokens.len()) * rows.len().max(1) as f64,
            token_ms: timer.token_ms(),
        };
        // Run by quest, the timed fields are its clock's, filled in by quest.
        let timed = if crate::line::connected() {
            TimerReading::default()
        } else {
            reading.clone()
        };
        let report = Report {
            schema: REPORT_SCHEMA,
            model: self.model.clone(),
            backend: crate::device::Backend::detect(),
            blas: cpu_blas(),
            prompt_tokens,
            generated_tokens: tokens.len(),
            load_ms: timed.load_ms,
            warm_up_ms: 0.0,
            ttft_ms: timed.ttft_ms,
            decode_tok_s: timed.decode_tok_s,
            token_ms: timed.token_ms,
            timer: Some(reading),
            disagreement: None,
            held_back: None,
            calls: None,
            tokens,
            batch: rows.len().max(1),
            rows: if rows.len() > 1 || requests > 0 {
                rows.to_vec()
            } else {
                Vec::new()
            },
            requests,
            served: None,
            levels: Vec::new(),
            text: text.to_owned(),
            weights,
            weight_bytes_per_token: weight_bytes,
            quest_kernels: kernel_use.ran.iter().map(|k| (*k).to_owned()).collect(),
            quest_kernels_off: kernel_use
                .off_for_piece
                .iter()
                .map(|k| (*k).to_owned())
                .collect(),
            quest_kernels_kept: kernels.kept(),
            quest_kernels_for_pieces: kernels.for_pieces(),
            inputs: serde_json::Value::Null,
            values: BTreeMap::new(),
            prefill_fed,
            steps_fed,
            steps_build_ms: timer.steps_built(&fed),
            layers: model.layers(),
            ops_per_step: ops.map_or(0, |(n, _)| n),
            forward_calls: self.forward_calls.get(),
            prefill_peak_bytes: self.prefill_peak_bytes.get(),
            us_per_op: ops.map_or(0.0, |(_, cost)| cost.us_per_op),
        };
        match &self.report_path {
            Some(path) => report.write(path),
            None => {
                println!(
                    "load {:.1} ms · TTFT {:.1} ms · decode {:.2} tok/s · {} weights, {:.0} MB per token",
                    report.load_ms,
                    report.ttft_ms,
                    report.decode_tok_s,
                    report.weights,
                    report.weight_bytes_per_token as f64 / 1e6
                );
                if report.batch > 1 {
                    println!(
                        "batch {}: {:.2} tok/s per sequence",
                        report.batch,
                        report.metric(Metric::PerSeqTokS).unwrap_or_default()
                    );
                }
                if report.ops_per_step > 0 {
                    println!(
                        "{} ops per decode step · {:.2} µs per op here: {:.2} ms of host work per step predicted",
                        report.ops_per_step,
                        report.us_per_op,
                        report.metric(Metric::HostMsPredicted).unwrap_or_default()
                    );
                }
                if let Some(growth) = report.metric(Metric::MsPerTokenGrowth) {
                    println!(
                        "{:.2} ms per token, growing {growth:.2} ms per 100 tokens",
                        report.metric(Metric::MsPerToken).unwrap_or_default()
                    );
                }
                Ok(())
            }
        }
    }
}

/// One greedy decode of the journey's loop, as [`greedy`] ran it.
pub struct Greedy {
    pub prompt_ids: Vec<u32>,
    /// The token each step picked (its argmax), whatever was fed.
    pub tokens: Vec<u32>,
    /// Each step's logits over the vocabulary, when asked for (step 0: the prompt's last
    /// position).
    pub logits: Vec<Vec<f32>>,
    pub timer: Timer,
    /// The ops of one more decode step, built after the loop was done and counted
    /// ([`graph_ops`]), when asked for; else 0.
    pub step_ops: usize,
}

/// The journey's greedy loop on `model`: the chat prompt prefilled, then one token a
/// step for `max_tokens` steps. `forced`: the tokens to feed instead of its own picks
/// (teacher forcing, so two models are compared on one sequence whatever each picks);
/// `keep_logits`: read every step's logits back (a sync per step, which a timed run does
/// anyway to read its token).
pub fn greedy(
    model: &dyn crate::lm::Forward,
    tokenizer: &crate::lm::Tokenizer,
    prompt: &str,
    max_tokens: usize,
    forced: Option<&[u32]>,
    keep_logits: bool,
) -> Result<Greedy> {
    greedy_with(
        model,
        tokenizer,
        prompt,
        max_tokens,
        forced,
        keep_logits,
        false,
    )
}

/// [`greedy`], and with `count_ops` the ops of one more decode step's graph (never run).
fn greedy_with(
    model: &dyn crate::lm::Forward,
    tokenizer: &crate::lm::Tokenizer,
    prompt: &str,
    max_tokens: usize,
    forced: Option<&[u32]>,
    keep_logits: bool,
    count_ops: bool,
) -> Result<Greedy> {
    let mut argmax = |_: usize, last: &mlx_rs::Array| -> Result<u32> {
        let y = mlx_rs::ops::indexing::argmax_axis(last, -1, None)?;
        Ok(y.item_exact::<u32>())
    };
    decode_loop(
        model,
        tokenizer,
        prompt,
        max_tokens,
        forced,
        keep_logits,
        count_ops,
        &mut argmax,
    )
}

/// The journey's loop with the token of each step chosen by `pick` (the step, the last
/// position's logits `[1, vocab]`): [`greedy_with`]'s argmax, or a sampler's draw.
#[allow(clippy::too_many_arguments)]
fn decode_loop(
    model: &dyn crate::lm::Forward,
    tokenizer: &crate::lm::Tokenizer,
    prompt: &str,
    max_tokens: usize,
    forced: Option<&[u32]>,
    keep_logits: bool,
    count_ops: bool,
    pick: &mut dyn FnMut(usize, &mlx_rs::Array) -> Result<u32>,
) -> Result<Greedy> {
    use crate::lm;
    let prompt_ids = tokenizer.encode_user_prompt(prompt)?;
    let mut cache = model.make_cache();
    let mut timer = Timer::start();
    let mut logits_kept = Vec::new();
    let mut tokens = Vec::with_capacity(max_tokens);
    let mut input = lm::tokens_array(&prompt_ids);
    for step in 0..max_tokens.max(1) {
        let logits = model.forward(&input, &mut cache)?;
        let last = lm::last_position(&logits);
        let token = pick(step, &last)?;
        tokens.push(token);
        if step == 0 {
            timer.first_token(token);
        } else {
            timer.token(token);
        }
        if keep_logits {
            let row = last.as_dtype(mlx_rs::Dtype::Float32)?;
            logits_kept.push(row.as_slice::<f32>().to_vec());
        }
        let fed = match forced {
            Some(forced) => *forced.get(step).with_context(|| {
                format!(
                    "{} lists {} tokens; step {} needs one more",
                    crate::settings::FORCE.name,
                    forced.len(),
                    step + 1
                )
            })?,
            None => tokens[step],
        };
        input = lm::tokens_array(&[fed]);
    }
    timer.done();
    // One more step built as the loop builds each, on the cache as it stands, and
    // counted, not run. The cache's writes feed the step's attention, so the logits'
    // graph holds them too.
    let step_ops = if count_ops {
        let logits = model.forward(&input, &mut cache)?;
        graph_ops(&[&logits])?
    } else {
        0
    };
    Ok(Greedy {
        prompt_ids,
        tokens,
        logits: logits_kept,
        timer,
        step_ops,
    })
}

use crate::lm::models::Layers;

/// Floats as the files quest and an exercise exchange hold them: float32, little-endian.
fn le_bytes<'a>(values: impl IntoIterator<Item = &'a f32>) -> Vec<u8> {
    values.into_iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `QUEST_LAYERS`'s file: the layer count and the width (u32, little-endian),
/// then every step's rows of float32.
fn write_layers(path: &Path, steps: &Layers) -> Result<()> {
    let layers = steps.first().map_or(0, Vec::len);
    let width = steps.first().and_then(|s| s.first()).map_or(0, Vec::len);
    let mut bytes = Vec::new();
    bytes.extend((layers as u32).to_le_bytes());
    bytes.extend((width as u32).to_le_bytes());
    bytes.extend(le_bytes(steps.iter().flatten().flatten()));
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Writes `QUEST_LOGITS`'s file: every step's row of float32, one after another.
fn write_logits(path: &Path, logits: &[Vec<f32>]) -> Result<()> {
    std::fs::write(path, le_bytes(logits.iter().flatten()))
        .with_context(|| format!("writing {}", path.display()))
}

impl Exercise {
    /// Runs the journey's greedy loop ([`greedy`]) on `model` and reports it: what an
    /// exercise that writes a piece of the model ([`crate::lm::Pieces`]) ends with. When
    /// quest checks its numbers it names tokens to feed (`QUEST_FORCE`) and a file for
    /// every step's logits (`QUEST_LOGITS`).
    pub fn decode(&self, model: &Model, tokenizer: &crate::lm::Tokenizer) -> Result<()> {
        self.decode_reporting(model, tokenizer, false)
    }

    /// [`Exercise::decode`], and the report says what the host's ops cost: the ops of one
    /// decode step's graph (a step built after the loop, counted, never run) and this
    /// backend's µs per op ([`host_cost_per_op`], measured after the loop). Neither
    /// touches the loop's timing.
    pub fn decode_counting_ops(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
    ) -> Result<()> {
        self.decode_reporting(model, tokenizer, true)
    }

    /// The loop of [`Exercise::decode`], each layer's hidden states written where quest
    /// asks, then the report; with `count_ops` the step's ops and µs per op in it.
    fn decode_reporting(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        count_ops: bool,
    ) -> Result<()> {
        let layers_path = crate::settings::LAYERS.os().map(PathBuf::from);
        if layers_path.is_some() {
            model.record_layers();
        }
        let run = self.greedy_checked(model, tokenizer, count_ops)?;
        if let Some(path) = &layers_path {
            write_layers(path, &model.recorded_layers())?;
        }
        let cost = if count_ops {
            Some(host_cost_per_op()?)
        } else {
            None
        };
        let ops = cost.as_ref().map(|cost| (run.step_ops, cost));
        self.report_greedy(&run, model, tokenizer, ops)
    }

    /// [`Exercise::decode`] for a decoder of the learner's own (any [`crate::lm::Forward`]):
    /// the same loop, feeds and logits file; each forward call is timed as quest's model
    /// times its own ([`crate::lm::Fed`]), and `weights` (from [`crate::lm::Checkpoint::finish`])
    /// names what it holds. It reports no layers' hidden states. With `QUEST_PIECES=quest`
    /// it decodes with quest's own model instead.
    pub fn decode_yours(
        &self,
        model: &dyn crate::lm::Forward,
        weights: &crate::lm::WeightsRead,
        tokenizer: &crate::lm::Tokenizer,
    ) -> Result<()> {
        // The baseline quest measures a learner's decoder against: quest's own model, in
        // the learner's own binary.
        if crate::line::quest_pieces() {
            let (quest, _) = crate::lm::load(&self.model)?;
            return self.decode(&quest, tokenizer);
        }
        let yours = Yours {
            model,
            weights,
            fed: std::cell::RefCell::new(Vec::new()),
            layers: model.make_cache().len(),
        };
        let run = self.greedy_checked(&yours, tokenizer, false)?;
        self.report_greedy(&run, &yours, tokenizer, None)
    }

    /// The journey's loop with each step's token drawn by `sampler` as `QUEST_SAMPLING`
    /// asks ([`crate::lm::Sampling`]), from one key a step split from the seed's: the same
    /// seed writes the same tokens. When quest checks the sampler it sets `QUEST_DRAWS`:
    /// every step then draws `QUEST_DRAWS_PER_STEP` tokens from its logits (the first is
    /// the step's token), written there, and the logits where `QUEST_LOGITS` says. With
    /// `QUEST_PIECES=quest` quest's own sampler draws instead.
    pub fn decode_sampled(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        sampler: &dyn crate::lm::Sampler,
    ) -> Result<()> {
        use crate::settings::{DRAWS, DRAWS_PER_STEP, LOGITS};
        let sampling = crate::lm::Sampling::from_env()?;
        let sampler: &dyn crate::lm::Sampler = if crate::line::quest_pieces() {
            &crate::lm::QuestSampler
        } else {
            crate::lm::piece_check::when_asked_sampler(sampler);
            sampler
        };
        let draws_path = DRAWS.os().map(PathBuf::from);
        let draws: i32 = match &draws_path {
            Some(_) => DRAWS_PER_STEP.parse()?,
            None => 1,
        };
        anyhow::ensure!(draws >= 1, "{} must be 1 or more", DRAWS_PER_STEP.name);
        let logits_path = LOGITS.os().map(PathBuf::from);
        let mut key = mlx_rs::random::key(sampling.seed)?;
        let mut drawn: Vec<u32> = Vec::new();
        let mut pick = |_: usize, last: &mlx_rs::Array| -> Result<u32> {
            let (this, next) = mlx_rs::random::split(&key, 2)?;
            key = next;
            let row = last.as_dtype(mlx_rs::Dtype::Float32)?;
            // Counted on its way in, as the model's seam counts its pieces.
            if !crate::line::quest_pieces() {
                crate::lm::pieces::seam_called(crate::course::spec::Piece::Sample);
            }
            let tokens = sampler.sample(&row, &sampling, draws, &this)?;
            anyhow::ensure!(
                tokens.shape() == [1, draws],
                "the sampler returned shape {:?} for logits of shape {:?} and {draws} draws: \
                 it must return [rows, draws] = [1, {draws}]",
                tokens.shape(),
                row.shape()
            );
            let tokens = tokens.as_dtype(mlx_rs::Dtype::Uint32)?;
            let tokens = tokens.as_slice::<u32>();
            if draws_path.is_some() {
                drawn.extend_from_slice(tokens);
            }
            Ok(tokens[0])
        };
        let run = decode_loop(
            model,
            tokenizer,
            &self.prompt()?,
            self.max_tokens,
            None,
            logits_path.is_some(),
            false,
            &mut pick,
        )?;
        if let Some(path) = &logits_path {
            write_logits(path, &run.logits)?;
        }
        if let Some(path) = &draws_path {
            let bytes: Vec<u8> = drawn.iter().flat_map(|t| t.to_le_bytes()).collect();
            std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        self.report_greedy(&run, model, tokenizer, None)
    }

    /// Speculative decoding ([`crate::lm::speculate`]): the chat prompt prefilled, then
    /// `speculator` proposes up to [`SPECULATE_K`] tokens a step and verifies them in one
    /// forward call, every kept token handed to the timer as it is known; then the report,
    /// with the forward calls that decoded the tokens. quest checks `verify` first where it
    /// asks (`verify` alone on this model), and measures the loop against the same one
    /// proposing nothing ([`crate::lm::speculate::ProposesNothing`], `QUEST_PIECES=quest`).
    pub fn decode_speculative(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        speculator: &mut dyn crate::lm::speculate::Speculator,
    ) -> Result<()> {
        use crate::lm::speculate::{self, ProposesNothing};
        let prompt_ids = tokenizer.encode_user_prompt(&self.prompt()?)?;
        let mut baseline = ProposesNothing;
        let speculator: &mut dyn speculate::Speculator = if crate::line::quest_pieces() {
            &mut baseline
        } else {
            speculate::when_asked(model, &prompt_ids, speculator);
            speculator
        };
        let mut counted = speculate::Counted(speculator);
        let calls_before = model.fed().len();
        let mut timer = Timer::start();
        let decoded = speculate::decode(
            model,
            &prompt_ids,
            self.max_tokens,
            SPECULATE_K,
            &mut counted,
            &mut |token, first| {
                if first {
                    timer.first_token(token);
                } else {
                    timer.token(token);
                }
            },
        )?;
        timer.done();
        self.forward_calls.set(model.fed().len() - calls_before);
        let run = Greedy {
            prompt_ids,
            tokens: decoded.tokens,
            logits: Vec::new(),
            timer,
            step_ops: 0,
        };
        self.report_greedy(&run, model, tokenizer, None)
    }

    /// Attention in blocks ([`crate::lm::blocks`]): every attention layer of `model`
    /// computes through `blocks`, a decode step's cache cut into blocks of
    /// `QUEST_ATTENTION_BLOCK` keys; then the journey's greedy loop, as
    /// [`Exercise::decode`]. quest checks `blocks` first where it asks, and measures the loop
    /// against MLX's attention in one call (`QUEST_PIECES=quest`).
    pub fn decode_in_blocks(
        &self,
        model: Model,
        tokenizer: &crate::lm::Tokenizer,
        blocks: impl crate::lm::blocks::BlockAttention + 'static,
    ) -> Result<()> {
        use crate::lm::blocks::{self, InBlocks};
        let size = blocks::block_size()?;
        if !crate::line::quest_pieces() {
            blocks::when_asked(&blocks, size);
        }
        let model = model.with_pieces(InBlocks::new(blocks, size));
        self.decode(&model, tokenizer)
    }

    /// Continuous batching ([`crate::lm::batching`]): quest's trace of requests (the
    /// lesson's prompt first, then questions of quest's, arriving `QUEST_ARRIVAL_MS` apart
    /// on average) served by `scheduler` on `model`; every token goes to quest's clock as
    /// it is emitted, which times each request from its arrival. quest checks `join` and
    /// `keep` first where it asks, and measures the loop against static batching
    /// ([`crate::lm::batching::StaticBatches`], `QUEST_PIECES=quest`).
    pub fn serve(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        scheduler: &mut dyn crate::lm::batching::Scheduler,
    ) -> Result<()> {
        use crate::lm::batching::{self, Engine, Requests, StaticBatches};
        let engine = Engine::new(model)?;
        let gap_ms = batching::mean_gap_ms()?;
        let prompt = self.prompt()?;
        let planned = batching::trace(
            batching::TRACE_REQUESTS,
            gap_ms,
            self.max_tokens,
            &prompt,
            batching::TRACE_SEED,
        );
        let prompts = planned
            .iter()
            .map(|p| tokenizer.encode_user_prompt(&p.question))
            .collect::<Result<Vec<_>>>()?;
        let prompt_tokens: usize = prompts.iter().map(Vec::len).sum();
        let mut baseline = StaticBatches;
        let scheduler: &mut dyn batching::Scheduler = if crate::line::quest_pieces() {
            &mut baseline
        } else {
            batching::when_asked(&engine, &prompts, scheduler);
            scheduler
        };
        let timer = Timer::start();
        let mut requests = Requests::start(planned, prompts, tokenizer.eos_token_ids.clone());
        scheduler.serve(&engine, &mut requests)?;
        let unfinished = requests.unfinished();
        anyhow::ensure!(
            unfinished == 0,
            "`serve` returned with {unfinished} of {} requests unfinished: loop until every request has its tokens (`requests.unfinished() == 0`)",
            requests.planned().len()
        );
        let (steps, widest) = engine.steps();
        let rows = requests.tokens().to_vec();
        let text = tokenizer.decode(crate::lm::until_eos(&rows[0], tokenizer))?;
        if !crate::line::connected() {
            println!("{text}");
            println!(
                "{} requests, {} tokens in {steps} steps of up to {widest} rows",
                rows.len(),
                rows.iter().map(Vec::len).sum::<usize>()
            );
        }
        self.served_requests.set(rows.len());
        self.report_rows(&timer, model, prompt_tokens, &rows, &text)
    }

    /// Your server ([`crate::lm::serving`]): `scheduler`'s loop on `model` behind `api`, an
    /// OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1, until the process is
    /// stopped. Run by quest it listens on any free port and says which on quest's line,
    /// where quest's clients time every token as it reaches them; by hand, on
    /// `QUEST_PORT`. quest checks `parse` (and the scheduler's `join` and `keep`) first
    /// where it asks; `QUEST_PIECES=quest` serves with quest's edge and static batching.
    pub fn serve_http(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        api: &dyn crate::lm::serving::Api,
        scheduler: &mut dyn crate::lm::batching::Scheduler,
    ) -> Result<()> {
        use crate::lm::batching::{Engine, Requests, StaticBatches};
        use crate::lm::serving::{self, QuestApi};
        let engine = Engine::new(model)?;
        let mut baseline = StaticBatches;
        let (api, scheduler): (&dyn serving::Api, &mut dyn crate::lm::batching::Scheduler) =
            if crate::line::quest_pieces() {
                (&QuestApi, &mut baseline)
            } else {
                // The scheduler's check rows: the trace's prompts, as `serve` checks them.
                let trace = crate::lm::batching::trace(
                    crate::lm::batching::TRACE_REQUESTS,
                    0.0,
                    self.max_tokens,
                    &crate::settings::PROMPT.value(),
                    crate::lm::batching::TRACE_SEED,
                );
                let prompts = trace
                    .iter()
                    .map(|p| tokenizer.encode_user_prompt(&p.question))
                    .collect::<Result<Vec<_>>>()?;
                serving::when_asked(api, &engine, &prompts, scheduler);
                (api, scheduler)
            };
        let port = if crate::line::connected() {
            0
        } else {
            let setting = crate::settings::PORT;
            let text = setting.value();
            match text.trim() {
                "" => 0,
                text => text.parse().map_err(|_| {
                    anyhow::anyhow!(
                        "{}={text} is not a port: give a number from 1 to 65535, or leave it unset",
                        setting.name
                    )
                })?,
            }
        };
        let listening = serving::bind(port)?;
        let port = listening.port;
        if crate::line::connected() {
            crate::line::send(&format!("listening {port}"));
        } else {
            println!("listening on http://127.0.0.1:{port}/v1/chat/completions (Ctrl-C stops it)");
        }
        let (handed, incoming) = std::sync::mpsc::channel();
        let mut requests = Requests::live(incoming, tokenizer.eos_token_ids.clone());
        std::thread::scope(|scope| {
            serving::accept(scope, listening, api, tokenizer, &self.model, handed);
            scheduler.serve(&engine, &mut requests)
        })
    }

    /// A chunked prefill ([`crate::lm::prefill`]): the chat prompt into the cache through
    /// `prefill`, at most `QUEST_PREFILL_CHUNK` positions a forward call, then greedy
    /// decoding; the first token timed as the prefill's logits give it, each later one as
    /// it is known. quest's loop reads MLX's peak memory over the prefill (above what was
    /// held before it) and sends it on quest's line. quest checks `prefill` first where it
    /// asks, and measures the loop against the one-shot prefill
    /// ([`crate::lm::prefill::OneShot`], `QUEST_PIECES=quest`).
    pub fn decode_prefilled(
        &self,
        model: &Model,
        tokenizer: &crate::lm::Tokenizer,
        prefill: &mut dyn crate::lm::prefill::Prefill,
    ) -> Result<()> {
        use crate::course::spec::Piece;
        use crate::lm::prefill::{self, OneShot};
        let chunk: usize = crate::settings::PREFILL_CHUNK.parse()?;
        anyhow::ensure!(
            chunk >= 1,
            "{} must be 1 or more",
            crate::settings::PREFILL_CHUNK.name
        );
        let prompt_ids = tokenizer.encode_user_prompt(&self.prompt()?)?;
        let mut baseline = OneShot;
        let prefill: &mut dyn prefill::Prefill = if crate::line::quest_pieces() {
            &mut baseline
        } else {
            prefill::when_asked(model, &prompt_ids, prefill);
            crate::lm::pieces::seam_called(Piece::Prefill);
            prefill
        };
        let mut cache = model.make_cache();
        let held_before = mlx_rs::memory::active_memory()?;
        mlx_rs::memory::reset_peak_memory()?;
        let mut timer = Timer::start();
        let logits =
            crate::line::prefilling(|| prefill.prefill(model, &mut cache, &prompt_ids, chunk))?;
        let first = crate::lm::argmax_token(&logits)?;
        let peak = mlx_rs::memory::peak_memory()?.saturating_sub(held_before) as u64;
        crate::line::send(&format!("peak {peak}"));
        self.prefill_peak_bytes.set(peak);
        timer.first_token(first);
        let mut tokens = vec![first];
        while tokens.len() < self.max_tokens {
            let last = *tokens.last().expect("the first token");
            let next = crate::lm::greedy_next(model, &mut cache, last)?;
            timer.token(next);
            tokens.push(next);
        }
        timer.done();
        let run = Greedy {
            prompt_ids,
            tokens,
            logits: Vec::new(),
            timer,
            step_ops: 0,
        };
        self.report_greedy(&run, model, tokenizer, None)
    }

    /// [`greedy`] with the tokens quest names to feed (`QUEST_FORCE`) and every step's
    /// logits written where quest asks (`QUEST_LOGITS`); with `count_ops`, one more step's
    /// ops counted after it.
    fn greedy_checked(
        &self,
        model: &dyn crate::lm::Forward,
        tokenizer: &crate::lm::Tokenizer,
        count_ops: bool,
    ) -> Result<Greedy> {
        let forced = match crate::settings::FORCE.raw() {
            Some(list) => Some(
                list.split(',')
                    .map(|t| t.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| {
                        format!(
                            "{} must list token ids: {list}",
                            crate::settings::FORCE.name
                        )
                    })?,
            ),
            None => None,
        };
        let logits_path = crate::settings::LOGITS.os().map(PathBuf::from);
        let run = greedy_with(
            model,
            tokenizer,
            &self.prompt()?,
            self.max_tokens,
            forced.as_deref(),
            logits_path.is_some(),
            count_ops,
        )?;
        if let Some(path) = &logits_path {
            write_logits(path, &run.logits)?;
        }
        Ok(run)
    }

    fn report_greedy(
        &self,
        run: &Greedy,
        model: &dyn Forward,
        tokenizer: &crate::lm::Tokenizer,
        ops: Option<(usize, &OpCost)>,
    ) -> Result<()> {
        let text = tokenizer.decode(crate::lm::until_eos(&run.tokens, tokenizer))?;
        println!("{text}");
        let rows = [run.tokens.clone()];
        self.report_rows_with(&run.timer, model, run.prompt_ids.len(), &rows, &text, ops)
    }
}

/// A learner's decoder as the report sees it: each forward call timed, as [`Model`] does.
struct Yours<'a> {
    model: &'a dyn crate::lm::Forward,
    weights: &'a crate::lm::WeightsRead,
    fed: std::cell::RefCell<Vec<crate::lm::Fed>>,
    layers: usize,
}

impl Forward for Yours<'_> {
    fn forward(
        &self,
        tokens: &mlx_rs::Array,
        cache: &mut [crate::lm::LayerCache],
    ) -> Result<mlx_rs::Array> {
        // Marked on quest's line as quest's model marks its own calls.
        crate::line::asked();
        let at = Instant::now();
        let logits = self.model.forward(tokens, cache)?;
        let shape = tokens.shape();
        self.fed.borrow_mut().push(crate::lm::Fed {
            at,
            rows: shape[0] as usize,
            positions: shape[1] as usize,
            built: at.elapsed(),
        });
        Ok(logits)
    }
    fn make_cache(&self) -> Vec<crate::lm::LayerCache> {
        self.model.make_cache()
    }
    fn weights(&self) -> (String, u64) {
        (self.weights.layout.name(), self.weights.bytes as u64)
    }
    // quest's kernels: none in the learner's decoder (the trait's default).
    fn fed(&self) -> Vec<crate::lm::Fed> {
        self.fed.borrow().clone()
    }
    fn layers(&self) -> usize {
        self.layers
    }
}

impl Exercise {
    /// Writes the report of an exercise that computes values rather than decoding text:
    /// the `inputs` quest gave it (e.g. `physics::measure_decode`'s) and the `values` it
    /// computed from them, which quest recomputes and checks (a lesson's `values:`).
    /// Run by hand, it prints the values.
    pub fn report_values(
        &self,
        inputs: &impl Serialize,
        values: &Values,
        text: &str,
    ) -> Result<()> {
        let report = Report {
            schema: REPORT_SCHEMA,
            model: self.model.clone(),
            backend: crate::device::Backend::detect(),
            blas: cpu_blas(),
            prompt_tokens: 0,
            generated_tokens: 0,
            load_ms: 0.0,
            warm_up_ms: 0.0,
            ttft_ms: 0.0,
            decode_tok_s: 0.0,
            token_ms: Vec::new(),
            timer: None,
            disagreement: None,
            held_back: None,
            calls: None,
            tokens: Vec::new(),
            batch: 1,
            rows: Vec::new(),
            requests: 0,
            served: None,
            levels: Vec::new(),
            text: text.to_owned(),
            weights: String::new(),
            weight_bytes_per_token: 0,
            quest_kernels: Vec::new(),
            quest_kernels_off: Vec::new(),
            quest_kernels_kept: false,
            quest_kernels_for_pieces: false,
            inputs: serde_json::to_value(inputs)?,
            values: values.0.clone(),
            prefill_fed: Vec::new(),
            steps_fed: Vec::new(),
            steps_build_ms: Vec::new(),
            layers: 0,
            ops_per_step: 0,
            us_per_op: 0.0,
            forward_calls: 0,
            prefill_peak_bytes: 0,
        };
        match &self.report_path {
            Some(path) => report.write(path),
            None => {
                println!("{text}");
                for (name, value) in &values.0 {
                    println!("{name} = {value}");
                }
                Ok(())
            }
        }
    }
}

/// The values an exercise computed, by name; per shape (or any named item) as `name[shape]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Values(pub BTreeMap<String, f64>);

impl Values {
    pub fn new() -> Self {
        Self::default()
    }
    /// A value of the whole run.
    pub fn set(&mut self, name: &str, value: f64) {
        self.0.insert(name.to_owned(), value);
    }
    /// A value of one shape (or any named item): `name[of]`.
    pub fn set_for(&mut self, name: &str, of: &str, value: f64) {
        self.0.insert(key(name, of), value);
    }
}

/// `name[of]`: a value of one shape.
pub fn key(name: &str, of: &str) -> String {
    format!("{name}[{of}]")
}

/// The name of a value without its shape: `bytes_per_token[Qwen3-0.6B]` → `bytes_per_token`.
pub fn base_name(key: &str) -> &str {
    key.split_once('[').map_or(key, |(name, _)| name)
}

/// Marks the moments a decode loop is measured by: start, first token, each later
/// token (optional), done.
pub struct Timer {
    start: Instant,
    first_token: Option<Instant>,
    tokens: Vec<Instant>,
    done: Option<Instant>,
}

/// One step's tokens as the timer is handed them: a token (`u32`), or one per row of a
/// batch (`&[u32]`, `&Vec<u32>`).
pub struct Step(Vec<u32>);

impl From<u32> for Step {
    fn from(token: u32) -> Self {
        Step(vec![token])
    }
}

impl From<&[u32]> for Step {
    fn from(tokens: &[u32]) -> Self {
        Step(tokens.to_vec())
    }
}

impl From<&Vec<u32>> for Step {
    fn from(tokens: &Vec<u32>) -> Self {
        Step(tokens.clone())
    }
}

impl<const N: usize> From<[u32; N]> for Step {
    fn from(tokens: [u32; N]) -> Self {
        Step(tokens.to_vec())
    }
}

impl Timer {
    /// Call just before the prefill.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
            first_token: None,
            tokens: Vec::new(),
            done: None,
        }
    }

    /// Call with the first token once it is on the host (its value: a `u32` exists only
    /// there; a batch's first step, one per row). It goes to quest's clock, which times
    /// the first token from when it handed over the prompt.
    pub fn first_token(&mut self, token: impl Into<Step>) {
        self.first_token = Some(Instant::now());
        crate::line::send_step("first", &token.into().0);
    }

    /// Call with each later token once it is on the host (a batch: the step's token of
    /// every row): quest's clock then times every token as it arrives, and how that
    /// changes over the run. Tokens never handed over go to quest with the report.
    pub fn token(&mut self, token: impl Into<Step>) {
        self.tokens.push(Instant::now());
        crate::line::send_step("token", &token.into().0);
    }

    /// Steps handed to quest's clock so far, each with its mark (the report hands over
    /// the rest).
    fn handed(&self) -> usize {
        usize::from(self.first_token.is_some()) + self.tokens.len()
    }

    /// Milliseconds of each marked token after the first.
    pub fn token_ms(&self) -> Vec<f64> {
        let Some(first) = self.first_token else {
            return Vec::new();
        };
        let mut previous = first;
        self.tokens
            .iter()
            .map(|&at| {
                let ms = at.saturating_duration_since(previous).as_secs_f64() * 1e3;
                previous = at;
                ms
            })
            .collect()
    }

    /// Call when the last token is on the host: your timer's mark (quest's clock sees
    /// it too, and says so if it came before the last token did).
    pub fn done(&mut self) {
        self.done = Some(Instant::now());
        crate::line::send("done");
    }

    pub fn ttft(&self) -> Duration {
        self.first_token.map_or(Duration::ZERO, |t| t - self.start)
    }

    /// The positions (per sequence) of each forward call in `fed`, split at the first
    /// token: the calls made before it (the prefill; the last is the one the first token
    /// came from) and those after it (one per decode step). Without a first token, all
    /// are the prefill's.
    pub fn split_fed(&self, fed: &[crate::lm::Fed]) -> (Vec<usize>, Vec<usize>) {
        let (before, after): (Vec<_>, Vec<_>) = fed
            .iter()
            .filter(|call| self.in_run(call))
            .partition(|call| self.is_prefill(call));
        let positions = |calls: Vec<&crate::lm::Fed>| calls.iter().map(|c| c.positions).collect();
        (positions(before), positions(after))
    }

    /// How long each decode step's forward call took to build its graph, in ms: the
    /// calls made after the first token.
    pub fn steps_built(&self, fed: &[crate::lm::Fed]) -> Vec<f64> {
        fed.iter()
            .filter(|call| self.in_run(call) && !self.is_prefill(call))
            .map(|call| call.built.as_secs_f64() * 1e3)
            .collect()
    }

    /// Whether `call` was made before the loop was done: a step built afterwards only to
    /// be looked at (its ops counted) is none of the run's.
    fn in_run(&self, call: &crate::lm::Fed) -> bool {
        self.done.is_none_or(|done| call.at < done)
    }

    /// Whether `call` was made before the first token (without one, every call was).
    fn is_prefill(&self, call: &crate::lm::Fed) -> bool {
        self.first_token.is_none_or(|first| call.at < first)
    }

    /// Tokens after the first, over the time after the first: the steady decode rate.
    pub fn decode_tok_s(&self, tokens: usize) -> f64 {
        match (self.first_token, self.done) {
            (Some(first), Some(done)) if tokens > 1 && done > first => {
                (tokens - 1) as f64 / (done - first).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

/// One run of an exercise, as it reports itself (schema [`REPORT_SCHEMA`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema: u32,
    pub model: String,
    pub backend: crate::device::Backend,
    /// On the CPU, the BLAS MLX ran on and the kernels it chose for this CPU
    /// ([`crate::device::blas::describe`]); empty on a GPU and in older reports.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub blas: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// `load_ms`, `ttft_ms`, `decode_tok_s` and `token_ms` are quest's clock's when quest
    /// ran the exercise: the file an exercise writes then leaves them out (zero, empty),
    /// and quest fills them from what reached it ([`super::runner::run`]).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub load_ms: f64,
    /// The warm-up forward quest asked for as the model was loaded: what a fresh
    /// process's first forward pays once, kept out of the time to first token (quest's
    /// clock; 0 where none ran: a lazy load, a decoder of the learner's, a run by hand).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub warm_up_ms: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub ttft_ms: f64,
    /// Tokens after the first over the time after the first, every row of a batch
    /// counted: the machine's total decode rate.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub decode_tok_s: f64,
    /// The time of each token after the first, when the exercise marked them
    /// ([`Timer::token`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_ms: Vec<f64>,
    /// What the exercise's own [`Timer`] measured: its instrument, shown beside quest's
    /// clock. `load_ms`, `ttft_ms`, `decode_tok_s` and `token_ms` above are quest's clock's
    /// when quest ran the exercise ([`run`](super::runner::run)), the timer's when it ran
    /// by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "own")]
    pub timer: Option<TimerReading>,
    /// Where the timer and quest's clock disagree (set by quest, never read from a file).
    #[serde(skip)]
    pub disagreement: Option<clock::Disagreement>,
    /// The first token reached quest's clock after the decode had begun (set by quest,
    /// never read from a file).
    #[serde(skip)]
    pub held_back: Option<clock::HeldBack>,
    /// How often the model called each piece, as quest's seam counted and sent it on
    /// quest's line (set by quest, never read from a file; `None` where none was sent).
    #[serde(skip)]
    pub calls: Option<BTreeMap<crate::course::spec::Piece, crate::lm::Calls>>,
    /// The generated tokens (of row 0, in a batch).
    pub tokens: Vec<u32>,
    /// How many sequences were decoded together (1 in reports from before batches).
    #[serde(default = "one")]
    pub batch: usize,
    /// In a batch, every row's tokens (row 0 is `tokens`); empty for one sequence. In a
    /// served trace, each request's tokens by id (of different lengths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<Vec<u32>>,
    /// The requests of a served trace (`Exercise::serve`): `rows` are theirs and `tokens`
    /// all of them in order of id (0: not a served run).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: usize,
    /// A served trace's times on quest's clock (set by quest, never read from a file); a
    /// server's, those of its load's last level.
    #[serde(skip)]
    pub served: Option<clock::ServedTimes>,
    /// A server's times at each level of quest's load: the clients at once, and their
    /// requests' times (set by quest).
    #[serde(skip)]
    pub levels: Vec<(usize, clock::ServedTimes)>,
    pub text: String,
    /// How the model's matrices were held: `dense-f32`, `dense-f16` or `quantized` (see
    /// `lm::Hold`), or the layout `Model::requantize` put them in (`q4-g64`);
    /// empty in reports from before it was recorded.
    #[serde(default)]
    pub weights: String,
    /// Bytes of weights one decode step reads (0 when not recorded).
    #[serde(default)]
    pub weight_bytes_per_token: u64,
    /// quest's own CUDA kernels that ran (`crate::kernels`): none off CUDA, and none by
    /// default in an exercise, a new process each run, where MLX would compile them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quest_kernels: Vec<String>,
    /// quest's kernels the model had on and turned off where their code would take the
    /// place of the learner's piece (in its run and the baseline alike). A kernel can be in
    /// both lists: the matvec still computes the output head, which no piece computes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quest_kernels_off: Vec<String>,
    /// Whether quest kept its kernels compiled for this process (`crate::kernels::precompiled`): then
    /// those that ran were read from disk (only a first run on a machine compiles them);
    /// else MLX compiled them in this process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quest_kernels_kept: bool,
    /// Whether some or all of quest's kernels were off because the model ran the learner's
    /// piece (those whose code would take its place, `crate::lm::fast`) or decoder (all),
    /// the baseline with quest's pieces too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quest_kernels_for_pieces: bool,
    /// What quest gave an exercise that computes values (see [`Exercise::report_values`]).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub inputs: serde_json::Value,
    /// The values it computed from them, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, f64>,
    /// The positions (per sequence) each forward call fed before the first token was on
    /// the host, in order: the prefill, whose last call gave the first token's logits.
    /// Empty when the run recorded no forward call (no model, or an older report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill_fed: Vec<usize>,
    /// The positions each forward call fed after the first token: one per decode step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps_fed: Vec<usize>,
    /// How long each decode step's forward call took to build its graph on the host, ms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps_build_ms: Vec<f64>,
    /// The layers a forward call ran (0: not recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub layers: usize,
    /// The ops (graph nodes) of one decode step, counted before it ran (0: not counted;
    /// [`Exercise::decode_counting_ops`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ops_per_step: usize,
    /// The forward calls of quest's model that decoded `tokens`, the prompt's included,
    /// for a loop that may keep several tokens a call (0: not counted;
    /// [`Exercise::decode_speculative`]). Run by quest, its clock's count of the calls
    /// asked for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub forward_calls: usize,
    /// The most bytes MLX held while the prompt was prefilled (0: not measured;
    /// [`Exercise::decode_prefilled`]). Run by quest, what quest's loop sent on its line.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub prefill_peak_bytes: u64,
    /// The host's µs per op on this backend, measured in the same process ([`OpCost`]).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub us_per_op: f64,
}

/// The times an exercise's own [`Timer`] measured, as its report carries them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimerReading {
    /// From the exercise's start to its asking for the prompt.
    pub load_ms: f64,
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_ms: Vec<f64>,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn one() -> usize {
    1
}

impl Report {
    /// The report quest writes of a server it drove (`lab::runner`): each reply's tokens a
    /// row, all of them in order as `tokens`, the first reply's text; the times are set by
    /// the caller.
    pub fn from_clients(model: &str, rows: Vec<Vec<u32>>, texts: Vec<String>) -> Self {
        Report {
            schema: REPORT_SCHEMA,
            model: model.to_owned(),
            backend: crate::device::Backend::detect(),
            blas: cpu_blas(),
            prompt_tokens: 0,
            generated_tokens: rows.iter().map(Vec::len).sum(),
            load_ms: 0.0,
            warm_up_ms: 0.0,
            ttft_ms: 0.0,
            decode_tok_s: 0.0,
            token_ms: Vec::new(),
            timer: None,
            disagreement: None,
            held_back: None,
            calls: None,
            tokens: rows.concat(),
            batch: rows.len().max(1),
            requests: rows.len(),
            rows,
            served: None,
            levels: Vec::new(),
            text: texts.first().cloned().unwrap_or_default(),
            weights: String::new(),
            weight_bytes_per_token: 0,
            quest_kernels: Vec::new(),
            quest_kernels_off: Vec::new(),
            quest_kernels_kept: false,
            quest_kernels_for_pieces: false,
            inputs: serde_json::Value::Null,
            values: BTreeMap::new(),
            prefill_fed: Vec::new(),
            steps_fed: Vec::new(),
            steps_build_ms: Vec::new(),
            layers: 0,
            ops_per_step: 0,
            forward_calls: 0,
            prefill_peak_bytes: 0,
            us_per_op: 0.0,
        }
    }
}

impl Report {
    /// A named number from this run; `None` when the run did not measure it
    /// (per-token metrics need [`Timer::token`]).
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        // An exercise that computes values times no decode of its own.
        if !self.values.is_empty() {
            return None;
        }
        let value = match metric {
            Metric::DecodeTokS => self.decode_tok_s,
            Metric::PerSeqTokS => self.decode_tok_s / self.batch.max(1) as f64,
            Metric::TtftMs => self.ttft_ms,
            Metric::LoadMs => self.load_ms,
            Metric::MsPerToken if self.token_ms.is_empty() => {
                (self.decode_tok_s > 0.0).then(|| 1e3 / self.decode_tok_s)?
            }
            // Never shorter than the decode rate says: the gaps between arrivals are the
            // hand-overs' (one step a row, every row counted in the rate).
            Metric::MsPerToken => {
                let gaps = self.token_ms.iter().sum::<f64>() / self.token_ms.len() as f64;
                if self.decode_tok_s > 0.0 {
                    gaps.max(1e3 * self.batch.max(1) as f64 / self.decode_tok_s)
                } else {
                    gaps
                }
            }
            Metric::MsPerTokenGrowth => crate::stats::slope(&self.token_ms)? * 100.0,
            Metric::BuildUsPerLayer if self.steps_build_ms.is_empty() || self.layers == 0 => {
                return None
            }
            Metric::BuildUsPerLayer => {
                crate::stats::median(&self.steps_build_ms) * 1e3 / self.layers as f64
            }
            Metric::OpsPerStep if self.ops_per_step == 0 => return None,
            Metric::OpsPerStep => self.ops_per_step as f64,
            Metric::UsPerOp if self.ops_per_step == 0 => return None,
            Metric::UsPerOp => self.us_per_op,
            Metric::HostMsPredicted if self.ops_per_step == 0 => return None,
            Metric::HostMsPredicted => self.ops_per_step as f64 * self.us_per_op / 1e3,
            Metric::WeightMbPerToken if self.weight_bytes_per_token == 0 => return None,
            Metric::WeightMbPerToken => self.weight_bytes_per_token as f64 / 1e6,
            Metric::TokensPerForward if self.forward_calls == 0 => return None,
            Metric::TokensPerForward => self.generated_tokens as f64 / self.forward_calls as f64,
            Metric::PrefillPeakMb if self.prefill_peak_bytes == 0 => return None,
            Metric::PrefillPeakMb => self.prefill_peak_bytes as f64 / 1e6,
            Metric::WeightsGbS if self.weight_bytes_per_token == 0 => return None,
            Metric::WeightsGbS => self.weight_bytes_per_token as f64 * self.decode_tok_s / 1e9,
            Metric::TtftP50Ms => clock::ServedTimes::quantile(&self.served.as_ref()?.ttft_ms, 0.5),
            Metric::TtftP99Ms => clock::ServedTimes::quantile(&self.served.as_ref()?.ttft_ms, 0.99),
            Metric::LatencyP50Ms => {
                clock::ServedTimes::quantile(&self.served.as_ref()?.latency_ms, 0.5)
            }
            Metric::LatencyP99Ms => {
                clock::ServedTimes::quantile(&self.served.as_ref()?.latency_ms, 0.99)
            }
            Metric::ItlP50Ms | Metric::ItlP99Ms => {
                let itl = &self.served.as_ref()?.itl_ms;
                if itl.is_empty() {
                    return None;
                }
                let q = if metric == Metric::ItlP50Ms {
                    0.5
                } else {
                    0.99
                };
                clock::ServedTimes::quantile(itl, q)
            }
        };
        value.is_finite().then_some(value)
    }

    /// Every metric this run measured, by key.
    pub fn metrics(&self) -> std::collections::BTreeMap<String, f64> {
        Metric::ALL
            .into_iter()
            .filter_map(|metric| Some((metric.key().to_owned(), self.metric(metric)?)))
            .collect()
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("could not write the report {}", path.display()))
    }

    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "the exercise wrote no report at {}; did it call `run.report(…)`?",
                path.display()
            )
        })?;
        let report: Report = serde_json::from_slice(&bytes)
            .with_context(|| format!("the report {} is not valid", path.display()))?;
        anyhow::ensure!(
            report.schema == REPORT_SCHEMA,
            "the report has schema {}, this quest reads {REPORT_SCHEMA}; rebuild the exercise",
            report.schema
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(decode_tok_s: f64, token_ms: Vec<f64>) -> Report {
        Report {
            schema: REPORT_SCHEMA,
            model: "m".into(),
            backend: crate::device::Backend::Cpu,
            blas: String::new(),
            prompt_tokens: 4,
            generated_tokens: token_ms.len() + 1,
            load_ms: 50.0,
            warm_up_ms: 0.0,
            ttft_ms: 100.0,
            decode_tok_s,
            token_ms,
            timer: None,
            disagreement: None,
            held_back: None,
            calls: None,
            tokens: vec![],
            batch: 1,
            rows: vec![],
            requests: 0,
            served: None,
            levels: Vec::new(),
            text: String::new(),
            weights: "dense-f32".into(),
            weight_bytes_per_token: 540_000_000,
            quest_kernels: vec![],
            quest_kernels_off: vec![],
            quest_kernels_kept: false,
            quest_kernels_for_pieces: false,
            inputs: serde_json::Value::Null,
            values: BTreeMap::new(),
            prefill_fed: vec![4],
            steps_fed: vec![],
            steps_build_ms: vec![],
            layers: 0,
            ops_per_step: 0,
            us_per_op: 0.0,
            forward_calls: 0,
            prefill_peak_bytes: 0,
        }
    }

    #[test]
    fn metrics_from_a_report() {
        let flat = report(10.0, vec![100.0, 100.0, 100.0]);
        assert_eq!(flat.metric(Metric::MsPerToken), Some(100.0));
        assert_eq!(flat.metric(Metric::MsPerTokenGrowth), Some(0.0));
        assert_eq!(flat.metric(Metric::LoadMs), Some(50.0));
        // 2 ms more per token: 200 ms per 100 tokens.
        let rising = report(10.0, vec![100.0, 102.0, 104.0, 106.0]);
        assert_eq!(rising.metric(Metric::MsPerTokenGrowth), Some(200.0));
        // Without per-token marks: the mean from the rate, and no growth.
        let unmarked = report(20.0, vec![]);
        assert_eq!(unmarked.metric(Metric::MsPerToken), Some(50.0));
        assert_eq!(unmarked.metric(Metric::MsPerTokenGrowth), None);
        assert!(!unmarked.metrics().contains_key("ms_per_token_growth"));
        assert_eq!(report(0.0, vec![]).metric(Metric::MsPerToken), None);
        // Gaps between arrivals shorter than quest's decode rate allows (tokens handed over
        // in a burst): the rate's time a token.
        let burst = report(5.0, vec![100.0, 100.0, 100.0]);
        assert_eq!(burst.metric(Metric::MsPerToken), Some(200.0));
        // Bytes per token as MB; absent when the run did not record them.
        assert_eq!(flat.metric(Metric::WeightMbPerToken), Some(540.0));
        let unrecorded = Report {
            weight_bytes_per_token: 0,
            ..flat
        };
        assert_eq!(unrecorded.metric(Metric::WeightMbPerToken), None);
    }

    #[test]
    fn forward_calls_are_split_at_the_first_token() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let fed = |ms, positions| crate::lm::Fed {
            at: at(ms),
            rows: 1,
            positions,
            built: Duration::from_micros(ms * 100),
        };
        let calls = [fed(1, 41), fed(2, 1), fed(11, 1), fed(12, 1)];
        let timer = Timer {
            start: t0,
            first_token: Some(at(10)),
            tokens: Vec::new(),
            done: None,
        };
        assert_eq!(timer.split_fed(&calls), (vec![41, 1], vec![1, 1]));
        // Each decode step's graph-building time: the calls after the first token.
        let built = timer.steps_built(&calls);
        assert_eq!(built.len(), 2);
        assert!(
            (built[0] - 1.1).abs() < 1e-9 && (built[1] - 1.2).abs() < 1e-9,
            "{built:?}"
        );
        // Without a first token every call is the prefill's.
        let unmarked = Timer {
            first_token: None,
            ..timer
        };
        assert_eq!(unmarked.split_fed(&calls), (vec![41, 1, 1, 1], vec![]));
    }

    #[test]
    fn token_times_are_gaps_after_the_first_token() {
        let mut timer = Timer::start();
        assert!(timer.token_ms().is_empty());
        timer.first_token(1);
        timer.token(2);
        timer.token([3]);
        let gaps = timer.token_ms();
        assert_eq!(gaps.len(), 2);
        assert!(gaps.iter().all(|ms| *ms >= 0.0));
    }
}
