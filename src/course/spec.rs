//! `lessons/<id>/lesson.yaml`: everything about a lesson that is not text in one
//! language — what it runs, the code rules, what it measures, its card and quiz.
//! The texts that go with them (rule messages, quiz questions) are in `en.md` /
//! `ko.md`, keyed by the ids given here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::yaml_error;

/// The lesson data file inside a lesson's folder.
pub const SPEC_FILE: &str = "lesson.yaml";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessonSpec {
    pub minutes: u32,
    pub xp: u32,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Backends (`cpu`, `gpu`) where the measured effect is expected to show.
    #[serde(default)]
    pub shows_on: Vec<BackendKind>,
    /// Backends where the exercise runs at all (`cpu`, `gpu`, or one GPU backend: `cuda`,
    /// `metal`; empty: every one). Elsewhere it stops after what it can check there (a CUDA
    /// kernel compiles off an NVIDIA GPU, and no more), and `quest dev check` proves that
    /// much: the solution stops there, saying so.
    #[serde(default)]
    pub runs_on: Vec<RunsOn>,
    /// The model the effect shows with, per backend in `shows_on` (`quest run <id>
    /// --model …`; `quest list` says it): e.g. `gpu: random:qwen3-8b`, where the
    /// lesson's own small model is launch-bound and every loop runs alike.
    #[serde(default)]
    pub shows_with: std::collections::BTreeMap<BackendKind, String>,
    /// The model `quest run` uses unless told otherwise.
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default = "default_prompt")]
    pub prompt: String,
    /// The prompt as a document of this many copies of `prompt`, joined by spaces: a long
    /// context from a short text (chunked-prefill's thousands of tokens).
    #[serde(default)]
    pub prompt_copies: Option<usize>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
    /// Paths relative to the project root (the folder that holds `lessons/`).
    /// A reading-only lesson has neither.
    #[serde(default)]
    pub exercise: Option<PathBuf>,
    #[serde(default)]
    pub solution: Option<PathBuf>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// What the run must have fed the model, judged from what the model recorded of each
    /// forward call (the report's `prefill_fed` / `steps_fed`), not from the code's names.
    #[serde(default)]
    pub feeds: Vec<FeedRule>,
    #[serde(default, with = "serde_yaml::with::singleton_map")]
    pub tokens: TokenCheck,
    /// The learner's model against quest's own, logits compared step by step on one
    /// token sequence (teacher forcing): for lessons whose code is a piece of the model.
    #[serde(default)]
    pub logits: Option<LogitsCheck>,
    /// The part of the model the learner writes (`rope`, `attention`, …: a method of
    /// `lm::Pieces`, or `sample`): checked against quest's own on random tensors before
    /// anything else (`lm::piece_check`), and every checked run must show, by quest's
    /// count, that the model called the learner's and never quest's.
    #[serde(default)]
    pub piece: Option<Piece>,
    /// A sampler's draws against the distribution it was asked for: for a lesson whose
    /// code is the sampler (`Exercise::decode_sampled`).
    #[serde(default)]
    pub draws: Option<DrawsCheck>,
    /// How many sequences the learner's run must decode together (its report's rows);
    /// the token check then compares row 0. Unset: any batch.
    #[serde(default)]
    pub batch: Option<usize>,
    #[serde(default)]
    pub measure: Option<Measure>,
    #[serde(default)]
    pub card: Option<CardSpec>,
    /// Values the exercise computes from inputs quest measured, each checked against
    /// quest's own computation from the same inputs.
    #[serde(default)]
    pub values: Option<ValuesSpec>,
    #[serde(default)]
    pub quiz: Vec<Question>,
    /// Result files (or folders of them, relative to the project root) that the lesson's
    /// measured figures come from, besides the `docs/` paths its text names.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
    /// Figures that are not in a result file: derived ones with their arithmetic, the
    /// source page's own quoted.
    #[serde(default)]
    pub figures: FiguresSpec,
}

/// `figures:` — the lesson's figures that no result file holds as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FiguresSpec {
    /// A figure as written (`×1.74`, `17–28 %`) → the arithmetic on numbers of the
    /// result files that gives it (one formula per number of a range).
    #[serde(default)]
    pub derived: BTreeMap<String, OneOrMore>,
    /// The source page's own figures, quoted as it gives them.
    #[serde(default)]
    pub quoted: Vec<String>,
    /// Figures the lesson sets itself, not measured: a threshold (`10 %`), a size it picks.
    #[serde(default)]
    pub given: Vec<String>,
}

/// One string, or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMore {
    One(String),
    More(Vec<String>),
}

impl OneOrMore {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMore::One(one) => vec![one.clone()],
            OneOrMore::More(more) => more.clone(),
        }
    }
}

/// `values:` — the exercise reports the inputs it was given and the values it computed
/// (`Exercise::report_values`); quest recomputes them with `computed_by` and checks
/// every value named in `check` (per shape: each `name[shape]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesSpec {
    pub computed_by: Computation,
    pub check: Vec<String>,
    /// Relative: the values are the same arithmetic on the same inputs, so only the
    /// order of floating-point operations may differ.
    #[serde(default = "default_values_tolerance")]
    pub tolerance: f64,
}

fn default_values_tolerance() -> f64 {
    1e-6
}

