//! How a step's next token is drawn from its logits, as mlx-lm's `make_sampler` draws it:
//! the filters (top-p, then min-p, then top-k) on the model's log-probabilities as they
//! are, the temperature only at the draw, one draw from what is left, on the device from a
//! seeded key. A learner's sampler overrides [`Sampler::sample`]; quest's own is its
//! default. [`distribution`] is the same rule computed exactly on the host, in f64: what
//! quest checks a sampler's draws against.
//!
//! ```text
//! struct MySampler;
//! impl Sampler for MySampler {
//!     fn sample(&self, logits: &Array, sampling: &Sampling, draws: i32, key: &Array) -> Result<Array> { … }
//! }
//! run.decode_sampled(&model, &tokenizer, &MySampler) // every step's token is MySampler's draw
//! ```

use anyhow::{Context, Result};
use mlx_rs::ops::indexing::{argmax_axis, IndexOp};
use mlx_rs::ops::{cumsum, logsumexp_axis, max_axis, min_axis, partition_axis, select, sort_axis};
use mlx_rs::Array;

/// What a sampler is asked for (`QUEST_SAMPLING`, e.g.
/// `temperature=0.8,top_p=0.9,min_p=0.05,top_k=20,seed=7`): mlx-lm's `make_sampler`
/// settings, the filters in the order it applies them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// The draw is from `softmax(logprobs / temperature)` over the kept tokens; 0 is greedy
    /// (the argmax). It shapes the draw only: the filters read the model's own probabilities.
    pub temperature: f32,
    /// Keep the nucleus: the smallest set of most likely tokens whose probability reaches
    /// `top_p` (the token that crosses it kept); 1 keeps all.
    pub top_p: f32,
    /// Keep the tokens at least `min_p` times as likely as the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Keep the `top_k` most likely tokens (ties at the k-th kept too); 0 keeps all.
    pub top_k: i32,
    /// The seed of the decode's key: one key per step, split from `mlx_rs::random::key(seed)`.
    pub seed: u64,
}

impl Sampling {
    /// `QUEST_SAMPLING`, or the lesson's default when unset.
    pub fn from_env() -> Result<Self> {
        let setting = &crate::settings::SAMPLING;
        setting
            .value()
            .parse()
            .with_context(|| format!("{} is not a sampling", setting.name))
    }
}

impl std::str::FromStr for Sampling {
    type Err = anyhow::Error;

    /// `temperature=…,top_p=…,min_p=…,top_k=…,seed=…`, each optional (unnamed ones as the
    /// default).
    fn from_str(text: &str) -> Result<Self> {
        let mut sampling: Sampling = crate::settings::SAMPLING
            .default
            .split(',')
            .try_fold(Sampling::GREEDY, |s, part| s.with(part))?;
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            sampling = sampling.with(part)?;
        }
        anyhow::ensure!(
            sampling.temperature >= 0.0 && sampling.temperature.is_finite(),
            "temperature must be 0 or more: {}",
            sampling.temperature
        );
        anyhow::ensure!(
            sampling.top_p > 0.0 && sampling.top_p <= 1.0,
            "top_p must be above 0 and at most 1: {}",
            sampling.top_p
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&sampling.min_p),
            "min_p must be 0 (off) to 1: {}",
            sampling.min_p
        );
        anyhow::ensure!(sampling.top_k >= 0, "top_k must be 0 (off) or more");
        Ok(sampling)
    }
}

impl Sampling {
    const GREEDY: Sampling = Sampling {
        temperature: 0.0,
        top_p: 1.0,
        min_p: 0.0,
        top_k: 0,
        seed: 0,
    };

    fn with(mut self, part: &str) -> Result<Self> {
        let (name, value) = part
            .split_once('=')
            .with_context(|| format!("`{part}`: write name=value"))?;
        let value = value.trim();
        let bad = || format!("`{part}`: not a number");
        match name.trim() {
            "temperature" => self.temperature = value.parse().with_context(bad)?,
            "top_p" => self.top_p = value.parse().with_context(bad)?,
            "min_p" => self.min_p = value.parse().with_context(bad)?,
            "top_k" => self.top_k = value.parse().with_context(bad)?,
            "seed" => self.seed = value.parse().with_context(bad)?,
            other => {
                anyhow::bail!("`{other}`: it takes temperature, top_p, min_p, top_k and seed")
            }
        }
        Ok(self)
    }
}

impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "temperature={},top_p={},min_p={},top_k={},seed={}",
            self.temperature, self.top_p, self.min_p, self.top_k, self.seed
        )
    }
}

/// A decode's sampler: mlx-lm's `make_sampler(temp, top_p, min_p, top_k)` as one call.
pub trait Sampler {
    /// `draws` tokens for each row of `logits` (`[B, vocab]`, float32: one step's, a row a
    /// sequence), each row's drawn independently with `key` (`mlx_rs::random::key`):
    /// `[B, draws]`. The tokens follow [`Sampling`]'s rule: the log-probabilities, the
    /// nucleus of `top_p`, the tokens `min_p` keeps, the `top_k` largest, then a draw from
    /// `softmax(logprobs / temperature)` over what is left. By default quest's, MLX's ops
    /// on the device.
    fn sample(
        &self,
        logits: &Array,
        sampling: &Sampling,
        draws: i32,
        key: &Array,
    ) -> Result<Array> {
        crate::lm::pieces::quest_ran(crate::course::spec::Piece::Sample);
        quest_sample(logits, sampling, draws, key)
    }
}

