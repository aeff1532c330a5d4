//! Every `QUEST_*` variable quest reads, in one table: its name, when it is read, what it
//! means and its default. The code reads a setting through its entry here (never
//! `std::env::var("QUEST_…")` elsewhere), the settings table of docs/USAGE.md is written from [`ALL`]
//! (`quest dev update`, checked by a test), and `quest --help` lists them from it.
//!
//! A default that depends on the machine (the backend, the CPU count) is named here in
//! words and computed by the one function the entry points at.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// When a setting is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// By the build (`cargo build`): changing it rebuilds MLX's bindings.
    Build,
    /// By `quest` and the exercise binaries it starts.
    Run,
    /// Set by quest for the exercise binary it starts (a learner runs `quest run`).
    Exercise,
}

/// One environment variable of quest's.
#[derive(Debug)]
pub struct Setting {
    pub name: &'static str,
    pub when: When,
    /// What it chooses, for docs/USAGE.md and `--help` (Markdown, one line).
    pub meaning: &'static str,
    /// Its value when unset: a value the code parses, or (`computed: true`) words for what
    /// the code computes.
    pub default: &'static str,
    pub computed: bool,
}

impl Setting {
    /// The value set in this process, `None` when unset or empty (an empty value never
    /// means "here", "zero" or "nothing").
    pub fn raw(&self) -> Option<String> {
        std::env::var(self.name)
            .ok()
            .filter(|v| !v.trim().is_empty())
    }

    /// The value as the OS gives it (paths), `None` when unset or empty.
    pub fn os(&self) -> Option<OsString> {
        std::env::var_os(self.name).filter(|v| !v.is_empty())
    }

    /// The value set, else the default (for a setting whose default is a value).
    pub fn value(&self) -> String {
        debug_assert!(!self.computed, "{} has a computed default", self.name);
        self.raw().unwrap_or_else(|| self.default.to_owned())
    }

    /// [`Setting::value`] parsed; a bad value names the variable and what it takes.
    pub fn parse<T>(&self) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let value = self.value();
        value
            .parse()
            .map_err(|e| anyhow::anyhow!("{}={value}: {e}", self.name))
    }
}

macro_rules! settings {
    ($($id:ident: $name:literal, $when:ident, $default:literal $(computed $computed:literal)?, $meaning:literal;)*) => {
        $(pub const $id: Setting = Setting {
            name: $name,
            when: When::$when,
            meaning: $meaning,
            default: $default,
            computed: settings!(@computed $($computed)?),
        };)*
        /// Every setting, in the order docs/USAGE.md lists them.
        pub const ALL: &[&Setting] = &[$(&$id),*];
    };
    (@computed) => { false };
    (@computed $c:literal) => { $c };
}