/// quest's own computations over an exercise's inputs (`physics::arithmetic::compute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Computation {
    /// `time ≈ fixed + max(bytes / bandwidth, operations / compute rate)` over measured
    /// decode points: each shape's bytes, multiply-adds and ceiling, and the fitted line.
    TimePerToken,
    /// The KV bytes each token of context adds, the slope they predict, the slope measured.
    ContextSlope,
}

impl Computation {
    /// The values it computes (per shape or for the run); a lesson may check or quiz these.
    pub fn values(self) -> &'static [&'static str] {
        match self {
            Computation::TimePerToken => &[
                "bytes_per_token",
                "ops_per_token",
                "ceiling_tok_s",
                "fixed_ms",
                "fit_gb_s",
                "fixed_term_ms",
                "bytes_term_ms",
                "ceiling_bytes_ms",
                "ceiling_operations_ms",
                "knee_mb",
                "fixed_share",
                "smallest_fixed_term_ms",
                "smallest_bytes_term_ms",
            ],
            Computation::ContextSlope => &[
                "kv_bytes_per_context_token",
                "predicted_ms_per_1k",
                "measured_ms_per_1k",
                "full_measured_ms_per_1k",
                "full_predicted_ms_per_1k",
                "hybrid_measured_ms_per_1k",
                "hybrid_predicted_ms_per_1k",
            ],
        }
    }
}

fn default_model() -> String {
    "smollm2-135m-instruct".into()
}
/// The prompt and token count of a lesson that names none; an exercise run by hand
/// uses them too.
/// A lesson's prompt and token count unless it says otherwise: the settings' defaults.
pub const DEFAULT_PROMPT: &str = crate::settings::PROMPT.default;
pub const DEFAULT_MAX_TOKENS: usize = parse_usize(crate::settings::MAX_TOKENS.default);

const fn parse_usize(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < bytes.len() {
        n = n * 10 + (bytes[i] - b'0') as usize;
        i += 1;
    }
    n
}

fn default_prompt() -> String {
    DEFAULT_PROMPT.into()
}
fn default_max_tokens() -> usize {
    DEFAULT_MAX_TOKENS
}

use crate::device::{Backend, BackendKind, RunsOn};

/// A code rule: calls of some kinds are forbidden, or required, in one region.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Names the rule's message (`messages:` in each language's front matter).
    pub id: String,
    #[serde(default)]
    pub forbid: Vec<CallPattern>,
    #[serde(default)]
    pub require: Vec<CallPattern>,
    #[serde(rename = "in", with = "serde_yaml::with::singleton_map")]
    pub region: Region,
    /// Skip this rule when the rule named here found something (e.g. "the tokens
    /// never reach the host after the loop" says nothing new when the loop reads them).
    #[serde(default)]
    pub unless: Option<String>,
}

/// A rule about what the run fed the model: a limit on the positions (per sequence) of
/// one kind of forward call. Its message (`messages:`, keyed by `id`) may name
/// `{positions}` (what was fed), `{limit}` and, for a step, `{step}` (1 is the first
/// decode step), for a prefill call, `{call}` (1 is the first).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedRule {
    pub id: String,
    /// The forward call the first token came from (the last one before it) feeds at most
    /// this many positions: the prefill's last call runs the last prompt token alone.
    #[serde(default)]
    pub first_token: Option<usize>,
    /// Every decode step (each forward call after the first token) feeds at most this
    /// many positions: the cache holds the rest.
    #[serde(default)]
    pub step: Option<usize>,
    /// Every forward call of the prefill (each before the first token) feeds at most this
    /// many positions: the prompt goes in chunks.
    #[serde(default)]
    pub prefill: Option<usize>,
}

/// Which calls a rule is about: a group, or one named function, method or macro.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum CallPattern {
    Group(CallGroup),
    Call { call: String },
}

/// Kinds of calls the checker knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallGroup {
    /// Bringing an array's value to the host: `item*`, `as_slice`, `to_vec`, and
    /// formatting (`format!`, `to_string`) — Display and Debug evaluate the array.
    HostRead,
    /// A blocking `eval` (not `async_eval`).
    Eval,
    /// `print!`, `println!`, `eprint!`, `eprintln!`, `write!`, `writeln!`, `dbg!`.
    Print,
    /// Turning ids into text: `.decode(…)`.
    Detokenize,
}

impl fmt::Display for CallPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallPattern::Call { call } => f.write_str(call),
            CallPattern::Group(CallGroup::HostRead) => f.write_str("item_exact"),
            CallPattern::Group(CallGroup::Eval) => f.write_str("eval"),
            CallPattern::Group(CallGroup::Print) => f.write_str("println!"),
            CallPattern::Group(CallGroup::Detokenize) => f.write_str("decode"),
        }
    }
}

/// The part of the exercise a rule looks at. Calls into functions and closures
/// defined in the same file are followed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// The body of the first loop that calls this function (e.g. `forward`).
    Loop(String),
    /// The function that holds that loop, before the loop.
    BeforeLoop(String),
    /// The function that holds that loop, after the loop.
    AfterLoop(String),
    /// Any loop inside the first loop that calls this function and calls it too (one
    /// call per row, in a loop, where one call for the batch would do). Empty when
    /// there is none.
    InnerLoop(String),
    /// The body of the function with this name.
    Fn(String),
    /// The whole file.
    File,
}

/// How the learner's greedy tokens are compared with the solution's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCheck {
    #[default]
    Exact,
    /// The first `n` tokens (where a change of arithmetic may flip a late near-tie).
    First(usize),
    /// Not the solution's but the learner's own, run twice with the same seed: a sampler
    /// draws other tokens than the solution's from the same key, but the same ones again.
    Repeatable,
    None,
}

