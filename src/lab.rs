//! The channel between quest and an exercise binary, and the timing protocol.
//!
//! quest starts the exercise with `QUEST_MODEL`, `QUEST_PROMPT`, `QUEST_MAX_TOKENS` and
//! `QUEST_REPORT` set; the exercise writes a versioned JSON [`Report`] to `QUEST_REPORT`.
//! Run by hand (`cargo run -p quest-exercises --bin …`), it uses the defaults below and
//! prints its numbers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Bumped whenever a field of [`Report`] changes meaning.
pub const REPORT_SCHEMA: u32 = 1;

pub const DEFAULT_PROMPT: &str = "What is the capital of France? Answer in one sentence.";
pub const DEFAULT_MAX_TOKENS: usize = 32;

/// What quest asks an exercise to do.
pub struct Exercise {
    pub model: String,
    pub prompt: String,
    pub max_tokens: usize,
    report_path: Option<PathBuf>,
}

impl Exercise {
    pub fn from_env() -> Result<Self> {
        let max_tokens = match std::env::var("QUEST_MAX_TOKENS") {
            Ok(n) => n
                .parse()
                .with_context(|| format!("QUEST_MAX_TOKENS={n} is not a number"))?,
            Err(_) => DEFAULT_MAX_TOKENS,
        };
        Ok(Self {
            model: std::env::var("QUEST_MODEL").unwrap_or_else(|_| crate::lm::DEFAULT_MODEL.into()),
            prompt: std::env::var("QUEST_PROMPT").unwrap_or_else(|_| DEFAULT_PROMPT.into()),
            max_tokens: max_tokens.max(1),
            report_path: std::env::var_os("QUEST_REPORT").map(PathBuf::from),
        })
    }

    /// Writes the report for quest (or prints the numbers when run by hand).
    pub fn report(
        &self,
        timer: &Timer,
        prompt_tokens: usize,
        tokens: &[u32],
        text: &str,
    ) -> Result<()> {
        let loaded = crate::lm::last_loaded();
        let report = Report {
            schema: REPORT_SCHEMA,
            model: self.model.clone(),
            backend: crate::lm::Backend::detect().name().into(),
            prompt_tokens,
            generated_tokens: tokens.len(),
            ttft_ms: timer.ttft().as_secs_f64() * 1e3,
            decode_tok_s: timer.decode_tok_s(tokens.len()),
            tokens: tokens.to_vec(),
            text: text.to_owned(),
            weights: loaded
                .as_ref()
                .map_or_else(String::new, |l| l.weights.clone()),
            weight_bytes_per_token: loaded.as_ref().map_or(0, |l| l.weight_bytes),
        };
        match &self.report_path {
            Some(path) => report.write(path),
            None => {
                println!(
                    "TTFT {:.1} ms · decode {:.2} tok/s · {} weights, {:.0} MB per token",
                    report.ttft_ms,
                    report.decode_tok_s,
                    report.weights,
                    report.weight_bytes_per_token as f64 / 1e6
                );
                Ok(())
            }
        }
    }
}

/// Marks the three moments a decode loop is measured by.
pub struct Timer {
    start: Instant,
    first_token: Option<Instant>,
    done: Option<Instant>,
}

impl Timer {
    /// Call just before the prefill.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
            first_token: None,
            done: None,
        }
    }

    /// Call when the first token is on the host.
    pub fn first_token(&mut self) {
        self.first_token = Some(Instant::now());
    }

    /// Call when the last token is on the host.
    pub fn done(&mut self) {
        self.done = Some(Instant::now());
    }

    pub fn ttft(&self) -> Duration {
        self.first_token.map_or(Duration::ZERO, |t| t - self.start)
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
    pub backend: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    pub tokens: Vec<u32>,
    pub text: String,
    /// How the model's matrices were held: `dense-f32`, `dense-f16` or `quantized` (see
    /// `lm::WeightLayout`); empty in reports from before it was recorded.
    #[serde(default)]
    pub weights: String,
    /// Bytes of weights one decode step reads (0 when not recorded).
    #[serde(default)]
    pub weight_bytes_per_token: u64,
}

impl Report {
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

/// Which version of a lesson's loop to build and run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// The learner's file under `exercises/`.
    Exercise,
    /// The reference under `solutions/`.
    Solution,
    /// The exercise as the lesson gives it (a pristine copy under `solutions/`).
    HandLoop,
}

impl Code {
    /// The cargo package and binary that hold this code for `lesson`.
    pub fn target(self, lesson: &str) -> (&'static str, String) {
        match self {
            Code::Exercise => ("quest-exercises", format!("{lesson}-decode-loop")),
            Code::Solution => ("quest-solutions", format!("{lesson}-solution")),
            Code::HandLoop => ("quest-solutions", format!("{lesson}-hand-loop")),
        }
    }
}

/// What `quest run` passes to an exercise.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub model: String,
    pub prompt: String,
    pub max_tokens: usize,
}

/// Builds `code` of `lesson` with cargo (its output streams to the terminal, compiler
/// errors as cargo prints them) and returns the binary's path. `quiet` hides cargo's
/// progress lines (errors and warnings still show).
pub fn build(root: &Path, lesson: &str, code: Code, quiet: bool) -> Result<PathBuf> {
    let (package, bin) = code.target(lesson);
    let mut cargo =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .args(["build", "-p", package, "--bin", &bin]);
    if quiet {
        cargo.arg("--quiet");
    }
    // Build with the same profile as quest itself so one build serves both.
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    if profile == "release" {
        cargo.arg("--release");
    }
    let status = cargo.status().context("could not start cargo")?;
    anyhow::ensure!(status.success(), BuildFailed);
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target_dir.join(profile).join(bin))
}

/// The build failed; cargo has already printed why.
#[derive(Debug)]
pub struct BuildFailed;

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the exercise did not build")
    }
}

impl std::error::Error for BuildFailed {}

/// Runs a built exercise once and reads the report it wrote.
pub fn run(binary: &Path, request: &RunRequest) -> Result<Report> {
    let report_path =
        std::env::temp_dir().join(format!("quest-report-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&report_path);
    let output = std::process::Command::new(binary)
        .env("QUEST_MODEL", &request.model)
        .env("QUEST_PROMPT", &request.prompt)
        .env("QUEST_MAX_TOKENS", request.max_tokens.to_string())
        .env("QUEST_REPORT", &report_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .with_context(|| format!("could not start {}", binary.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!(RunFailed(stderr.trim().to_owned()));
    }
    let report = Report::read(&report_path);
    let _ = std::fs::remove_file(&report_path);
    report
}

/// The exercise ran but failed; its own error output is kept.
#[derive(Debug)]
pub struct RunFailed(pub String);

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunFailed {}

/// sha256 of a source file: which code a measurement belongs to.
pub fn code_hash(path: &Path) -> Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("could not read {}", path.display()))?;
    Ok(crate::course::sha256_hex(&bytes))
}