/// quest's own sampler: every default.
pub struct QuestSampler;

impl Sampler for QuestSampler {}

fn quest_sample(logits: &Array, sampling: &Sampling, draws: i32, key: &Array) -> Result<Array> {
    let vocab = logits.shape()[logits.ndim() - 1];
    if sampling.temperature == 0.0 {
        let best = argmax_axis(logits, -1, true)?;
        let rows = logits.shape()[0];
        return Ok(mlx_rs::ops::broadcast_to(&best, &[rows, draws])?);
    }
    let minus_inf = Array::from_f32(f32::NEG_INFINITY);
    // Every filter reads the model's own probabilities: log-softmax, no temperature.
    let mut logprobs = logits.subtract(logsumexp_axis(logits, -1, true)?)?;
    if sampling.top_p < 1.0 {
        // Sorted ascending, each token's `mass above` is what every more likely one holds;
        // the nucleus is the tokens with less than top_p above them.
        let sorted = sort_axis(&logprobs, -1)?;
        let above = cumsum(sorted.exp()?, -1, true, false)?;
        let kept = select(
            above.lt(Array::from_f32(sampling.top_p))?,
            &sorted,
            Array::from_f32(f32::INFINITY),
        )?;
        let threshold = min_axis(&kept, -1, true)?;
        logprobs = select(logprobs.lt(&threshold)?, &minus_inf, &logprobs)?;
    }
    if sampling.min_p > 0.0 {
        // At least min_p of the most likely token's probability: a difference of logs.
        let floor = max_axis(&logprobs, -1, true)?.add(Array::from_f32(sampling.min_p.ln()))?;
        logprobs = select(logprobs.lt(&floor)?, &minus_inf, &logprobs)?;
    }
    if sampling.top_k > 0 && sampling.top_k < vocab {
        // The k-th largest of each row, as a threshold: a partition, not a sort.
        let at = vocab - sampling.top_k;
        let kth = partition_axis(&logprobs, at, -1)?.index((.., at..at + 1));
        logprobs = select(logprobs.lt(&kth)?, &minus_inf, &logprobs)?;
    }
    // The temperature at the draw, as mlx-lm's `categorical_sampling`.
    let z = logprobs.multiply(Array::from_f32(1.0 / sampling.temperature))?;
    Ok(mlx_rs::random::categorical(
        &z,
        -1,
        mlx_rs::random::ShapeOrCount::Count(draws),
        key,
    )?)
}