/// `draws: {per_step: 1000, tolerance: 0.02}`: a sampler judged by its distribution. At
/// every step of its run the learner's sampler draws `per_step` tokens from that step's
/// logits; their mean distance from the exact distribution (total variation, over the
/// steps) may be at most `tolerance` above what as many honest draws average
/// (`judge::draws_compared`). Measured, never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrawsCheck {
    pub per_step: usize,
    pub tolerance: f64,
}

/// `logits: {tolerance: 1e-3, half_precision: 2e-1}`: every step's logits within the
/// tolerance (max abs difference over the vocabulary) of quest's own model's; another
/// argmax within it is a near tie (`judge::logits_compared`). `tolerance` holds where the
/// model computes in float32 (the CPU);
/// `half_precision` where it computes in float16 (a GPU), whose rounding alone moves an
/// honest piece's logits by far more. Both are measured, never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogitsCheck {
    pub tolerance: f32,
    #[serde(default)]
    pub half_precision: Option<f32>,
}

impl LogitsCheck {
    /// The tolerance where the model computes in a 16-bit float (`half`) or not:
    /// `half_precision` where the lesson gives it, else `tolerance`.
    pub fn tolerance_in(&self, half: bool) -> f32 {
        match self.half_precision {
            Some(tolerance) if half => tolerance,
            _ => self.tolerance,
        }
    }

    /// Whether the lesson measured its tolerance for a model computing in a 16-bit float
    /// (`half`) or not: a 16-bit float without `half_precision` is held to float32's, which
    /// its rounding alone may pass.
    pub fn measured_in(&self, half: bool) -> bool {
        !half || self.half_precision.is_some()
    }
}

/// What quest measures for the lesson's claim.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    /// Measured for the lesson's starting code (the baseline, always) and the learner's.
    pub metric: Metric,
    /// Which way the lesson expects the metric to move.
    pub expect: Direction,
    /// The improvement (a ratio ≥ 1, in the expected direction) a submission must
    /// show on a backend in `shows_on`; without it any result passes and is reported.
    #[serde(default)]
    pub at_least: Option<f64>,
    #[serde(default = "default_rounds")]
    pub rounds: usize,
    /// Other metrics shown beside it (not checked).
    #[serde(default)]
    pub also: Vec<Metric>,
    /// Metrics the learner's code must move, against the starting code's, in the
    /// measurement (medians): what the lesson's change is about, whatever its speed —
    /// a layout that leaves the bytes per token as they were changes nothing.
    #[serde(default)]
    pub moves: Vec<Move>,
    /// What the learner's code is measured against: the lesson's starting code, or (for a
    /// lesson whose code is a piece of the model) the learner's own binary run with quest's
    /// own pieces (`QUEST_PIECES=quest`).
    #[serde(default)]
    pub against: Baseline,
}

/// `measure: against:` — the baseline of the interleaved measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    #[default]
    Starting,
    QuestPieces,
}

/// `{id: fewer-bytes, metric: weight_mb_per_token, expect: lower}`: the learner's median
/// must be strictly below (or above) the starting code's. Its message (`messages:`, keyed
/// by `id`) may name `{before}` and `{after}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Move {
    pub id: String,
    pub metric: Metric,
    pub expect: Direction,
}

fn default_rounds() -> usize {
    3
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Higher,
    Lower,
}

impl Direction {
    pub fn key(self) -> &'static str {
        match self {
            Direction::Higher => "higher",
            Direction::Lower => "lower",
        }
    }
}

/// The numbers an exercise's report yields (see `lab::Report::metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Tokens after the first over the time after the first (every sequence of a batch).
    DecodeTokS,
    /// The decode rate of one sequence: `decode_tok_s` over the batch.
    PerSeqTokS,
    /// Time to first token: prefill until the first token is on the host.
    TtftMs,
    /// From the exercise's start until the timer started (loading the model).
    LoadMs,
    /// Mean time per decoded token.
    MsPerToken,
    /// How much the time per token grows over the run, in ms per 100 tokens
    /// (least squares over the per-token times).
    MsPerTokenGrowth,
    /// Megabytes of weights one decode step reads, in the layout that ran.
    WeightMbPerToken,
    /// The host's time to build one decode step's graph, per layer, in µs (the median
    /// step's forward call over the layers it ran).
    BuildUsPerLayer,
    /// The ops (graph nodes) of one decode step, counted before it runs.
    OpsPerStep,
    /// The host's µs per op on this backend: the slope of a chain of cheap ops' time
    /// against its length.
    UsPerOp,
    /// `ops_per_step × us_per_op`: the host's time per step those ops predict, in ms.
    HostMsPredicted,
    /// Tokens decoded over the forward calls of quest's model that decoded them, the
    /// prompt's included: 1 for plain decoding, more where a call keeps several.
    TokensPerForward,
    /// The most memory MLX held while the prompt was prefilled, in MB (its allocator's
    /// peak, read by quest's loop).
    PrefillPeakMb,
    /// The weights one decode step reads over the step's time, in GB/s: the rate the step
    /// streams its matrices at (`weight_mb_per_token × decode_tok_s`), to set beside a copy's.
    WeightsGbS,
    /// A served trace's time to first token, each request's from its arrival: the median.
    TtftP50Ms,
    /// … its 99th percentile (of a few requests, the slowest).
    TtftP99Ms,
    /// A served trace's time from each request's arrival to its last token: the median.
    LatencyP50Ms,
    /// … its 99th percentile.
    LatencyP99Ms,
    /// A server's time between two tokens of one request, as its clients saw them: the
    /// median.
    ItlP50Ms,
    /// … its 99th percentile.
    ItlP99Ms,
}

