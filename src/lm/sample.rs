//! How a step's next token is drawn from its logits: temperature, then top-k, then top-p,
//! then one draw from what is left, on the device from a seeded key. A learner's sampler
//! overrides [`Sampler::sample`]; quest's own is its default. [`distribution`] is the same
//! rule computed exactly on the host, in f64: what quest checks a sampler's draws against.
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
use mlx_rs::ops::{cumsum, min_axis, partition_axis, select, softmax_axis, sort_axis};
use mlx_rs::Array;

/// What a sampler is asked for (`QUEST_SAMPLING`, e.g. `temperature=0.8,top_k=20,top_p=0.9,seed=7`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Logits are divided by it before anything else; 0 is greedy (the argmax).
    pub temperature: f32,
    /// Keep the `top_k` largest logits (ties at the k-th kept too); 0 keeps all.
    pub top_k: i32,
    /// Of those, keep the smallest set of most likely tokens whose probability reaches
    /// `top_p` (the token that crosses it kept); 1 keeps all.
    pub top_p: f32,
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

    /// `temperature=…,top_k=…,top_p=…,seed=…`, each optional (unnamed ones as the default).
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
        anyhow::ensure!(sampling.top_k >= 0, "top_k must be 0 (off) or more");
        Ok(sampling)
    }
}

impl Sampling {
    const GREEDY: Sampling = Sampling {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
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
            "top_k" => self.top_k = value.parse().with_context(bad)?,
            "top_p" => self.top_p = value.parse().with_context(bad)?,
            "seed" => self.seed = value.parse().with_context(bad)?,
            other => anyhow::bail!("`{other}`: it takes temperature, top_k, top_p and seed"),
        }
        Ok(self)
    }
}

impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "temperature={},top_k={},top_p={},seed={}",
            self.temperature, self.top_k, self.top_p, self.seed
        )
    }
}

/// A decode's sampler: mlx-lm's `make_sampler(temp, top_p, top_k)` as one call.
pub trait Sampler {
    /// `draws` tokens for each row of `logits` (`[B, vocab]`, float32: one step's, a row a
    /// sequence), each row's drawn independently with `key` (`mlx_rs::random::key`):
    /// `[B, draws]`. The tokens follow [`Sampling`]'s rule: logits divided by the
    /// temperature, the `top_k` largest kept, of them the nucleus of `top_p`, then a draw
    /// from the softmax of what is left. By default quest's, MLX's ops on the device.
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
    let mut z = logits.multiply(Array::from_f32(1.0 / sampling.temperature))?;
    if sampling.top_k > 0 && sampling.top_k < vocab {
        // The k-th largest of each row, as a threshold: a partition, not a sort.
        let at = vocab - sampling.top_k;
        let kth = partition_axis(&z, at, -1)?.index((.., at..at + 1));
        z = select(z.lt(&kth)?, &minus_inf, &z)?;
    }
    if sampling.top_p < 1.0 {
        // Sorted ascending, each token's `mass above` is what every larger one holds; the
        // nucleus is the tokens with less than top_p above them.
        let sorted = sort_axis(&z, -1)?;
        let above = cumsum(softmax_axis(&sorted, -1, true)?, -1, true, false)?;
        let kept = select(
            above.lt(Array::from_f32(sampling.top_p))?,
            &sorted,
            Array::from_f32(f32::INFINITY),
        )?;
        let threshold = min_axis(&kept, -1, true)?;
        z = select(z.lt(&threshold)?, &minus_inf, &z)?;
    }
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
    let z: Vec<f64> = logits
        .iter()
        .map(|&l| f64::from(l) / f64::from(sampling.temperature))
        .collect();
    let mut order: Vec<usize> = (0..z.len()).collect();
    order.sort_by(|&a, &b| z[b].total_cmp(&z[a]));
    let mut kept = order.len();
    if sampling.top_k > 0 && (sampling.top_k as usize) < kept {
        let kth = z[order[sampling.top_k as usize - 1]];
        kept = order.iter().take_while(|&&i| z[i] >= kth).count();
    }
    let largest = z[order[0]];
    let weight = |i: usize| (z[i] - largest).exp();
    if sampling.top_p < 1.0 {
        let total: f64 = order[..kept].iter().map(|&i| weight(i)).sum();
        let mut above = 0.0;
        let mut nucleus = 0;
        while nucleus < kept && above / total < f64::from(sampling.top_p) {
            above += weight(order[nucleus]);
            nucleus += 1;
        }
        // Ties with the last kept token are kept as well.
        let last = z[order[nucleus - 1]];
        kept = nucleus
            + order[nucleus..kept]
                .iter()
                .take_while(|&&i| z[i] >= last)
                .count();
    }
    let total: f64 = order[..kept].iter().map(|&i| weight(i)).sum();
    for &i in &order[..kept] {
        p[i] = weight(i) / total;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(temperature: f32, top_k: i32, top_p: f32) -> Sampling {
        Sampling {
            temperature,
            top_k,
            top_p,
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
    }

    #[test]
    fn settings_parse_and_refuse() {
        let s: Sampling = "temperature=1.5,top_k=5,top_p=0.5,seed=3".parse().unwrap();
        assert_eq!(s, sampling(1.5, 5, 0.5).seeded(3));
        assert!("top_p=0".parse::<Sampling>().is_err());
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
        let s = sampling(0.8, 12, 0.9);
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