settings! {
    MLX: "QUEST_MLX", Build, "cpu",
        "`cpu` builds against `mlx-cpu==0.32.2`; `cuda` against `mlx-cuda-13==0.32.2` and its CUDA runtime wheels (see *On an NVIDIA GPU*)";
    BLAS: "QUEST_BLAS", Build, "openblas",
        "`openblas` runs MLX's CPU backend on OpenBLAS (`scipy-openblas32==0.3.34.481.3` from PyPI, DYNAMIC_ARCH: its kernels chosen for this CPU at load; in quest's own copy of the wheel); `bundled` keeps the wheel's reference BLAS (about 30× slower to the first token; the way out should a library ever stop with SIGILL, which quest then names)";
    BLAS_THREADS: "QUEST_BLAS_THREADS", Run, "half the CPUs, 1 to 8 (one on a 2-vCPU machine); an `OPENBLAS_NUM_THREADS` you set is respected" computed true,
        "OpenBLAS threads";
    WEIGHTS: "QUEST_WEIGHTS", Run, "auto",
        "how a quantized model's matrices are held: `auto` (dense f32 on a CPU, quantized as stored on a GPU), `dense` or `quantized`; `quest --weights …` sets it";
    MEMORY_CHECK: "QUEST_MEMORY_CHECK", Run, "on",
        "on a CPU: `on`, quest refuses to load a model whose weights, as it will hold them (dense f32 by default), need more memory than the machine has available (Linux's `MemAvailable`), and says what would fit, instead of being stopped by the system halfway or swapping; `off` loads it anyway";
    QMV: "QUEST_QMV", Run, "auto",
        "on a CUDA build: `quest`, `mlx` or `auto` (quest's where its kernels are kept compiled or the process warms up first, see `QUEST_KERNEL_CACHE`; else MLX's): 4-bit matrices times one row (decode) in quest's own kernel, folding in the input norm, SwiGLU and the residual add (docs/benchmarks.md)";
    QMV_LEVERS: "QUEST_QMV_LEVERS", Run, "x1,banks,stream,persist",
        "on a CUDA build, where quest's 4-bit matvec runs: which of its levers are compiled in, `all`, `none` or a list of `x1` (x staged in one round of 16-byte loads), `banks` (x laid out in shared memory so a warp's reads meet no bank twice), `stream` (the weights read as streamed loads), `persist` (a matrix of more rows than the GPU holds blocks at once in a grid of that many, each block going on to further rows), `deep` (a matrix whose grid is at most two blocks an SM compiled for two, asking for eight chunks of a row ahead), to measure each against the kernel without it";
    QKV: "QUEST_QKV", Run, "auto",
        "on a CUDA build: `quest`, `mlx` or `auto` (as `QUEST_QMV`): a decode step's q, k and v heads — Qwen3's q/k norm and RoPE included — from one kernel of quest's instead of eight of MLX's ops";
    ATTEND: "QUEST_ATTEND", Run, "auto",
        "on a CUDA build: `quest`, `mlx` or `auto` (as `QUEST_QMV`): a decode step's attention — the heads, the new key and value written into the cache, attention over it — in one kernel of quest's instead of seven ops (from 512 positions on, where it measured slower, MLX's attention runs)";
    KERNEL_CACHE: "QUEST_KERNEL_CACHE", Run, "on",
        "on a CUDA build: `on`, quest compiles each of its CUDA kernels once for this GPU with NVRTC (the CUDA build's own wheel), keeps it under `QUEST_CACHE`/`cuda-kernels` and hands MLX the compiled kernel in every process; `fresh`, only in the processes that start their clocks with their first graph (an exercise), while those that warm up first (`quest fit`, `kernel`, `slope`, `batch`) let MLX compile them from source once (for measuring one against the other); `off`, MLX compiles them from source in every process (about 10 s on an H200: then an exercise runs MLX's ops by default)";
    KERNEL_HANDOFF: "QUEST_KERNEL_HANDOFF", Run, "key",
        "on a CUDA build, where quest's kernels run kept compiled (`QUEST_KERNEL_CACHE`): `key`, quest puts each kept kernel where MLX's CUDA backend reads a compiled module (its own cache folder, `MLX_PTX_CACHE_DIR` or the temp dir's `mlx/`) and hands MLX a short key at every call; `bytes`, it hands over the whole compiled kernel at every call, which MLX copies twice and hashes at each launch (for measuring one against the other)";
    GRAPH_COMMIT: "QUEST_GRAPH_COMMIT", Run, "step",
        "on a CUDA build: `step`, quest sets `MLX_MAX_OPS_PER_BUFFER=1000` and `MLX_MAX_MB_PER_BUFFER=100000` (each unless you set it) for itself and the exercises it runs, so MLX commits a decode step's CUDA graph once, at its `async_eval`, instead of every 100 nodes; `mlx`, MLX's own limits. The Python peers (mlx-lm) always run with MLX's own";
    PREBUILT: "QUEST_PREBUILT", Run, "unset: quest builds exercises with cargo" computed true,
        "a folder of exercise binaries from `quest dev prebuild <lesson> --out DIR` (named by their sources' sha256): quest runs those and never calls cargo, and refuses a source with no binary (edited since)";
    PEER_PYTHON: "QUEST_PEER_PYTHON", Run, "unset: a venv made from PyPI" computed true,
        "a Python that already has mlx 0.32.2 and mlx-lm 0.32.2 (on quest's MLX build): `quest bench` uses it instead of making its venv from PyPI";
    NVRTC: "QUEST_NVRTC", Run, "unset: NVRTC 13.5 from PyPI, fetched once into `QUEST_CACHE`" computed true,
        "off a GPU: the NVRTC library (`libnvrtc.so.13`, the CUDA headers in `../include`) that compiles a lesson's own CUDA kernel to check it (the *custom-kernel* lesson)";
    CACHE: "QUEST_CACHE", Run, "the platform cache dir + `/quest`" computed true,
        "where models and compiled kernels are cached";
    HOME: "QUEST_HOME", Run, "the platform data dir + `/quest`" computed true,
        "where the progress file lives";
    ROOT: "QUEST_ROOT", Run, "this repository" computed true,
        "the folder holding `lessons/`, `exercises/` and `solutions/`; exercises are still compiled in this repository's cargo workspace";
    TIME_LIMIT: "QUEST_TIME_LIMIT", Run, "no limit" computed true,
        "stop an exercise that runs longer than this many seconds (as `--time-limit`)";
    CONTEXTS: "QUEST_CONTEXTS", Exercise, "the exercise's own (context-slope: 64,2048,4096)" computed true,
        "the context lengths the context-slope exercise fills, comma-separated";
    MODEL: "QUEST_MODEL", Exercise, "smollm2-135m-instruct",
        "the model the exercise loads (`quest run --model`)";
    PROMPT: "QUEST_PROMPT", Exercise, "What is the capital of France? Answer in one sentence.",
        "the prompt an exercise run by hand writes its answer to (run by quest, it gets the lesson's prompt over quest's clock)";
    ATTENTION_BLOCK: "QUEST_ATTENTION_BLOCK", Exercise, "256",
        "the keys a block holds where `Exercise::decode_in_blocks` cuts a decode step's cache for attention in blocks (attention-blocks')";
    ARRIVAL_MS: "QUEST_ARRIVAL_MS", Exercise, "250",
        "the mean gap between the requests of `Exercise::serve`'s trace, in ms (continuous-batching's; quest's clock reads the same)";
    PORT: "QUEST_PORT", Exercise, "0: any free port",
        "the port on 127.0.0.1 `Exercise::serve_http` listens on, run by hand (run by quest, any free port, said on quest's line)";
    PREFILL_CHUNK: "QUEST_PREFILL_CHUNK", Exercise, "64",
        "the positions `Exercise::decode_prefilled` asks a chunked prefill to feed a forward call at most (chunked-prefill's)";
    MAX_TOKENS: "QUEST_MAX_TOKENS", Exercise, "32",
        "tokens the exercise generates (`quest run --max-tokens`)";
    REPORT: "QUEST_REPORT", Exercise, "unset: the exercise prints its numbers" computed true,
        "where the exercise writes its JSON report for quest";
    LINE: "QUEST_LINE", Exercise, "unset: the exercise times itself and prints its numbers" computed true,
        "the file descriptor of quest's line to the exercise (3, a socket): quest says on it which pieces run, hands over the prompt once the model is loaded (`Exercise::prompt`), and timestamps each token the exercise hands over as it reaches the host (`Timer::first_token`, `Timer::token`); the times quest shows and awards are its clock's";
    FORCE: "QUEST_FORCE", Exercise, "unset: each step feeds the token it picked" computed true,
        "token ids, comma-separated, that `Exercise::decode` feeds one per step instead of its own picks (teacher forcing: quest checks a model's logits on the reference's tokens)";
    LOGITS: "QUEST_LOGITS", Exercise, "unset: no logits written" computed true,
        "where `Exercise::decode` writes every step's logits (float32, little-endian, a step after another) for quest's logits check";
    LAYERS: "QUEST_LAYERS", Exercise, "unset: no hidden states written" computed true,
        "where `Exercise::decode` writes each step's hidden state after every layer of quest's decoder (two u32, layers and width, then float32 rows), so a refused logits check can name the first layer that differs";
    SAMPLING: "QUEST_SAMPLING", Exercise, "temperature=0.8,top_p=0.9,min_p=0.05,top_k=20,seed=0",
        "what `Exercise::decode_sampled` asks its sampler for, as mlx-lm's `make_sampler` takes it: the temperature, `top_p` (1: off), `min_p` (0: off), `top_k` (0: off) and the seed of the decode's key, any of them named (the sampling lesson's)";
    DRAWS: "QUEST_DRAWS", Exercise, "unset: one draw a step" computed true,
        "where `Exercise::decode_sampled` writes, at every step, `QUEST_DRAWS_PER_STEP` draws from that step's logits (u32, little-endian, a step after another) for quest's check of a sampler by its distribution";
    DRAWS_PER_STEP: "QUEST_DRAWS_PER_STEP", Exercise, "1000",
        "how many tokens `Exercise::decode_sampled` draws a step when `QUEST_DRAWS` is set";
    PIECES: "QUEST_PIECES", Exercise, "yours",
        "for an exercise run by hand, `yours` or `quest`: with `quest`, `Model::with_pieces` keeps quest's own pieces (MLX's fused ops), the baseline a lesson's piece is measured against in the same binary. Run by quest, the exercise takes the choice from quest's line (`QUEST_LINE`) and never from its environment, which the code it judges could set";
    LAB_SOURCE: "QUEST_LAB_SOURCE", Build, "lab/src/main.rs's own" computed true,
        "the source file `quest-lab` is built from (quest sets it when it builds an exercise)";
}

