//! `quest bench <lesson>`: the lesson's loops side by side on one model, prompt and
//! token count — the Rust hand loop, the Rust pipelined loop (the solution), the
//! learner's exercise, and the Python peers on mlx-lm (the original lesson's Python hand loop and
//! `generate_step`, what `stream_generate` runs) — interleaved round by round after a
//! warm-up, as medians with min–max, ratios, and fractions of the decode ceiling.

pub mod batch;
pub mod fit;
pub mod kernel;
pub mod loops;
pub mod peer;
pub mod plot;
pub mod rates;
pub mod slope;

use serde::Serialize;

use crate::lab::Report;

/// The loops `quest bench` sets side by side, in the order it runs and prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LoopId {
    #[serde(rename = "rust-starting")]
    RustStarting,
    #[serde(rename = "rust-solution")]
    RustSolution,
    #[serde(rename = "yours")]
    Yours,
    /// The learner's exercise again with quest's CUDA kernels off: MLX's kernels, as the
    /// library runs (measured only where quest's kernels ran in "yours").
    #[serde(rename = "yours-mlx-kernels")]
    YoursMlxKernels,
    #[serde(rename = "py-hand")]
    PyHand,
    #[serde(rename = "py-generate")]
    PyGenerate,
    #[serde(rename = "py-generate-stock")]
    PyGenerateStock,
}

impl LoopId {
    /// Its row's label.
    pub fn label(self) -> &'static str {
        match self {
            LoopId::RustStarting => "Rust: the lesson's starting code",
            LoopId::RustSolution => "Rust: the lesson's solution",
            LoopId::Yours => "your exercise",
            LoopId::YoursMlxKernels => "your exercise, MLX's kernels only",
            LoopId::PyHand => "Python hand loop (mlx-lm model)",
            LoopId::PyGenerate => "mlx-lm generate_step",
            LoopId::PyGenerateStock => {
                "mlx-lm generate_step, stock mlx-cpu wheel, 4-bit (pip as is)"
            }
        }
    }

    /// A Python peer's row (on a random-weights model it draws its own weights).
    pub fn is_python(self) -> bool {
        matches!(
            self,
            LoopId::PyHand | LoopId::PyGenerate | LoopId::PyGenerateStock
        )
    }
}

/// One loop's measured rounds.
#[derive(Clone, Debug, Serialize)]
pub struct LoopRuns {
    pub id: LoopId,
    pub label: String,
    pub runs: Vec<Measured>,
}

impl LoopRuns {
    pub fn new(id: LoopId) -> Self {
        LoopRuns {
            id,
            label: id.label().into(),
            runs: Vec::new(),
        }
    }
}

/// One run of one loop.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Measured {
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    pub tokens: Vec<u32>,
    /// Arrival of each token on the host after the first, when the loop shows it.
    #[serde(default)]
    pub token_ms: Vec<f64>,
    /// quest's own CUDA kernels that ran (a Rust loop's report says; none elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quest_kernels: Vec<String>,
    /// A fresh process's warm-up forward, before its prompt (a Rust loop's; a Python
    /// loop warms up in its own process before its timed rounds): 0 where none ran.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warm_up_ms: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl From<Report> for Measured {
    fn from(r: Report) -> Self {
        // The report gives each token's own milliseconds; a run here keeps their arrival
        // after the first token (0, then the running sum), as the in-process loops do.
        let token_ms = if r.token_ms.is_empty() {
            Vec::new()
        } else {
            std::iter::once(0.0)
                .chain(r.token_ms.iter().scan(0.0, |at, ms| {
                    *at += ms;
                    Some(*at)
                }))
                .collect()
        };
        Measured {
            ttft_ms: r.ttft_ms,
            decode_tok_s: r.decode_tok_s,
            tokens: r.tokens,
            token_ms,
            quest_kernels: r.quest_kernels,
            warm_up_ms: r.warm_up_ms,
        }
    }
}

/// Median, min and max of a loop's decode rates.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Summary {
    pub median_tok_s: f64,
    pub min_tok_s: f64,
    pub max_tok_s: f64,
    pub median_ttft_ms: f64,
    /// The median warm-up forward of a fresh process, where the loop ran one.
    pub median_warm_up_ms: f64,
}

impl LoopRuns {
    pub fn summary(&self) -> Summary {
        let rates: Vec<f64> = self.runs.iter().map(|r| r.decode_tok_s).collect();
        let ttfts: Vec<f64> = self.runs.iter().map(|r| r.ttft_ms).collect();
        Summary {
            median_tok_s: crate::stats::median(&rates),
            min_tok_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_tok_s: rates.iter().copied().fold(0.0, f64::max),
            median_ttft_ms: crate::stats::median(&ttfts),
            median_warm_up_ms: crate::stats::median(
                &self.runs.iter().map(|r| r.warm_up_ms).collect::<Vec<_>>(),
            ),
        }
    }
}

