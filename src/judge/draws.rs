//! A sampler judged by what it draws. Two honest samplers draw different tokens from the
//! same key, so tokens cannot be compared; what must agree is the distribution. quest draws
//! from the exact distribution ([`crate::lm::sample::distribution`]) as often as the learner's
//! sampler did, many times over, to learn how far honest draws land from it; the learner's
//! draws may land no further than that, plus the lesson's tolerance.

use std::collections::BTreeMap;

/// One step's draws against that step's distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDraws {
    pub step: usize,
    /// Total variation distance of the draws' shares from the probabilities: half the sum
    /// of |share − probability| over the vocabulary (0: the same, 1: disjoint).
    pub distance: f64,
    /// What honest draws of as many tokens average there.
    pub honest: f64,
    /// The share of draws on tokens the filters remove.
    pub outside: f64,
    /// The token drawn most above its probability, its share and its probability.
    pub token: u32,
    pub share: f64,
    pub probability: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DrawsVerdict {
    /// The run wrote no draws, or not one row a step.
    Missing { steps: usize, expected: usize },
    /// `distance`: the draws' mean distance over the steps; `honest` what honest draws
    /// average, `spread` its standard deviation from one set of honest draws to another.
    Within {
        distance: f64,
        honest: f64,
        spread: f64,
    },
    Beyond {
        distance: f64,
        honest: f64,
        spread: f64,
        worst: StepDraws,
    },
}

/// How many sets of honest draws quest makes to learn their distance.
const HONEST_SETS: usize = 16;

/// Judges `draws` (each step's tokens) against `expected` (each step's probabilities over
/// the vocabulary): refused when their mean distance is more than `tolerance` above what
/// honest draws average. `seed` seeds quest's own honest draws.
pub fn draws_compared(
    expected: &[Vec<f64>],
    draws: &[Vec<u32>],
    tolerance: f64,
    seed: u64,
) -> DrawsVerdict {
    if expected.is_empty()
        || draws.len() != expected.len()
        || draws.iter().any(|step| step.is_empty())
    {
        return DrawsVerdict::Missing {
            steps: draws.len(),
            expected: expected.len(),
        };
    }
    let mut random = SplitMix(seed);
    let mut sets = vec![0.0; HONEST_SETS];
    let mut steps = Vec::with_capacity(expected.len());
    for (step, (p, drawn)) in expected.iter().zip(draws).enumerate() {
        let honest_draws = Cumulative::of(p);
        let mut honest = 0.0;
        for set in &mut sets {
            let tokens: Vec<u32> = (0..drawn.len())
                .map(|_| honest_draws.draw(random.next_f64()))
                .collect();
            let d = step_draws(step, p, &tokens, 0.0).distance;
            *set += d / expected.len() as f64;
            honest += d / HONEST_SETS as f64;
        }
        steps.push(step_draws(step, p, drawn, honest));
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let honest = mean(&sets);
    let spread =
        (sets.iter().map(|s| (s - honest).powi(2)).sum::<f64>() / (sets.len() - 1) as f64).sqrt();
    let distances: Vec<f64> = steps.iter().map(|s| s.distance).collect();
    let distance = mean(&distances);
    if distance - honest <= tolerance {
        return DrawsVerdict::Within {
            distance,
            honest,
            spread,
        };
    }
    let worst = steps
        .into_iter()
        .max_by(|a, b| (a.distance - a.honest).total_cmp(&(b.distance - b.honest)))
        .expect("one step at least");
    DrawsVerdict::Beyond {
        distance,
        honest,
        spread,
        worst,
    }
}

fn step_draws(step: usize, p: &[f64], drawn: &[u32], honest: f64) -> StepDraws {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for &token in drawn {
        *counts.entry(token).or_default() += 1;
    }
    let n = drawn.len() as f64;
    let probability = |token: u32| p.get(token as usize).copied().unwrap_or(0.0);
    // Tokens never drawn count their whole probability.
    let undrawn: f64 = p
        .iter()
        .enumerate()
        .filter(|(i, _)| !counts.contains_key(&(*i as u32)))
        .map(|(_, q)| q)
        .sum();
    let mut total = undrawn;
    let (mut outside, mut token, mut most) = (0.0, drawn[0], f64::NEG_INFINITY);
    for (&t, &c) in &counts {
        let (share, q) = (c as f64 / n, probability(t));
        total += (share - q).abs();
        if q == 0.0 {
            outside += share;
        }
        if share - q > most {
            (token, most) = (t, share - q);
        }
    }
    StepDraws {
        step,
        distance: total / 2.0,
        honest,
        outside,
        token,
        share: counts[&token] as f64 / n,
        probability: probability(token),
    }
}

/// A distribution's tokens with their running sums, to draw from with one uniform number.
struct Cumulative {
    tokens: Vec<u32>,
    sums: Vec<f64>,
}

impl Cumulative {
    fn of(p: &[f64]) -> Self {
        let (mut tokens, mut sums, mut sum) = (Vec::new(), Vec::new(), 0.0);
        for (i, &q) in p.iter().enumerate().filter(|(_, q)| **q > 0.0) {
            sum += q;
            tokens.push(i as u32);
            sums.push(sum);
        }
        Cumulative { tokens, sums }
    }

    fn draw(&self, u: f64) -> u32 {
        let total = self.sums.last().copied().unwrap_or(0.0);
        let at = self.sums.partition_point(|&s| s <= u * total);
        self.tokens[at.min(self.tokens.len() - 1)]
    }
}

/// SplitMix64: a small, seeded source of uniform numbers for quest's honest draws.
struct SplitMix(u64);

impl SplitMix {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn honest(p: &[f64], n: usize, seed: u64) -> Vec<u32> {
        let (c, mut r) = (Cumulative::of(p), SplitMix(seed));
        (0..n).map(|_| c.draw(r.next_f64())).collect()
    }

    fn steps() -> Vec<Vec<f64>> {
        vec![
            vec![0.5, 0.3, 0.2, 0.0],
            vec![0.9, 0.05, 0.05, 0.0],
            vec![0.25, 0.25, 0.25, 0.25],
        ]
    }

    #[test]
    fn honest_draws_pass_and_their_distance_is_measured() {
        let p = steps();
        let draws: Vec<Vec<u32>> = p.iter().map(|p| honest(p, 1000, 99)).collect();
        match draws_compared(&p, &draws, 0.01, 1) {
            DrawsVerdict::Within {
                distance,
                honest,
                spread,
            } => {
                assert!(distance > 0.0 && honest > 0.0 && spread > 0.0);
                assert!((distance - honest).abs() < 5.0 * spread + 0.01);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn draws_from_another_distribution_are_refused_with_the_step() {
        let p = steps();
        // Step 1 drawn from a flatter distribution (a temperature forgotten), and a token
        // the filters remove drawn.
        let mut wrong = p.clone();
        wrong[1] = vec![0.6, 0.15, 0.15, 0.1];
        let draws: Vec<Vec<u32>> = wrong.iter().map(|p| honest(p, 1000, 5)).collect();
        match draws_compared(&p, &draws, 0.02, 1) {
            DrawsVerdict::Beyond { worst, .. } => {
                assert_eq!(worst.step, 1);
                assert!((worst.outside - 0.1).abs() < 0.03, "{worst:?}");
                assert!(worst.distance > 0.25, "{worst:?}");
                assert_ne!(worst.token, 0, "{worst:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_draws_are_missing() {
        let p = steps();
        assert_eq!(
            draws_compared(&p, &[], 0.01, 1),
            DrawsVerdict::Missing {
                steps: 0,
                expected: 3
            }
        );
    }
}