impl Metric {
    pub const ALL: [Metric; 20] = [
        Metric::DecodeTokS,
        Metric::PerSeqTokS,
        Metric::TtftMs,
        Metric::LoadMs,
        Metric::MsPerToken,
        Metric::MsPerTokenGrowth,
        Metric::WeightMbPerToken,
        Metric::BuildUsPerLayer,
        Metric::OpsPerStep,
        Metric::UsPerOp,
        Metric::HostMsPredicted,
        Metric::TokensPerForward,
        Metric::PrefillPeakMb,
        Metric::WeightsGbS,
        Metric::TtftP50Ms,
        Metric::TtftP99Ms,
        Metric::LatencyP50Ms,
        Metric::LatencyP99Ms,
        Metric::ItlP50Ms,
        Metric::ItlP99Ms,
    ];

    /// Its key in reports and in the progress file.
    pub fn key(self) -> &'static str {
        match self {
            Metric::DecodeTokS => "decode_tok_s",
            Metric::PerSeqTokS => "per_seq_tok_s",
            Metric::TtftMs => "ttft_ms",
            Metric::LoadMs => "load_ms",
            Metric::MsPerToken => "ms_per_token",
            Metric::MsPerTokenGrowth => "ms_per_token_growth",
            Metric::WeightMbPerToken => "weight_mb_per_token",
            Metric::BuildUsPerLayer => "build_us_per_layer",
            Metric::OpsPerStep => "ops_per_step",
            Metric::UsPerOp => "us_per_op",
            Metric::HostMsPredicted => "host_ms_predicted",
            Metric::TokensPerForward => "tokens_per_forward",
            Metric::PrefillPeakMb => "prefill_peak_mb",
            Metric::WeightsGbS => "weights_gb_s",
            Metric::TtftP50Ms => "ttft_p50_ms",
            Metric::TtftP99Ms => "ttft_p99_ms",
            Metric::LatencyP50Ms => "latency_p50_ms",
            Metric::LatencyP99Ms => "latency_p99_ms",
            Metric::ItlP50Ms => "itl_p50_ms",
            Metric::ItlP99Ms => "itl_p99_ms",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|metric| metric.key() == key)
    }

    /// The unit shown after a value.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::DecodeTokS | Metric::PerSeqTokS => "tok/s",
            Metric::TtftMs | Metric::LoadMs | Metric::MsPerToken => "ms",
            Metric::MsPerTokenGrowth => "ms/100 tok",
            Metric::WeightMbPerToken => "MB",
            Metric::BuildUsPerLayer => "µs/layer",
            Metric::OpsPerStep => "ops",
            Metric::UsPerOp => "µs/op",
            Metric::HostMsPredicted => "ms",
            Metric::TokensPerForward => "tok/call",
            Metric::PrefillPeakMb => "MB",
            Metric::WeightsGbS => "GB/s",
            Metric::TtftP50Ms
            | Metric::TtftP99Ms
            | Metric::LatencyP50Ms
            | Metric::LatencyP99Ms
            | Metric::ItlP50Ms
            | Metric::ItlP99Ms => "ms",
        }
    }

    /// Whether a larger value is better (speed) or worse (time).
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::DecodeTokS | Metric::PerSeqTokS | Metric::TokensPerForward | Metric::WeightsGbS
        )
    }

    /// How much better `after` is than `before`: above 1 is better, in either
    /// direction (more tok/s, fewer ms). `None` unless both are positive.
    pub fn improvement(self, before: f64, after: f64) -> Option<f64> {
        if !(before > 0.0 && after > 0.0) {
            return None;
        }
        Some(if self.higher_is_better() {
            after / before
        } else {
            before / after
        })
    }
}

/// The learner's card: the measured metric before and after, within a tolerance of
/// a run quest recorded for that code.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardSpec {
    #[serde(default = "default_card_numbers")]
    pub numbers: Vec<CardNumber>,
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
}

fn default_card_numbers() -> Vec<CardNumber> {
    vec![CardNumber::Before, CardNumber::After]
}
fn default_tolerance() -> f64 {
    0.15
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardNumber {
    /// The baseline code's metric.
    Before,
    /// The learner's code's metric.
    After,
}

impl CardNumber {
    pub fn key(self) -> &'static str {
        match self {
            CardNumber::Before => "before",
            CardNumber::After => "after",
        }
    }
}

/// A multiple-choice question; its text is in each language's front matter.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub id: String,
    pub choices: Vec<String>,
    pub answer: Answer,
}

/// `answer: fixed`, `answer: {measured: effect_shows}`, or
/// `answer: {measured: improvement, from: {big: 3.0, some: 1.5, none: 0}}`, or
/// `answer: {measured: {largest: {fixed: fixed_term_ms, bytes: bytes_term_ms}}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    /// The same everywhere.
    Is(String),
    /// Computed from what quest measured on this machine.
    Measured {
        #[serde(with = "serde_yaml::with::singleton_map")]
        measured: MeasuredAnswer,
        /// For `improvement`: each choice and the least improvement that makes it the
        /// answer.
        #[serde(default)]
        from: BTreeMap<String, f64>,
    },
}