/// What one token's decode step must read, and what that allows at a bandwidth.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Ceiling {
    pub weight_bytes: u64,
    /// Cache read per step: the KV cache averaged over the decoded positions, plus any
    /// fixed recurrent state.
    pub kv_bytes: u64,
    pub bandwidth_gb_s: f64,
}

impl Ceiling {
    pub fn bytes_per_token(&self) -> u64 {
        self.weight_bytes + self.kv_bytes
    }
    /// tok/s if each step did nothing but stream its bytes once.
    pub fn tok_s(&self) -> f64 {
        self.bandwidth_gb_s * 1e9 / self.bytes_per_token() as f64
    }
}

/// The whole result, as written to JSON.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    pub lesson: String,
    pub model: String,
    pub backend: crate::device::Backend,
    /// On the CPU, the BLAS the Rust loops ran on and the kernels it chose for this CPU
    /// (`OpenBLAS 0.3.34.481.3 (Haswell kernels, 1 thread)`); `-` on a GPU.
    pub blas: String,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub rounds: usize,
    pub ceiling: Ceiling,
    pub loops: Vec<LoopRuns>,
    /// Why the Python peers are missing, when they are.
    pub python_note: Option<String>,
    pub date: String,
}

impl BenchResult {
    /// The loop ratios are against: mlx-lm's own loop when measured, else the Rust hand loop.
    pub fn baseline(&self) -> Option<&LoopRuns> {
        self.loops
            .iter()
            .find(|l| l.id == LoopId::PyGenerate)
            .or_else(|| self.loops.iter().find(|l| l.id == LoopId::RustStarting))
    }

    /// The loop `id`'s rounds, when it ran.
    pub fn find(&self, id: LoopId) -> Option<&LoopRuns> {
        self.loops.iter().find(|l| l.id == id)
    }

    /// The learner's median decode rate on the kernels the library runs (MLX's): their
    /// exercise with quest's kernels off where those ran, else their exercise as it ran;
    /// `None` when neither was measured so. What "faster than the library" compares with
    /// mlx-lm's `generate_step`, so that the learner's loop is compared, not quest's
    /// kernels.
    pub fn same_kernels_tok_s(&self) -> Option<f64> {
        if let Some(mlx) = self.find(LoopId::YoursMlxKernels) {
            return (!mlx.runs.is_empty() && mlx.runs.iter().all(|r| r.quest_kernels.is_empty()))
                .then(|| mlx.summary().median_tok_s);
        }
        let yours = self.find(LoopId::Yours)?;
        (!yours.runs.is_empty() && yours.runs.iter().all(|r| r.quest_kernels.is_empty()))
            .then(|| yours.summary().median_tok_s)
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let base = self.baseline().map(|b| b.summary().median_tok_s);
        let ceiling = self.ceiling.tok_s();
        // The label column as wide as its longest label, so every row lines up.
        let w = self
            .loops
            .iter()
            .map(|l| l.label.chars().count())
            .max()
            .unwrap_or(0)
            .max(34);
        let mut out = format!(
            "{:<w$} {:>9} {:>15} {:>10} {:>8} {:>9}\n",
            "loop", "tok/s", "min–max", "TTFT ms", "ratio", "ceiling"
        );
        for l in &self.loops {
            let s = l.summary();
            let ratio = base.map_or("-".into(), |b| format!("×{:.2}", s.median_tok_s / b));
            out += &format!(
                "{:<w$} {:>9.2} {:>15} {:>10.0} {:>8} {:>8.1}%\n",
                l.label,
                s.median_tok_s,
                format!("{:.2}–{:.2}", s.min_tok_s, s.max_tok_s),
                s.median_ttft_ms,
                ratio,
                100.0 * s.median_tok_s / ceiling
            );
        }
        // Every TTFT above is the prefill's: a Rust loop's fresh process runs its first
        // forward before quest sends the prompt, a Python loop warms up before its rounds.
        let warm: Vec<String> = self
            .loops
            .iter()
            .map(|l| (&l.label, l.summary().median_warm_up_ms))
            .filter(|&(_, warm_up_ms)| warm_up_ms > 0.0)
            .map(|(label, warm_up_ms)| format!("{label} {warm_up_ms:.0} ms"))
            .collect();
        if !warm.is_empty() {
            out += &format!(
                "TTFT is the prefill's in every row: each fresh process's first forward ran before its prompt (median warm-up: {})\n",
                warm.join(", ")
            );
        }
        out
    }
}

/// What a model's caches hold, measured after one token through empty ones: the KV part
/// grows by `kv_per_position` with every token of context; the recurrent state (Qwen3.5's
/// gated delta layers) is `state` bytes whatever the context.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CacheBytes {
    pub kv_per_position: usize,
    pub state: usize,
}

