//! `quest kernel`: one of quest's CUDA kernels ([`crate::kernels`]: the 4-bit matvec,
//! the decode step's q/k/v heads or attention, the add + norm) against the MLX ops it
//! replaces. One model, both ways:
//! the pipelined loop decodes with each, interleaved round by round; then both decode the
//! same tokens side by side (teacher forcing: each step's input is MLX's greedy token) and
//! their logits are compared at every step, so a disagreement is seen where it starts, not
//! after it has changed the rest of the text.

use anyhow::{bail, Result};
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::{Array, Dtype};
use serde::Serialize;

use super::{loops, Measured};
use crate::device::Backend;
use crate::kernels::{Impl, Kernel, Kernels, Process};
use crate::lm::{self, Model};
use crate::stats::median;

/// One model, with MLX's ops and with quest's kernel.
#[derive(Debug, Serialize)]
pub struct KernelPoint {
    pub model: String,
    /// Which of quest's kernels ([`Kernel::name`]).
    pub kernel: String,
    pub bytes_per_token: u64,
    pub mlx_tok_s: f64,
    pub quest_tok_s: f64,
    pub mlx: Vec<Measured>,
    pub quest: Vec<Measured>,
    /// Largest relative L2 difference of the two kernels' logits over the compared steps.
    pub max_logits_rel_diff: f64,
    /// Steps where both kernels pick the same greedy token, of `steps`.
    pub same_argmax: usize,
    pub steps: usize,
    /// Whether the pipelined runs of both kernels produced the same tokens.
    pub same_tokens: bool,
}

impl KernelPoint {
    pub fn ratio(&self) -> f64 {
        self.quest_tok_s / self.mlx_tok_s
    }
}

pub struct KernelOptions {
    pub kernel: Kernel,
    pub max_tokens: usize,
    pub rounds: usize,
}

/// Measures `model` (already loaded, quantized) both ways on `prompt`.
pub fn compare(
    name: &str,
    model: &Model,
    prompt: &[u32],
    options: &KernelOptions,
) -> Result<KernelPoint> {
    if Backend::detect() != Backend::Cuda {
        bail!(
            "`quest kernel` compares CUDA kernels; this build runs MLX on the {} (build with \
             QUEST_MLX=cuda on a machine with an NVIDIA GPU)",
            Backend::detect().name()
        );
    }
    let kv = super::cache_bytes(model)?.at(prompt.len() + options.max_tokens / 2);
    let bytes_per_token = (model.weight_bytes() + kv) as u64;
    let kernel = options.kernel;
    // Both ways are set in turn below; what was chosen before is put back at the end.
    let chosen = model.kernels();
    let warmed = Kernels::for_process(Process::Warmed)?;
    let set = |choice| model.set_kernels(warmed.with(kernel, choice));
    for choice in [Impl::Mlx, Impl::Quest] {
        set(choice); // warm-up: each kernel is compiled on its first use
        loops::pipelined(model, &prompt[..2.min(prompt.len())], 3)?;
    }
    let (mut mlx, mut quest) = (Vec::new(), Vec::new());
    // After each switch a short run first: MLX caches the CUDA graphs of a step, and the
    // other kernel's step is another graph, so the first run after a switch pays for
    // building it (docs/gpu/2026-12-01-qmv-uncentred/).
    let settle = options.max_tokens.min(8);
    for _ in 0..options.rounds {
        for (choice, runs) in [(Impl::Mlx, &mut mlx), (Impl::Quest, &mut quest)] {
            set(choice);
            loops::pipelined(model, prompt, settle)?;
            runs.push(loops::pipelined(model, prompt, options.max_tokens)?);
        }
    }
    let rate = |runs: &[Measured]| median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
    let same_tokens = mlx.iter().chain(&quest).all(|r| r.tokens == mlx[0].tokens);
    let (max_logits_rel_diff, same_argmax, steps) =
        side_by_side(kernel, model, prompt, &mlx[0].tokens)?;
    model.set_kernels(chosen);
    Ok(KernelPoint {
        model: name.into(),
        kernel: kernel.name().into(),
        bytes_per_token,
        mlx_tok_s: rate(&mlx),
        quest_tok_s: rate(&quest),
        mlx,
        quest,
        max_logits_rel_diff,
        same_argmax,
        steps,
        same_tokens,
    })
}

/// Both ways decode `tokens` (after the prompt) in two caches; returns the largest
/// relative L2 difference of their logits, and at how many steps their argmax agree.
fn side_by_side(
    kernel: Kernel,
    model: &Model,
    prompt: &[u32],
    tokens: &[u32],
) -> Result<(f64, usize, usize)> {
    let mut caches = [lm::make_prompt_cache(model), lm::make_prompt_cache(model)];
    // The prompt is many positions: MLX's ops either way (quest's kernels are for decode).
    for cache in &mut caches {
        model.forward(&lm::tokens_array(prompt), cache)?;
    }
    let warmed = Kernels::for_process(Process::Warmed)?;
    let (mut worst, mut agree) = (0.0f64, 0);
    let steps = tokens.len().saturating_sub(1);
    for &token in &tokens[..steps] {
        let input = lm::tokens_array(&[token]);
        let mut logits = Vec::new();
        for (choice, cache) in [Impl::Mlx, Impl::Quest].into_iter().zip(&mut caches) {
            model.set_kernels(warmed.with(kernel, choice));
            let l = lm::last_position(&model.forward(&input, cache)?)
                .as_dtype(Dtype::Float32)?
                .reshape(&[-1])?;
            let pick: Array = argmax_axis(&l, -1, None)?;
            let values = l
                .try_as_slice::<f32>()
                .map_err(|e| anyhow::anyhow!("reading the logits: {e}"))?
                .to_vec();
            logits.push((values, pick.item_exact::<u32>()));
        }
        let (a, b) = (&logits[0].0, &logits[1].0);
        let diff: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
            .sum();
        let norm: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum();
        worst = worst.max((diff / norm.max(1e-30)).sqrt());
        agree += usize::from(logits[0].1 == logits[1].1);
    }
    Ok((worst, agree, steps))
}

/// The comparison as a table.
pub fn table(points: &[KernelPoint]) -> String {
    let mut out = format!(
        "{:<22} {:>7} {:>9} {:>11} {:>12} {:>7} {:>14} {:>11} {:>11}\n",
        "model",
        "kernel",
        "MB/token",
        "MLX tok/s",
        "quest tok/s",
        "ratio",
        "logits Δ (rel)",
        "same argmax",
        "same tokens"
    );
    for p in points {
        out += &format!(
            "{:<22} {:>7} {:>9.1} {:>11.2} {:>12.2} {:>7} {:>14.2e} {:>11} {:>11}\n",
            p.model,
            p.kernel,
            p.bytes_per_token as f64 / 1e6,
            p.mlx_tok_s,
            p.quest_tok_s,
            format!("×{:.2}", p.ratio()),
            p.max_logits_rel_diff,
            format!("{}/{}", p.same_argmax, p.steps),
            if p.same_tokens { "yes" } else { "no" }
        );
    }
    out += "\npipelined loop, medians of interleaved rounds (MLX's ops, then quest's kernel); logits compared step by step on MLX's greedy tokens\n";
    out
}
