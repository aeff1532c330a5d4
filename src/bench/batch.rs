//! `quest batch`: what a decode step costs as the batch grows. One step reads every
//! weight once whatever the batch, so where the bytes set the time, B sequences cost
//! about one step; where the arithmetic does, about B. Each size runs the lesson's loop
//! (the prompt broadcast to B rows, prefill, then one `[B, 1]` step per token with the
//! tokens read to the host), interleaved round by round after a warm-up, as medians.

use std::time::Instant;

use anyhow::{ensure, Result};
use mlx_rs::ops::broadcast_to;
use serde::Serialize;

use super::loops::next_token;
use crate::lm::{self, Model};
use crate::stats::median;

/// One model's decode at one batch size, one round.
#[derive(Clone, Debug, Serialize)]
pub struct BatchRun {
    pub ttft_ms: f64,
    /// Tokens after the first, every row counted, over the time after the first.
    pub total_tok_s: f64,
    /// Row 0's tokens.
    pub tokens: Vec<u32>,
    /// Whether every row wrote row 0's tokens (the rows hold the same prompt).
    pub rows_agree: bool,
}

/// Every round of one batch size.
#[derive(Clone, Debug, Serialize)]
pub struct BatchPoint {
    pub batch: usize,
    pub runs: Vec<BatchRun>,
}

impl BatchPoint {
    pub fn median_total_tok_s(&self) -> f64 {
        median(&self.runs.iter().map(|r| r.total_tok_s).collect::<Vec<_>>())
    }
    pub fn median_per_seq_tok_s(&self) -> f64 {
        self.median_total_tok_s() / self.batch as f64
    }
    /// Milliseconds of one decode step (one token for every row).
    pub fn ms_per_step(&self) -> f64 {
        1e3 / self.median_per_seq_tok_s()
    }
}

