// compile: the MLP's gate, built once instead of on every call.
// Your task (see the lesson): make `swiglu` reuse one compiled function, so that building
// a decode step's graph stops tracing and compiling `silu` again in every layer.
//
// SwiGLU is the feed-forward's gate: silu(gate) · up, with silu(x) = x · sigmoid(x).
// The model calls it once per layer per step, between the up and down projections.

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::error::Exception;
use mlx_rs::transforms::compile::compile;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

type Gate = Box<dyn for<'a> FnMut((&'a Array, &'a Array)) -> Result<Array, Exception>>;

/// silu(gate) · up as one compiled function: traced the first time it is called, and every
/// later call reuses MLX's trace (shapeless: one trace serves every sequence length).
fn compiled_gate() -> Gate {
    Box::new(compile(
        |(gate, up): (&Array, &Array)| gate.multiply(mlx_rs::ops::sigmoid(gate)?)?.multiply(up),
        true,
    ))
}

thread_local! {
    // Made once per thread: MLX's compile cache, like the rest of a stream's work,
    // belongs to the thread that runs the model.
    static GATE: RefCell<Gate> = RefCell::new(compiled_gate());
}

struct MyGate;

impl Pieces for MyGate {
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        Ok(GATE.with(|f| (f.borrow_mut())((gate, up)))?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every layer's gate is MyGate's from here on.
    let model = model.with_pieces(MyGate);
    run.decode(&model, &tokenizer)
}
