// continuous-batching: a scheduler that lets requests join and leave a running batch.
// Your task (see the lesson): write `join`, `keep` and `serve`. quest checks `join` and
// `keep` alone first, then serves its trace with your loop.
//
//   join(batch, row): pad the side with fewer positions on the left with zeros, so both
//     span the same positions, and stack the rows (axis 0). Each row's padding grows by
//     the zeros put in front of it.
//
//   keep(batch, rows): take those rows (axis 0); then drop the columns every kept row
//     pads, m = the smallest padding left, and take m from each padding.
//
//   serve(engine, requests): until every request is finished, each round:
//     admit every request that arrived (prefill alone, emit its first token, join it);
//     with no row, wait for the next request; else one step, emit each row's token,
//     keep the rows not finished.

use anyhow::Result;
use mlx_rs::ops::indexing::{take_axis, IndexOp};
use mlx_rs::ops::{concatenate, pad};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};

struct Continuous;

/// `x` (`[rows, heads, positions, dim]`) with `n` zero positions in front.
fn pad_left(x: &Array, n: i32) -> Result<Array> {
    if n == 0 {
        return Ok(x.clone());
    }
    Ok(pad(x, &[(0, 0), (0, 0), (n, 0), (0, 0)], None, None)?)
}

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        if batch.is_empty() {
            return Ok(row);
        }
        let (a, b) = (batch.positions(), row.positions());
        let width = a.max(b);
        let mut layers = Vec::new();
        for ((ka, va), (kb, vb)) in batch.layers().iter().zip(row.layers()) {
            let k = concatenate(&[pad_left(ka, width - a)?, pad_left(&kb, width - b)?], 0)?;
            let v = concatenate(&[pad_left(va, width - a)?, pad_left(&vb, width - b)?], 0)?;
            layers.push((k, v));
        }
        let mut padding: Vec<i32> = batch.padding.iter().map(|p| p + width - a).collect();
        padding.extend(row.padding.iter().map(|p| p + width - b));
        let ids = [batch.ids, row.ids].concat();
        let last = [batch.last, row.last].concat();
        Batch::from_layers(layers, padding, ids, last)
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        if rows.is_empty() {
            return Ok(Batch::empty());
        }
        let index: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let index = Array::from_slice(&index, &[index.len() as i32]);
        let drop = rows.iter().map(|&r| batch.padding[r]).min().unwrap_or(0);
        let mut layers = Vec::new();
        for (k, v) in batch.layers() {
            let k = take_axis(&k, &index, 0)?.index((.., .., drop.., ..));
            let v = take_axis(&v, &index, 0)?.index((.., .., drop.., ..));
            layers.push((k, v));
        }
        let padding = rows.iter().map(|&r| batch.padding[r] - drop).collect();
        let ids = rows.iter().map(|&r| batch.ids[r]).collect();
        let last = rows.iter().map(|&r| batch.last[r]).collect();
        Batch::from_layers(layers, padding, ids, last)
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        let mut batch = Batch::empty();
        while requests.unfinished() > 0 {
            // Admit: each arrived request prefilled alone, then a row of the batch.
            for request in requests.arrived() {
                let row = engine.prefill(&request)?;
                if !requests.emit(request.id, row.last[0])? {
                    batch = self.join(batch, row)?;
                }
            }
            if batch.is_empty() {
                requests.wait();
                continue;
            }
            // Step: one token for every row; finished rows leave.
            let next = engine.step(&mut batch)?;
            let mut going = Vec::new();
            for (row, (&id, &token)) in batch.ids.iter().zip(&next).enumerate() {
                if !requests.emit(id, token)? {
                    going.push(row);
                }
            }
            batch = self.keep(batch, &going)?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.serve(&model, &tokenizer, &mut Continuous)
}
