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
use quest::lab::Exercise;
use quest::lm;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};

struct Continuous;

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        todo!("both sides padded on the left to the same positions, the rows stacked")
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        todo!("the rows taken, the columns every kept row pads dropped")
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        todo!("admit, step, emit, keep: until every request is finished")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.serve(&model, &tokenizer, &mut Continuous)
}
