//! The lesson's two loops in-process, for `quest fit` (random-weights models of any
//! size, where building an exercise per shape would be pointless): the hand loop with a
//! host sync per token, and the pipelined loop with none until the end.

use std::time::Instant;

use anyhow::Result;
use mlx_rs::ops::indexing::argmax_axis;
use mlx_rs::transforms::async_eval;
use mlx_rs::Array;
use serde::Serialize;

use super::Measured;
use crate::lm::{self, Model};

/// One forward pass and the greedy choice from its last position, lazily.
pub fn next_token(model: &Model, input: &Array, cache: &mut [lm::LayerCache]) -> Result<Array> {
    let logits = model.forward(input, cache)?;
    Ok(argmax_axis(lm::last_position(&logits), -1, None)?)
}

/// Prefill, then one forward pass and one `.item()` per token.
pub fn hand(model: &Model, prompt: &[u32], n: usize) -> Result<Measured> {
    let mut cache = lm::make_prompt_cache(model);
    let start = Instant::now();
    let mut y = next_token(model, &lm::tokens_array(prompt), &mut cache)?;
    let mut tokens = vec![y.item_exact::<u32>()];
    let first = Instant::now();
    let mut token_ms = vec![0.0];
    for _ in 1..n {
        y = next_token(model, &y.reshape(&[1, 1])?, &mut cache)?;
        tokens.push(y.item_exact::<u32>());
        token_ms.push(first.elapsed().as_secs_f64() * 1e3);
    }
    Ok(measured(start, first, tokens, token_ms))
}

/// Prefill, then each step queued with `async_eval` from the still-lazy previous token;
/// the tokens are read once, at the end.
pub fn pipelined(model: &Model, prompt: &[u32], n: usize) -> Result<Measured> {
    let mut cache = lm::make_prompt_cache(model);
    let start = Instant::now();
    let y = next_token(model, &lm::tokens_array(prompt), &mut cache)?;
    let (tokens, first) = pipelined_from(model, &mut cache, y, n)?;
    Ok(measured(start, first, tokens, Vec::new()))
}

/// The pipelined decode from a filled cache and the token last sampled into it (`y`):
/// `y` is read, then `n - 1` steps are queued and their tokens read at the end.
/// Returns the `n` tokens and when `y` was on the host, where decode timing starts.
pub fn pipelined_from(
    model: &Model,
    cache: &mut [lm::LayerCache],
    mut y: Array,
    n: usize,
) -> Result<(Vec<u32>, Instant)> {
    let mut tokens = vec![y.item_exact::<u32>()];
    let first = Instant::now();
    let mut pending = Vec::with_capacity(n);
    for _ in 1..n {
        y = next_token(model, &y.reshape(&[1, 1])?, cache)?;
        async_eval([&y])?;
        pending.push(y.clone());
    }
    tokens.extend(pending.iter().map(|t| t.item_exact::<u32>()));
    Ok((tokens, first))
}

/// Where the host's time goes in the pipelined loop, per decoded token: building the
/// step's graph (`model.forward` and the argmax, lazily: no kernel runs), and
/// `async_eval` (MLX turning that graph into kernels and queueing them). `wall_ms` is the
/// whole decode time per token, the wait for the last tokens included: where it is about
/// `build_ms + eval_ms`, the host is the bottleneck; where it is larger, the device is.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostSplit {
    pub build_ms: f64,
    pub eval_ms: f64,
    pub wall_ms: f64,
}

impl HostSplit {
    /// The run whose host time (`build_ms + eval_ms`) is the median of `runs` (the lower
    /// of the middle two for an even count): one run's split, so its parts add up.
    pub fn median_run(runs: &[HostSplit]) -> HostSplit {
        let mut sorted = runs.to_vec();
        sorted.sort_by(|a, b| (a.build_ms + a.eval_ms).total_cmp(&(b.build_ms + b.eval_ms)));
        sorted
            .get(sorted.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or_default()
    }
}

/// The pipelined loop once more, with the host's time split (see [`HostSplit`]).
pub fn pipelined_split(model: &Model, prompt: &[u32], n: usize) -> Result<HostSplit> {
    let mut cache = lm::make_prompt_cache(model);
    let mut y = next_token(model, &lm::tokens_array(prompt), &mut cache)?;
    y.item_exact::<u32>();
    let first = Instant::now();
    let (mut build, mut eval) = (0.0, 0.0);
    let mut pending = Vec::with_capacity(n);
    for _ in 1..n {
        let t0 = Instant::now();
        y = next_token(model, &y.reshape(&[1, 1])?, &mut cache)?;
        let t1 = Instant::now();
        async_eval([&y])?;
        build += (t1 - t0).as_secs_f64();
        eval += t1.elapsed().as_secs_f64();
        pending.push(y.clone());
    }
    for t in &pending {
        t.item_exact::<u32>();
    }
    let steps = n.saturating_sub(1).max(1) as f64;
    Ok(HostSplit {
        build_ms: build * 1e3 / steps,
        eval_ms: eval * 1e3 / steps,
        wall_ms: first.elapsed().as_secs_f64() * 1e3 / steps,
    })
}

/// Decode rate over the tokens after the first (timed from `first`), TTFT up to `first`.
pub fn measured(start: Instant, first: Instant, tokens: Vec<u32>, token_ms: Vec<f64>) -> Measured {
    let decode_s = first.elapsed().as_secs_f64();
    let n = tokens.len();
    Measured {
        ttft_ms: (first - start).as_secs_f64() * 1e3,
        decode_tok_s: if n > 1 {
            (n - 1) as f64 / decode_s
        } else {
            0.0
        },
        tokens,
        token_ms,
        quest_kernels: Vec::new(),
        warm_up_ms: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::random;

    #[test]
    fn the_median_host_split_is_one_runs_whole_split() {
        let run = |build_ms: f64, eval_ms: f64| HostSplit {
            build_ms,
            eval_ms,
            wall_ms: build_ms + eval_ms + 1.0,
        };
        // Host time 3, 10, 5: the median run is the one with 5, taken whole.
        let runs = [run(1.0, 2.0), run(9.0, 1.0), run(1.0, 4.0)];
        let median = HostSplit::median_run(&runs);
        assert_eq!(
            (median.build_ms, median.eval_ms, median.wall_ms),
            (1.0, 4.0, 6.0)
        );
        // Four runs: the lower middle one; none: zeros.
        let four = [run(1.0, 2.0), run(9.0, 1.0), run(1.0, 4.0), run(2.0, 5.0)];
        assert_eq!(HostSplit::median_run(&four).eval_ms, 4.0);
        assert_eq!(HostSplit::median_run(&[]).wall_ms, 0.0);
    }

    #[test]
    fn the_host_split_is_timed_and_the_loops_agree() {
        let model = random::model(&random::tiny_llama(), 0).unwrap();
        let prompt: Vec<u32> = random::prompt(4).iter().map(|t| t % 256).collect();
        let split = pipelined_split(&model, &prompt, 5).unwrap();
        assert!(split.build_ms > 0.0 && split.eval_ms > 0.0, "{split:?}");
        // The whole decode includes the host's part of it.
        assert!(split.wall_ms >= split.build_ms + split.eval_ms, "{split:?}");
        let hand = hand(&model, &prompt, 5).unwrap();
        let pipelined = pipelined(&model, &prompt, 5).unwrap();
        assert_eq!(hand.tokens, pipelined.tokens);
    }
}