/// A measurement command's default that differs between the CPU and a GPU: written once
/// here, read by the command and shown in its `--help` ([`BackendDefault::help`]).
#[derive(Debug)]
pub struct BackendDefault {
    pub cpu: &'static str,
    pub gpu: &'static str,
    /// Why it differs.
    pub why: &'static str,
}

impl BackendDefault {
    /// The default on a GPU (`true`) or the CPU.
    pub fn on(&self, gpu: bool) -> &'static str {
        if gpu {
            self.gpu
        } else {
            self.cpu
        }
    }

    /// `text` for `--help`, with both defaults.
    pub fn help(&self, text: &str) -> String {
        format!(
            "{text}; default: {} on a CPU, {} on a GPU ({})",
            self.cpu, self.gpu, self.why
        )
    }
}

/// `quest fit --shapes`.
pub const FIT_SHAPES: BackendDefault = BackendDefault {
    cpu: "SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B",
    gpu: "all",
    why: "on a CPU the big shapes take minutes a token",
};
/// `quest slope --shapes`.
pub const SLOPE_SHAPES: BackendDefault = BackendDefault {
    cpu: "Qwen3-0.6B,Qwen3.5-0.8B",
    gpu: "Qwen3-4B,Qwen3.5-4B",
    why: "a 4-bit model on a CPU prefills at about its decode rate",
};
/// `quest slope --contexts`.
pub const SLOPE_CONTEXTS: BackendDefault = BackendDefault {
    cpu: "64,1024,2048,4096",
    gpu: "256,1024,4096,8192",
    why: "tokens in the cache when the timed decode starts",
};
/// `quest slope --fill`.
pub const SLOPE_FILL: BackendDefault = BackendDefault {
    cpu: "random",
    gpu: "prefill",
    why: "a CPU would prefill long contexts for minutes",
};
/// `quest batch --shapes` (without `--model`).
pub const BATCH_SHAPES: BackendDefault = BackendDefault {
    cpu: "none: the course's model",
    gpu: "SmolLM2-135M,Qwen3-0.6B,Qwen3-4B,Qwen3.5-0.8B",
    why: "a GPU box may hold no model files",
};

