// continuous-batching: a learner's own scheduler, unlike the solution: `join` builds the
// padding with `zeros` and concatenates on the positions' axis; `keep` takes the rows and
// keeps every column (no trim); `serve` admits in a `loop` with an explicit end.

use anyhow::Result;
use mlx_rs::ops::indexing::take_axis;
use mlx_rs::ops::{concatenate, zeros_dtype};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};

struct Continuous;

/// `n` zero positions in front of `x`, `[rows, heads, positions, dim]`.
fn widen(x: &Array, n: i32) -> Result<Array> {
    if n == 0 {
        return Ok(x.clone());
    }
    let s = x.shape();
    let zeros = zeros_dtype(&[s[0], s[1], n, s[3]], x.dtype())?;
    Ok(concatenate(&[zeros, x.clone()], 2)?)
}

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        if batch.rows() == 0 {
            return Ok(row);
        }
        let target = batch.positions().max(row.positions());
        let grow_batch = target - batch.positions();
        let grow_row = target - row.positions();
        let layers = batch
            .layers()
            .into_iter()
            .zip(row.layers())
            .map(|((k0, v0), (k1, v1))| {
                Ok((
                    concatenate(&[widen(&k0, grow_batch)?, widen(&k1, grow_row)?], 0)?,
                    concatenate(&[widen(&v0, grow_batch)?, widen(&v1, grow_row)?], 0)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut padding = Vec::new();
        for p in &batch.padding {
            padding.push(p + grow_batch);
        }
        for p in &row.padding {
            padding.push(p + grow_row);
        }
        let mut ids = batch.ids.clone();
        ids.extend(&row.ids);
        let mut last = batch.last.clone();
        last.extend(&row.last);
        Batch::from_layers(layers, padding, ids, last)
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        if rows.is_empty() {
            return Ok(Batch::empty());
        }
        let which = Array::from_slice(
            &rows.iter().map(|&r| r as i32).collect::<Vec<i32>>(),
            &[rows.len() as i32],
        );
        let mut layers = Vec::new();
        for (k, v) in batch.layers() {
            layers.push((take_axis(&k, &which, 0)?, take_axis(&v, &which, 0)?));
        }
        Batch::from_layers(
            layers,
            rows.iter().map(|&r| batch.padding[r]).collect(),
            rows.iter().map(|&r| batch.ids[r]).collect(),
            rows.iter().map(|&r| batch.last[r]).collect(),
        )
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        let mut batch = Batch::empty();
        loop {
            for request in requests.arrived() {
                let row = engine.prefill(&request)?;
                let finished = requests.emit(request.id, row.last[0])?;
                if !finished {
                    batch = self.join(batch, row)?;
                }
            }
            if batch.rows() == 0 {
                if requests.unfinished() == 0 {
                    return Ok(());
                }
                requests.wait();
                continue;
            }
            let tokens = engine.step(&mut batch)?;
            let mut stay = Vec::new();
            for r in 0..batch.rows() {
                if !requests.emit(batch.ids[r], tokens[r])? {
                    stay.push(r);
                }
            }
            batch = self.keep(batch, &stay)?;
        }
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.serve(&model, &tokenizer, &mut Continuous)
}