impl CacheBytes {
    /// What one decode step reads from the caches at `context` tokens.
    pub fn at(&self, context: usize) -> usize {
        self.kv_per_position * context + self.state
    }
}

/// `model` with the kernels of a process that warms its graphs up before timing them
/// (every measurement here does: quest's CUDA kernels, compiled in the warm-up, run by
/// default; an exercise's fresh process decides otherwise, see [`crate::kernels`]).
pub fn warmed(model: crate::lm::Model) -> anyhow::Result<crate::lm::Model> {
    model.set_kernels(crate::kernels::Kernels::for_process(
        crate::kernels::Process::Warmed,
    )?);
    Ok(model)
}

pub fn cache_bytes(model: &crate::lm::Model) -> anyhow::Result<CacheBytes> {
    let mut cache = crate::lm::make_prompt_cache(model);
    let logits = model.forward(&crate::lm::tokens_array(&[0]), &mut cache)?;
    mlx_rs::transforms::eval([&logits])?;
    let (kv_per_position, state) = held_bytes(&cache);
    Ok(CacheBytes {
        kv_per_position,
        state,
    })
}

/// The bytes `cache` holds now: (all KV caches, all recurrent states).
pub fn held_bytes(cache: &[crate::lm::LayerCache]) -> (usize, usize) {
    let (mut kv, mut state) = (0, 0);
    for layer in cache {
        match layer {
            crate::lm::LayerCache::Kv(_) => kv += layer.nbytes_used(),
            crate::lm::LayerCache::Recurrent(_) => state += layer.nbytes_used(),
        }
    }
    (kv, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exercise reports each token's own ms; the plot wants their arrival times.
    #[test]
    fn a_reports_token_times_become_arrivals() {
        let report: Report = serde_json::from_value(serde_json::json!({
            "schema": 1, "model": "m", "backend": "cpu", "prompt_tokens": 4,
            "generated_tokens": 3, "load_ms": 1.0, "ttft_ms": 5.0, "decode_tok_s": 10.0,
            "token_ms": [100.0, 110.0], "tokens": [1, 2, 3], "text": "x"
        }))
        .unwrap();
        assert_eq!(Measured::from(report.clone()).token_ms, [0.0, 100.0, 210.0]);
        let unmarked = Report {
            token_ms: Vec::new(),
            ..report
        };
        assert!(Measured::from(unmarked).token_ms.is_empty());
    }

    fn runs(id: LoopId, rates: &[f64], kernels: &[&str]) -> LoopRuns {
        let mut runs = LoopRuns::new(id);
        runs.runs = rates
            .iter()
            .map(|&decode_tok_s| Measured {
                ttft_ms: 10.0,
                decode_tok_s,
                tokens: vec![1, 2],
                token_ms: Vec::new(),
                quest_kernels: kernels.iter().map(|k| (*k).to_owned()).collect(),
                warm_up_ms: 0.0,
            })
            .collect();
        runs
    }

    fn result(loops: Vec<LoopRuns>) -> BenchResult {
        BenchResult {
            lesson: "mlx-path".into(),
            model: "m".into(),
            backend: crate::device::Backend::Cuda,
            blas: "-".into(),
            prompt_tokens: 12,
            max_tokens: 32,
            rounds: 3,
            ceiling: Ceiling {
                weight_bytes: 1,
                kv_bytes: 1,
                bandwidth_gb_s: 1.0,
            },
            loops,
            python_note: None,
            date: String::new(),
        }
    }

    #[test]
    fn the_library_is_beaten_on_its_own_kernels_not_on_quests() {
        let library = runs(LoopId::PyGenerate, &[120.0, 121.0, 119.0], &[]);
        // On CUDA "yours" ran quest's kernels (faster than mlx-lm); the learner's loop on
        // MLX's kernels is what is compared.
        let with_kernels = runs(LoopId::Yours, &[150.0, 151.0, 149.0], &["matvec", "attend"]);
        let mlx = runs(LoopId::YoursMlxKernels, &[110.0, 111.0, 109.0], &[]);
        let gpu = result(vec![with_kernels.clone(), mlx, library.clone()]);
        assert_eq!(gpu.same_kernels_tok_s(), Some(110.0));
        // Without that row, a loop that ran quest's kernels has no same-kernel rate.
        let unmatched = result(vec![with_kernels, library.clone()]);
        assert_eq!(unmatched.same_kernels_tok_s(), None);
        // Off CUDA no kernel of quest's runs: "yours" is already on MLX's kernels.
        let cpu = result(vec![runs(LoopId::Yours, &[30.0, 31.0, 29.0], &[]), library]);
        assert_eq!(cpu.same_kernels_tok_s(), Some(30.0));
    }
}