/// `$QUEST_CACHE`, else the platform cache dir (`~/.cache/quest` on Linux).
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = CACHE.os() {
        return Ok(PathBuf::from(dir));
    }
    Ok(dirs::cache_dir()
        .context("no cache directory on this system; set QUEST_CACHE to a writable folder")?
        .join("quest"))
}

/// The settings table of docs/USAGE.md, written from [`ALL`]: a row per setting, its default
/// with it.
pub fn readme_table() -> String {
    let mut table = String::from("| variable | read | meaning | default |\n|---|---|---|---|\n");
    for s in ALL {
        let when = match s.when {
            When::Build => "build",
            When::Run => "run",
            When::Exercise => "set for the exercise",
        };
        let default = if s.computed {
            s.default.to_owned()
        } else {
            format!("`{}`", s.default)
        };
        table += &format!("| `{}` | {when} | {} | {default} |\n", s.name, s.meaning);
    }
    table
}

/// The document whose settings table `quest dev update` writes, from the repository's root.
pub const TABLE_FILE: &str = "docs/USAGE.md";

/// The settings for `quest --help`: a line each, name and default.
pub fn help() -> String {
    let mut text = String::from("Settings (environment; docs/USAGE.md says more):\n");
    for s in ALL.iter().filter(|s| s.when != When::Exercise) {
        let default = if s.computed {
            s.default.to_owned()
        } else {
            format!("default {}", s.default)
        };
        text += &format!("  {:<20} {default}\n", s.name);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_quests() {
        let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        assert!(names.iter().all(|n| n.starts_with("QUEST_")));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn no_code_reads_a_quest_variable_but_through_the_table() {
        // A literal "QUEST_…" passed to env::var outside this file is a second source of
        // a default.
        let mut found = Vec::new();
        for (path, text) in crate::rust_sources() {
            if path.ends_with("settings.rs") {
                continue;
            }
            for (i, line) in text.lines().enumerate() {
                if (line.contains("env::var(\"QUEST_") || line.contains("env::var_os(\"QUEST_"))
                    && !line.trim_start().starts_with("//")
                {
                    found.push(format!("src/{}:{}", path.display(), i + 1));
                }
            }
        }
        assert!(
            found.is_empty(),
            "read outside the settings table: {found:?}"
        );
    }

    #[test]
    fn the_usage_table_is_written_from_the_settings() {
        let usage = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TABLE_FILE),
        )
        .unwrap();
        assert!(
            usage.contains(&readme_table()),
            "{TABLE_FILE}'s settings table is not the one `quest dev update` writes from src/settings.rs; run `cargo run -- dev update`"
        );
    }

    #[test]
    fn a_bad_value_names_the_variable() {
        let bad = Setting {
            name: "QUEST_TEST_NEVER_SET",
            when: When::Run,
            meaning: "",
            default: "x",
            computed: false,
        };
        let err = bad.parse::<u32>().unwrap_err().to_string();
        assert!(err.starts_with("QUEST_TEST_NEVER_SET=x: "), "{err}");
    }
}