/// One model at every batch size.
#[derive(Clone, Debug, Serialize)]
pub struct ModelBatches {
    /// A model name or path, or a random-weights shape (`random:<shape>`).
    pub model: String,
    /// How the matrices were held (`dense-f32`, `quantized`, …).
    pub weights: String,
    pub weight_bytes: u64,
    pub prompt_tokens: usize,
    pub points: Vec<BatchPoint>,
    /// Whether row 0 wrote the batch-1 tokens in every run of every size.
    pub row0_as_batch1: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct BatchResult {
    pub backend: crate::device::Backend,
    pub blas: String,
    pub max_tokens: usize,
    pub rounds: usize,
    pub date: String,
    pub models: Vec<ModelBatches>,
}

/// A model to measure, loaded, with the prompt it decodes from.
pub struct Subject {
    pub name: String,
    pub model: Model,
    pub prompt: Vec<u32>,
}

pub struct BatchOptions {
    pub batches: Vec<usize>,
    pub max_tokens: usize,
    pub rounds: usize,
}

/// The lesson's loop at batch `batch`: the prompt broadcast to `batch` rows, prefill,
/// then `max_tokens - 1` steps of `[batch, 1]`, each step's tokens read to the host.
/// Returns the run and every row's tokens.
pub fn decode(
    model: &Model,
    prompt: &[u32],
    batch: usize,
    max_tokens: usize,
) -> Result<(BatchRun, Vec<Vec<u32>>)> {
    ensure!(batch > 0, "a batch holds at least one sequence");
    let b = batch as i32;
    let mut cache = lm::make_prompt_cache(model);
    let start = Instant::now();
    let input = broadcast_to(lm::tokens_array(prompt), &[b, prompt.len() as i32])?;
    let mut y = next_token(model, &input, &mut cache)?;
    let mut rows: Vec<Vec<u32>> = vec![Vec::with_capacity(max_tokens); batch];
    let take = |y: &mlx_rs::Array, rows: &mut Vec<Vec<u32>>| {
        for (row, &token) in rows.iter_mut().zip(y.as_slice::<u32>()) {
            row.push(token);
        }
    };
    take(&y, &mut rows);
    let first = Instant::now();
    for _ in 1..max_tokens {
        y = next_token(model, &y.reshape(&[b, 1])?, &mut cache)?;
        take(&y, &mut rows);
    }
    let decode_s = first.elapsed().as_secs_f64();
    let steps = max_tokens.saturating_sub(1);
    let run = BatchRun {
        ttft_ms: (first - start).as_secs_f64() * 1e3,
        total_tok_s: if steps > 0 {
            (steps * batch) as f64 / decode_s
        } else {
            0.0
        },
        tokens: rows[0].clone(),
        rows_agree: rows.iter().all(|row| *row == rows[0]),
    };
    Ok((run, rows))
}

/// Every subject at every batch size: a short warm-up each, then `rounds` rounds, the
/// sizes in turn (the order reversed every other round).
pub fn run(
    subjects: &[Subject],
    options: &BatchOptions,
    mut progress: impl FnMut(&str),
) -> Result<Vec<ModelBatches>> {
    ensure!(
        !options.batches.is_empty() && options.batches.iter().all(|&b| b > 0),
        "batch sizes are whole numbers of sequences, at least 1"
    );
    let mut out = Vec::new();
    for subject in subjects {
        progress(&format!(
            "{}: warm-up, then {} rounds at batch {:?}",
            subject.name, options.rounds, options.batches
        ));
        for &batch in &options.batches {
            decode(&subject.model, &subject.prompt, batch, 4)?;
        }
        let mut points: Vec<BatchPoint> = options
            .batches
            .iter()
            .map(|&batch| BatchPoint {
                batch,
                runs: Vec::new(),
            })
            .collect();
        for round in 0..options.rounds {
            let mut order: Vec<usize> = (0..points.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut line = Vec::new();
            for i in order {
                let (run, _) = decode(
                    &subject.model,
                    &subject.prompt,
                    points[i].batch,
                    options.max_tokens,
                )?;
                line.push(format!(
                    "B={} {:.2} tok/s",
                    points[i].batch, run.total_tok_s
                ));
                points[i].runs.push(run);
            }
            progress(&format!("  round {}: {}", round + 1, line.join(", ")));
        }
        // Batch 1's tokens, from a run of its own when 1 was not among the sizes.
        let single = match points.iter().find(|p| p.batch == 1) {
            Some(point) => point.runs[0].tokens.clone(),
            None => {
                decode(&subject.model, &subject.prompt, 1, options.max_tokens)?
                    .0
                    .tokens
            }
        };
        let row0_as_batch1 = points
            .iter()
            .flat_map(|p| &p.runs)
            .all(|run| run.tokens == single && run.rows_agree);
        out.push(ModelBatches {
            model: subject.name.clone(),
            weights: subject.model.layout.name(),
            weight_bytes: subject.model.weight_bytes() as u64,
            prompt_tokens: subject.prompt.len(),
            points,
            row0_as_batch1,
        });
    }
    Ok(out)
}

impl BatchResult {
    /// Medians per model and batch size; the step's cost against batch 1's.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} tokens per row, {} rounds, {} ({}); medians (min–max of total tok/s)\n\n",
            self.max_tokens, self.rounds, self.backend, self.blas
        );
        out.push_str(&format!(
            "{:<28} {:>5} {:>24} {:>14} {:>12} {:>14}\n",
            "model", "batch", "total tok/s", "tok/s per seq", "ms per step", "step vs B=1"
        ));
        for m in &self.models {
            let base = m
                .points
                .iter()
                .find(|p| p.batch == 1)
                .map(BatchPoint::ms_per_step);
            for p in &m.points {
                let totals: Vec<f64> = p.runs.iter().map(|r| r.total_tok_s).collect();
                let (lo, hi) = (
                    totals.iter().copied().fold(f64::INFINITY, f64::min),
                    totals.iter().copied().fold(0.0, f64::max),
                );
                let versus = base.map_or_else(
                    || "-".to_owned(),
                    |b| format!("×{:.2}", p.ms_per_step() / b),
                );
                out.push_str(&format!(
                    "{:<28} {:>5} {:>24} {:>14.2} {:>12.1} {:>14}\n",
                    m.model,
                    p.batch,
                    format!("{:.2} ({:.2}–{:.2})", p.median_total_tok_s(), lo, hi),
                    p.median_per_seq_tok_s(),
                    p.ms_per_step(),
                    versus
                ));
            }
            out.push_str(&format!(
                "  {} weights, {:.0} MB per step, {}-token prompt; row 0 {} the batch-1 tokens\n",
                m.weights,
                m.weight_bytes as f64 / 1e6,
                m.prompt_tokens,
                if m.row0_as_batch1 {
                    "wrote"
                } else {
                    "did NOT always write"
                }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::random;

    #[test]
    fn every_row_of_a_broadcast_batch_writes_the_single_sequence_tokens() {
        let model = random::model(&random::tiny_llama(), 0).unwrap();
        let prompt: Vec<u32> = random::prompt(5).iter().map(|t| t % 256).collect();
        let (single, _) = decode(&model, &prompt, 1, 6).unwrap();
        let (three, rows) = decode(&model, &prompt, 3, 6).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(three.rows_agree);
        assert_eq!(three.tokens, single.tokens);
        assert!(three.total_tok_s > 0.0);
        let subjects = [Subject {
            name: "tiny".into(),
            model,
            prompt,
        }];
        let options = BatchOptions {
            batches: vec![2, 1],
            max_tokens: 3,
            rounds: 2,
        };
        let result = run(&subjects, &options, |_| {}).unwrap();
        assert!(result[0].row0_as_batch1);
        assert_eq!(result[0].points[0].runs.len(), 2);
        let zero = BatchOptions {
            batches: vec![0],
            ..options
        };
        assert!(run(&subjects, &zero, |_| {}).is_err());
    }
}
