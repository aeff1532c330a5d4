//! `lessons/<id>/lesson.yaml`: everything about a lesson that is not text in one
//! language — what it runs, the code rules, what it measures, its card and quiz.
//! The texts that go with them (rule messages, quiz questions) are in `en.md` /
//! `ko.md`, keyed by the ids given here.

use std::collections::BTreeSet;
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
    #[serde(default, with = "serde_yaml::with::singleton_map")]
    pub tokens: TokenCheck,
    #[serde(default)]
    pub measure: Option<Measure>,
    #[serde(default)]
    pub card: Option<CardSpec>,
    #[serde(default)]
    pub quiz: Vec<Question>,
}

fn default_model() -> String {
    "smollm2-135m-instruct".into()
}
/// The prompt and token count of a lesson that names none; an exercise run by hand
/// uses them too.
pub const DEFAULT_PROMPT: &str = "What is the capital of France? Answer in one sentence.";
pub const DEFAULT_MAX_TOKENS: usize = 32;

fn default_prompt() -> String {
    DEFAULT_PROMPT.into()
}
fn default_max_tokens() -> usize {
    DEFAULT_MAX_TOKENS
}

/// Where an effect can show: any CPU, or any GPU (Metal or CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cpu,
    Gpu,
}

impl BackendKind {
    /// `cpu` for MLX's CPU backend, `gpu` for every other (`metal`, `cuda`).
    pub fn of(backend: &str) -> Self {
        if backend == "cpu" {
            BackendKind::Cpu
        } else {
            BackendKind::Gpu
        }
    }

    /// Its name in lesson.yaml: `cpu` or `gpu`.
    pub fn key(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

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
    None,
}

/// What quest measures for the lesson's claim.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    pub metric: Metric,
    /// What the learner's numbers are compared with.
    #[serde(default)]
    pub baseline: Baseline,
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
}

fn default_rounds() -> usize {
    3
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// The lesson's starting code, exactly as the lesson gives it.
    #[default]
    Original,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Higher,
    Lower,
}

/// The numbers an exercise's report yields (see `lab::Report::metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Tokens after the first over the time after the first.
    DecodeTokS,
    /// Time to first token: prefill until the first token is on the host.
    TtftMs,
    /// From the exercise's start until the timer started (loading the model).
    LoadMs,
    /// Mean time per decoded token.
    MsPerToken,
    /// How much the time per token grows over the run, in ms per 100 tokens
    /// (least squares over the per-token times).
    MsPerTokenGrowth,
}

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::DecodeTokS,
        Metric::TtftMs,
        Metric::LoadMs,
        Metric::MsPerToken,
        Metric::MsPerTokenGrowth,
    ];

    /// Its key in reports and in the progress file.
    pub fn key(self) -> &'static str {
        match self {
            Metric::DecodeTokS => "decode_tok_s",
            Metric::TtftMs => "ttft_ms",
            Metric::LoadMs => "load_ms",
            Metric::MsPerToken => "ms_per_token",
            Metric::MsPerTokenGrowth => "ms_per_token_growth",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|metric| metric.key() == key)
    }

    /// The unit shown after a value.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::DecodeTokS => "tok/s",
            Metric::TtftMs | Metric::LoadMs | Metric::MsPerToken => "ms",
            Metric::MsPerTokenGrowth => "ms/100 tok",
        }
    }

    /// Whether a larger value is better (speed) or worse (time).
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::DecodeTokS)
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

/// `answer: fixed`, or `answer: {measured: effect_shows}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    /// The same everywhere.
    Is(String),
    /// Computed from what quest measured on this machine.
    Measured { measured: MeasuredAnswer },
}

/// Answers that depend on the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasuredAnswer {
    /// `yes` when the learner's code improved the lesson's metric by at least 10 %
    /// over the baseline (medians of quest's measurements here), else `no`.
    EffectShows,
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
        if let Some(measure) = &self.measure {
            if measure
                .at_least
                .is_some_and(|ratio| ratio.is_nan() || ratio < 1.0)
            {
                bail!("{at}: `at_least` is an improvement ratio, 1.0 or more");
            }
        }
        let mut questions = BTreeSet::new();
        for question in &self.quiz {
            if !questions.insert(question.id.as_str()) {
                bail!("{at}: question `{}` is listed twice", question.id);
            }
            let choices: Vec<&str> = question.choices.iter().map(String::as_str).collect();
            let valid = match &question.answer {
                Answer::Is(answer) => choices.contains(&answer.as_str()),
                Answer::Measured {
                    measured: MeasuredAnswer::EffectShows,
                } => self.measure.is_some() && choices == ["yes", "no"],
            };
            if !valid {
                bail!(
                    "{at}: question `{}`: the answer must be one of its choices ({}); a measured \
                     answer needs `measure` and the choices [yes, no]",
                    question.id,
                    choices.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Whether the measured effect is expected on `backend` (`cpu`, `metal`, `cuda`).
    pub fn shows_on_backend(&self, backend: &str) -> bool {
        self.shows_on.contains(&BackendKind::of(backend))
    }

    pub fn question(&self, id: &str) -> Option<&Question> {
        self.quiz.iter().find(|question| question.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                measured: MeasuredAnswer::EffectShows
            }
        );
        assert!(spec.shows_on_backend("cuda"));
        assert!(!spec.shows_on_backend("cpu"));
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
        ];
        for (yaml, expected) in cases {
            let error = format!("{:#}", parse(&yaml).unwrap_err());
            assert!(error.contains(expected), "{expected}: {error}");
        }
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