/// [`Sampling`]'s rule on one row of logits, exactly, in f64: each token's probability of
/// being drawn (0 for those the filters remove).
pub fn distribution(logits: &[f32], sampling: &Sampling) -> Vec<f64> {
    let mut p = vec![0.0; logits.len()];
    if logits.is_empty() {
        return p;
    }
    if sampling.temperature == 0.0 {
        let best = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        p[best] = 1.0;
        return p;
    }
    let z: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    let mut order: Vec<usize> = (0..z.len()).collect();
    order.sort_by(|&a, &b| z[b].total_cmp(&z[a]));
    let largest = z[order[0]];
    // The model's own probabilities (temperature 1), up to one factor: what the filters read.
    let weight = |i: usize| (z[i] - largest).exp();
    let total: f64 = order.iter().map(|&i| weight(i)).sum();
    // Each filter keeps a prefix of `order`, ties with its last token kept as well; what is
    // left is the shortest of the three prefixes.
    let with_ties = |n: usize| {
        let last = z[order[n - 1]];
        n + order[n..].iter().take_while(|&&i| z[i] >= last).count()
    };
    let mut kept = order.len();
    if sampling.top_p < 1.0 {
        let mut above = 0.0;
        let mut nucleus = 0;
        while nucleus < order.len() && above / total < f64::from(sampling.top_p) {
            above += weight(order[nucleus]);
            nucleus += 1;
        }
        kept = kept.min(with_ties(nucleus));
    }
    if sampling.min_p > 0.0 {
        // weight(i) is p_i / p_max.
        let floor = f64::from(sampling.min_p);
        kept = kept.min(order.iter().take_while(|&&i| weight(i) >= floor).count());
    }
    if sampling.top_k > 0 && (sampling.top_k as usize) < order.len() {
        kept = kept.min(with_ties(sampling.top_k as usize));
    }
    // The draw: softmax(logprobs / temperature) over what is kept.
    let t = f64::from(sampling.temperature);
    let drawn = |i: usize| ((z[i] - largest) / t).exp();
    let total: f64 = order[..kept].iter().map(|&i| drawn(i)).sum();
    for &i in &order[..kept] {
        p[i] = drawn(i) / total;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(temperature: f32, top_k: i32, top_p: f32) -> Sampling {
        Sampling {
            temperature,
            top_p,
            min_p: 0.0,
            top_k,
            seed: 0,
        }
    }

    #[test]
    fn the_rule_on_a_small_row() {
        // Probabilities at temperature 1: 0.5, 0.25, 0.125, 0.125 (as ln weights).
        let logits = [2.0f32.ln(), 1.0f32.ln(), 0.5f32.ln(), 0.5f32.ln()];
        let p = distribution(&logits, &sampling(1.0, 0, 1.0));
        for (got, want) in p.iter().zip([0.5, 0.25, 0.125, 0.125]) {
            assert!((got - want).abs() < 1e-6, "{p:?}");
        }
        // top-k 2: the two largest, renormalized.
        let p = distribution(&logits, &sampling(1.0, 2, 1.0));
        assert!((p[0] - 2.0 / 3.0).abs() < 1e-6 && p[2] == 0.0, "{p:?}");
        // top-p 0.6: 0.5 is under it, so the token that crosses it (0.25) is kept.
        let p = distribution(&logits, &sampling(1.0, 0, 0.6));
        assert!((p[1] - 1.0 / 3.0).abs() < 1e-6 && p[2] == 0.0, "{p:?}");
        // top-p 0.8: 0.75 is under it; the next two tie, and both stay.
        let p = distribution(&logits, &sampling(1.0, 0, 0.8));
        assert!(p[2] > 0.0 && p[3] > 0.0, "{p:?}");
        // Temperature 0.5 squares the weights: 4, 1, 0.25, 0.25 of 5.5.
        let p = distribution(&logits, &sampling(0.5, 0, 1.0));
        assert!((p[0] - 4.0 / 5.5).abs() < 1e-6, "{p:?}");
        // Temperature 0: the argmax.
        assert_eq!(distribution(&logits, &sampling(0.0, 0, 1.0))[0], 1.0);
        // The filters read the model's own probabilities: at temperature 0.5 the first
        // token alone holds 0.73, yet top-p 0.6 keeps the second (0.5 is under 0.6 at
        // temperature 1); the draw is then 4 : 1.
        let p = distribution(&logits, &sampling(0.5, 0, 0.6));
        assert!(
            (p[0] - 0.8).abs() < 1e-6 && (p[1] - 0.2).abs() < 1e-6,
            "{p:?}"
        );
        // min-p 0.3: at least 0.3 of the first token's 0.5 keeps two; 0.2 keeps all four.
        let min_p = |m: f32| Sampling {
            min_p: m,
            ..sampling(1.0, 0, 1.0)
        };
        let p = distribution(&logits, &min_p(0.3));
        assert!((p[0] - 2.0 / 3.0).abs() < 1e-6 && p[2] == 0.0, "{p:?}");
        assert!(distribution(&logits, &min_p(0.2)).iter().all(|&x| x > 0.0));
        // The filters together keep the shortest of their prefixes: top-k 3, top-p 0.6.
        let p = distribution(&logits, &sampling(1.0, 3, 0.6));
        assert!(p[2] == 0.0 && p[1] > 0.0, "{p:?}");
    }

    #[test]
    fn settings_parse_and_refuse() {
        let s: Sampling = "temperature=1.5,top_k=5,top_p=0.5,min_p=0,seed=3"
            .parse()
            .unwrap();
        assert_eq!(s, sampling(1.5, 5, 0.5).seeded(3));
        assert!("top_p=0".parse::<Sampling>().is_err());
        assert!("min_p=1.5".parse::<Sampling>().is_err());
        assert!("temperature=-1".parse::<Sampling>().is_err());
        assert!("warmth=1".parse::<Sampling>().is_err());
        assert_eq!(s.to_string().parse::<Sampling>().unwrap(), s);
    }

    impl Sampling {
        fn seeded(mut self, seed: u64) -> Self {
            self.seed = seed;
            self
        }
    }

    /// quest's device sampler draws what the host's rule says: each token's share of
    /// 20000 draws from one row within 0.015 of its probability, none outside the filters.
    #[test]
    fn quest_sampler_draws_the_rule() {
        let logits: Vec<f32> = (0..64).map(|i| ((i * 37) % 64) as f32 / 9.0).collect();
        let s = Sampling {
            min_p: 0.02,
            ..sampling(0.8, 12, 0.9)
        };
        let p = distribution(&logits, &s);
        let row = Array::from_slice(&logits, &[1, 64]);
        let key = mlx_rs::random::key(7).unwrap();
        let draws = QuestSampler.sample(&row, &s, 20000, &key).unwrap();
        assert_eq!(draws.shape(), &[1, 20000]);
        let draws = draws.as_dtype(mlx_rs::Dtype::Uint32).unwrap();
        let mut counts = [0usize; 64];
        for &t in draws.as_slice::<u32>() {
            counts[t as usize] += 1;
        }
        for (i, (&c, &pi)) in counts.iter().zip(&p).enumerate() {
            let share = c as f64 / 20000.0;
            assert!(
                (share - pi).abs() < 0.015,
                "token {i}: {share} against {pi}"
            );
            if pi == 0.0 {
                assert_eq!(c, 0, "token {i} is filtered out");
            }
        }
    }
}