/// Answers that depend on the machine.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasuredAnswer {
    /// `yes` when the learner's code improved the lesson's metric by at least 10 %
    /// over the baseline (medians of quest's measurements here), else `no`.
    EffectShows,
    /// The choice whose `from` is the largest one at or under the measured improvement
    /// (the same medians): how large the effect was here, in bands.
    Improvement,
    /// `yes` when, of the baseline and the learner's code, the one that read fewer
    /// weight bytes per token (medians of the runs quest recorded) also did at least
    /// 10 % better on the lesson's metric in the interleaved measurement; `no` when it
    /// did not, or when both read the same bytes.
    FewerBytesFaster,
    /// The choice whose value (quest's own, from the learner's latest checked run of
    /// this code: see `values:`) is the largest; each choice names one value.
    Largest(BTreeMap<String, String>),
}

/// The improvement that counts as "the effect shows" for a measured answer.
pub const EFFECT_SHOWS_RATIO: f64 = 1.10;

impl LessonSpec {
    /// Reads `<lessons_dir>/<id>/lesson.yaml` and checks it on its own.
    pub fn load(lessons_dir: &Path, id: &str) -> Result<LessonSpec> {
        let path = lessons_dir.join(id).join(SPEC_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the lesson data {}", path.display()))?;
        Self::parse(&path, &text)
    }

    /// Parses `lesson.yaml` text; `path` is only used in error messages.
    pub fn parse(path: &Path, text: &str) -> Result<LessonSpec> {
        let spec: LessonSpec =
            serde_yaml::from_str(text).map_err(|error| yaml_error::located(path, 1, error))?;
        spec.check(path)?;
        Ok(spec)
    }

    /// Checks the spec on its own, part by part, in the order its errors are reported.
    fn check(&self, path: &Path) -> Result<()> {
        let at = path.display();
        if self.exercise.is_some() != self.solution.is_some() {
            bail!("{at}: a lesson with an exercise needs a solution, and a solution needs an exercise");
        }
        if self.exercise.is_none() && (self.measure.is_some() || !self.rules.is_empty()) {
            bail!("{at}: `rules` and `measure` need an `exercise`");
        }
        if let Some(kind) = self.shows_with.keys().find(|k| !self.shows_on.contains(k)) {
            bail!("{at}: `shows_with` names {kind:?}, which `shows_on` does not list");
        }
        if self.exercise.is_none() && self.quiz.is_empty() {
            bail!("{at}: a lesson without an exercise needs a `quiz`");
        }
        if self.card.is_some() && self.measure.is_none() {
            bail!("{at}: `card` numbers are measured ones: it needs `measure`");
        }
        self.check_rules(path)?;
        self.check_logits(path)?;
        self.check_draws(path)?;
        if self.batch == Some(0) {
            bail!("{at}: `batch` is a number of sequences, 1 or more");
        }
        self.check_measure(path)?;
        self.check_values(path)?;
        self.check_quiz(path)
    }

    /// Rule ids (rules, feeds, measured moves) are unique, feeds have an exercise to judge,
    /// and each rule's `unless` names a rule.
    fn check_rules(&self, path: &Path) -> Result<()> {
        let at = path.display();
        let mut ids = BTreeSet::new();
        for rule in &self.rules {
            if !ids.insert(rule.id.as_str()) {
                bail!("{at}: rule `{}` is listed twice", rule.id);
            }
            if rule.forbid.is_empty() == rule.require.is_empty() {
                bail!(
                    "{at}: rule `{}` needs either `forbid:` or `require:` (a list of calls)",
                    rule.id
                );
            }
        }
        for feed in &self.feeds {
            if !ids.insert(feed.id.as_str()) {
                bail!("{at}: rule `{}` is listed twice", feed.id);
            }
            match [feed.first_token, feed.step, feed.prefill] {
                [Some(n), None, None] | [None, Some(n), None] | [None, None, Some(n)] if n >= 1 => {}
                _ => bail!(
                    "{at}: feed rule `{}` needs one of `first_token:`, `step:` or `prefill:`, a number of positions, 1 or more",
                    feed.id
                ),
            }
        }
        for id in self.measure.iter().flat_map(|m| &m.moves).map(|m| &m.id) {
            if !ids.insert(id.as_str()) {
                bail!("{at}: rule `{id}` is listed twice");
            }
        }
        if !self.feeds.is_empty() && self.exercise.is_none() {
            bail!("{at}: `feeds` judge an exercise's run: it needs `exercise`");
        }
        for rule in &self.rules {
            if let Some(other) = &rule.unless {
                if !ids.contains(other.as_str()) {
                    bail!(
                        "{at}: rule `{}` says `unless: {other}`, which is no rule here",
                        rule.id
                    );
                }
            }
        }
        Ok(())
    }

    /// `logits` needs an exercise and tolerances above 0.
    fn check_logits(&self, path: &Path) -> Result<()> {
        let at = path.display();
        if let Some(logits) = &self.logits {
            if self.exercise.is_none() {
                bail!(
                    "{at}: `logits` compares an exercise's model with quest's: it needs `exercise`"
                );
            }
            let tolerances = [Some(logits.tolerance), logits.half_precision];
            if !tolerances
                .into_iter()
                .flatten()
                .all(|t| t.is_finite() && t > 0.0)
            {
                bail!("{at}: `logits: tolerance:` is a max abs difference, above 0");
            }
        }
        Ok(())
    }

    /// `draws` needs an exercise, draws per step and a tolerance above 0.
    fn check_draws(&self, path: &Path) -> Result<()> {
        let at = path.display();
        if let Some(draws) = &self.draws {
            if self.exercise.is_none() {
                bail!("{at}: `draws` judges an exercise's sampler: it needs `exercise`");
            }
            if draws.per_step == 0 || !(draws.tolerance.is_finite() && draws.tolerance > 0.0) {
                bail!(
                    "{at}: `draws:` needs `per_step` draws (1 or more) and a `tolerance` above 0 \
                     (a total variation distance)"
                );
            }
        }
        Ok(())
    }

    /// `measure` fits its baseline, its `at_least` and its metric's direction.
    fn check_measure(&self, path: &Path) -> Result<()> {
        let at = path.display();
        if let Some(measure) = &self.measure {
            if measure.against == Baseline::QuestPieces
                && self.piece.is_none()
                && self.logits.is_none()
                && self.draws.is_none()
            {
                bail!(
                    "{at}: `against: quest_pieces` measures a piece of the model or the \
                     sampler: it needs `piece`, `logits` or `draws`"
                );
            }
            if measure
                .at_least
                .is_some_and(|ratio| ratio.is_nan() || ratio < 1.0)
            {
                bail!("{at}: `at_least` is an improvement ratio, 1.0 or more");
            }
            // `expect` is the metric's own direction: a lesson that expects the other way
            // would be graded against its own claim.
            let natural = if measure.metric.higher_is_better() {
                Direction::Higher
            } else {
                Direction::Lower
            };
            if measure.expect != natural {
                bail!(
                    "{at}: `expect: {}` for `{}`, but that metric improves when it is {}",
                    measure.expect.key(),
                    measure.metric.key(),
                    natural.key()
                );
            }
        }
        Ok(())
    }

    /// `values` are computed by the exercise, and each checked one is computed.
    fn check_values(&self, path: &Path) -> Result<()> {
        let at = path.display();
        if let Some(values) = &self.values {
            if self.exercise.is_none() {
                bail!("{at}: `values` are computed by an exercise: it needs `exercise`");
            }
            let computed = values.computed_by.values();
            if values.check.is_empty() {
                bail!("{at}: `values: check:` names no value to check");
            }
            for name in &values.check {
                if !computed.contains(&name.as_str()) {
                    bail!(
                        "{at}: `values: check:` names `{name}`, which `{:?}` does not compute; it computes {}",
                        values.computed_by,
                        computed.join(", ")
                    );
                }
            }
            if values.tolerance.is_nan() || values.tolerance < 0.0 {
                bail!("{at}: `values: tolerance:` is a relative tolerance, 0 or more");
            }
        }
        Ok(())
    }

    /// Question ids are unique, and each answer fits its choices.
    fn check_quiz(&self, path: &Path) -> Result<()> {
        let at = path.display();
        let mut questions = BTreeSet::new();
        for question in &self.quiz {
            if !questions.insert(question.id.as_str()) {
                bail!("{at}: question `{}` is listed twice", question.id);
            }
            let choices: Vec<&str> = question.choices.iter().map(String::as_str).collect();
            if !self.answer_fits(question, &choices) {
                bail!(
                    "{at}: question `{}`: the answer must be one of its choices ({}); a measured \
                     answer needs `measure` (`effect_shows`, `fewer_bytes_faster`: the choices [yes, no]; \
                     `improvement`: a `from:` for each choice, the least improvement, one of them 0), \
                     or `values:` and one value it computes for each choice (`largest`)",
                    question.id,
                    choices.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Whether `question`'s answer is one of its `choices`, or a measured answer that this
    /// spec can judge and that gives each choice its meaning.
    fn answer_fits(&self, question: &Question, choices: &[&str]) -> bool {
        match &question.answer {
            Answer::Is(answer) => choices.contains(&answer.as_str()),
            Answer::Measured {
                measured: MeasuredAnswer::EffectShows | MeasuredAnswer::FewerBytesFaster,
                from,
            } => self.measure.is_some() && choices == ["yes", "no"] && from.is_empty(),
            Answer::Measured {
                measured: MeasuredAnswer::Improvement,
                from,
            } => {
                // Every choice has a band, and every improvement falls in one.
                self.measure.is_some()
                    && from
                        .keys()
                        .map(String::as_str)
                        .eq(choices.iter().copied().collect::<BTreeSet<_>>())
                    && from.len() == choices.len()
                    && from.values().all(|v| v.is_finite() && *v >= 0.0)
                    && from.values().any(|v| *v == 0.0)
            }
            Answer::Measured {
                measured: MeasuredAnswer::Largest(of),
                from,
            } => {
                let computed = self
                    .values
                    .as_ref()
                    .map_or(&[][..], |v| v.computed_by.values());
                from.is_empty()
                    && of.keys().map(String::as_str).collect::<BTreeSet<_>>()
                        == choices.iter().copied().collect()
                    && of.values().all(|value| computed.contains(&value.as_str()))
            }
        }
    }

    /// Whether the exercise runs on `backend` (`runs_on`; without it, everywhere).
    pub fn runs_on_backend(&self, backend: Backend) -> bool {
        self.runs_on.is_empty() || self.runs_on.iter().any(|place| place.holds(backend))
    }

    /// Whether the measured effect is expected on `backend` (its kind is in `shows_on`).
    pub fn shows_on_backend(&self, backend: Backend) -> bool {
        self.shows_on.contains(&backend.kind())
    }

    pub fn question(&self, id: &str) -> Option<&Question> {
        self.quiz.iter().find(|question| question.id == id)
    }
}

/// A part of the model a lesson has the learner write: one method of [`Pieces`] (or
/// `lm::Sampler::sample`), by the name the lesson's `piece:` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Piece {
    RmsNorm,
    Swiglu,
    Rope,
    Attention,
    GatedDelta,
    QuantizedMatmul,
    Sample,
    /// The whole SwiGLU MLP: its three projections, the gate and the product.
    Mlp,
    /// A layer's KV cache (`lm::KvStore`): `update_and_fetch`, the call the model makes.
    KvCache,
    /// A speculative decoder's guesses checked by the model (`lm::speculate::Speculator`):
    /// `verify`, one call a step of the loop.
    Speculate,
    /// The prompt through the cache in chunks (`lm::prefill::Prefill`): `prefill`, once a
    /// run.
    Prefill,
    /// Continuous batching (`lm::batching::Scheduler`): `join` and `keep` checked alone,
    /// `serve` the loop.
    Batching,
    /// A server's edge (`lm::serving::Api`): `parse`, a request's body read, checked alone.
    Server,
}

impl Piece {
    pub const ALL: [Piece; 13] = [
        Piece::RmsNorm,
        Piece::Swiglu,
        Piece::Rope,
        Piece::Attention,
        Piece::GatedDelta,
        Piece::QuantizedMatmul,
        Piece::Sample,
        Piece::Mlp,
        Piece::KvCache,
        Piece::Speculate,
        Piece::Prefill,
        Piece::Batching,
        Piece::Server,
    ];

    /// The method's name, as the learner's `impl` writes it.
    pub fn method(self) -> &'static str {
        match self {
            Piece::RmsNorm => "rms_norm",
            Piece::Swiglu => "swiglu",
            Piece::Rope => "rope",
            Piece::Attention => "attention",
            Piece::GatedDelta => "gated_delta",
            Piece::QuantizedMatmul => "quantized_matmul",
            Piece::Sample => "sample",
            Piece::Mlp => "mlp",
            Piece::KvCache => "update_and_fetch",
            Piece::Speculate => "verify",
            Piece::Prefill => "prefill",
            Piece::Batching => "join",
            Piece::Server => "parse",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.method())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// float32 takes the tolerance; float16 `half_precision` where measured, else the
    /// float32 tolerance, said to be unmeasured there.
    #[test]
    fn a_tolerance_is_chosen_by_the_dtype_and_said_unmeasured_without_its_own() {
        let (float32, half) = (false, true);
        let both = LogitsCheck {
            tolerance: 1e-3,
            half_precision: Some(2e-1),
        };
        let float32_only = LogitsCheck {
            tolerance: 1e-3,
            half_precision: None,
        };
        assert_eq!(both.tolerance_in(float32), 1e-3);
        assert_eq!(both.tolerance_in(half), 2e-1);
        assert_eq!(float32_only.tolerance_in(half), 1e-3);
        assert!(both.measured_in(half) && both.measured_in(float32));
        assert!(float32_only.measured_in(float32));
        assert!(!float32_only.measured_in(half));
    }

    fn parse(yaml: &str) -> Result<LessonSpec> {
        let spec: LessonSpec = serde_yaml::from_str(yaml)?;
        spec.check(Path::new("lesson.yaml"))?;
        Ok(spec)
    }

    const FULL: &str = r#"
minutes: 15
xp: 100
tags: [journey]
shows_on: [gpu]
exercise: exercises/x/decode_loop.rs
solution: solutions/x/decode_loop.rs
rules:
  - id: sync
    forbid: [host_read, eval, {call: synchronize}]
    in: {loop: forward}
  - id: read-after
    require: [host_read]
    in: {after_loop: forward}
    unless: sync
tokens: {first: 8}
measure: {metric: decode_tok_s, expect: higher, at_least: 1.05}
card: {}
quiz:
  - id: term
    choices: [fixed, bytes]
    answer: fixed
  - id: shows
    choices: [yes, no]
    answer: {measured: effect_shows}
"#;

    #[test]
    fn a_full_spec_reads() {
        let spec = parse(FULL).unwrap();
        assert_eq!(spec.model, "smollm2-135m-instruct");
        assert_eq!(spec.max_tokens, 32);
        assert_eq!(spec.rules[0].region, Region::Loop("forward".into()));
        assert_eq!(
            spec.rules[0].forbid,
            [
                CallPattern::Group(CallGroup::HostRead),
                CallPattern::Group(CallGroup::Eval),
                CallPattern::Call {
                    call: "synchronize".into()
                }
            ]
        );
        assert_eq!(spec.rules[1].region, Region::AfterLoop("forward".into()));
        assert_eq!(spec.tokens, TokenCheck::First(8));
        let measure = spec.measure.as_ref().unwrap();
        assert_eq!(measure.metric, Metric::DecodeTokS);
        assert_eq!(measure.rounds, 3);
        assert_eq!(spec.card.as_ref().unwrap().tolerance, 0.15);
        assert_eq!(spec.quiz[0].answer, Answer::Is("fixed".into()));
        assert_eq!(
            spec.quiz[1].answer,
            Answer::Measured {
                measured: MeasuredAnswer::EffectShows,
                from: BTreeMap::new(),
            }
        );
        assert!(spec.shows_on_backend(Backend::Cuda));
        assert!(!spec.shows_on_backend(Backend::Cpu));
        // Without `runs_on` the exercise runs everywhere; with it, only there.
        let all = [Backend::Cpu, Backend::Metal, Backend::Cuda];
        let runs = |runs_on: Vec<RunsOn>| {
            let spec = LessonSpec {
                runs_on,
                ..spec.clone()
            };
            all.map(|backend| spec.runs_on_backend(backend))
        };
        assert_eq!(runs(vec![]), [true, true, true]);
        assert_eq!(runs(vec![RunsOn::Gpu]), [false, true, true]);
        // A CUDA kernel's exercise: not on Metal either.
        assert_eq!(runs(vec![RunsOn::Cuda]), [false, false, true]);
        assert_eq!(runs(vec![RunsOn::Cpu, RunsOn::Metal]), [true, true, false]);
    }

    #[test]
    fn a_reading_only_lesson_needs_a_quiz() {
        let error = parse("minutes: 5\nxp: 10\n").unwrap_err().to_string();
        assert!(error.contains("needs a `quiz`"), "{error}");
        let quiz = "minutes: 5\nxp: 10\nquiz:\n  - id: q\n    choices: [a, b]\n    answer: b\n";
        assert!(parse(quiz).is_ok());
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (
                FULL.replace("answer: fixed", "answer: slow"),
                "one of its choices",
            ),
            (
                FULL.replace("unless: sync", "unless: nope"),
                "`unless: nope`",
            ),
            (
                FULL.replace("    forbid: [host_read, eval, {call: synchronize}]\n", ""),
                "either `forbid:`",
            ),
            (
                FULL.replace("solution: solutions/x/decode_loop.rs\n", ""),
                "needs a solution",
            ),
            (
                FULL.replace("at_least: 1.05", "at_least: 0.5"),
                "1.0 or more",
            ),
            (FULL.replace("host_read, eval", "host_reed, eval"), "rules"),
            (FULL.replace("minutes: 15", "minute: 15"), "minute"),
            (
                FULL.replace(
                    "answer: {measured: effect_shows}",
                    "answer: {measured: improvement, from: {yes: 1.5, no: 1.1}}",
                ),
                "one of them 0",
            ),
            (FULL.replace("tokens: {first: 8}", "batch: 0"), "`batch`"),
        ];
        for (yaml, expected) in cases {
            let error = format!("{:#}", parse(&yaml).unwrap_err());
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    const VALUES: &str = r#"
minutes: 20
xp: 100
exercise: exercises/x/ceiling.rs
solution: solutions/x/ceiling.rs
tokens: none
values:
  computed_by: time_per_token
  check: [bytes_per_token, fixed_ms]
quiz:
  - id: larger-term
    choices: [fixed, bytes]
    answer: {measured: {largest: {fixed: fixed_term_ms, bytes: bytes_term_ms}}}
"#;

    #[test]
    fn values_and_measured_largest_answers_read_and_are_checked() {
        let spec = parse(VALUES).unwrap();
        let values = spec.values.as_ref().unwrap();
        assert_eq!(values.computed_by, Computation::TimePerToken);
        assert_eq!(values.tolerance, 1e-6);
        let Answer::Measured {
            measured: MeasuredAnswer::Largest(of),
            ..
        } = &spec.quiz[0].answer
        else {
            panic!("{:?}", spec.quiz[0].answer);
        };
        assert_eq!(of["fixed"], "fixed_term_ms");
        let cases = [
            (
                VALUES.replace("[bytes_per_token, fixed_ms]", "[bytes_per_token, slope]"),
                "names `slope`",
            ),
            (
                VALUES.replace("fixed: fixed_term_ms", "fixed: nope"),
                "`largest`",
            ),
            (VALUES.replace("fixed: fixed_term_ms, ", ""), "`largest`"),
            (
                VALUES.replace("time_per_token", "time_per_tokens"),
                "values",
            ),
            (
                VALUES.replace("check: [bytes_per_token, fixed_ms]", "check: []"),
                "names no value",
            ),
        ];
        for (yaml, expected) in cases {
            let error = format!("{:#}", parse(&yaml).unwrap_err());
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn a_measured_answer_needs_a_measure_and_yes_no() {
        let with = FULL.replace("effect_shows", "fewer_bytes_faster");
        assert_eq!(
            parse(&with).unwrap().quiz[1].answer,
            Answer::Measured {
                measured: MeasuredAnswer::FewerBytesFaster,
                from: Default::default(),
            }
        );
        let no_measure = with
            .replace(
                "measure: {metric: decode_tok_s, expect: higher, at_least: 1.05}\n",
                "",
            )
            .replace("card: {}\n", "");
        let error = format!("{:#}", parse(&no_measure).unwrap_err());
        assert!(
            error.contains("a measured answer needs `measure`"),
            "{error}"
        );
        let error = format!(
            "{:#}",
            parse(&with.replace("[yes, no]", "[si, no]")).unwrap_err()
        );
        assert!(error.contains("the choices [yes, no]"), "{error}");
    }

    #[test]
    fn metric_keys_round_trip() {
        for metric in Metric::ALL {
            assert_eq!(Metric::from_key(metric.key()), Some(metric));
        }
        assert!(Metric::DecodeTokS.higher_is_better());
        assert!(!Metric::TtftMs.higher_is_better());
    }
}
