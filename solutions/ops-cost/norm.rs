// ops-cost: the same norm in fewer ops, and what the host saves.
// Your task (see the lesson): compile the norm once, so that each of its calls puts fewer
// ops in the step's graph for the host to build and schedule.
//
// RMSNorm: x · rsqrt(mean(x²) + eps) · weight, over the last axis. The model calls it
// twice in every layer and once before the head: 61 times a step in SmolLM2-135M.

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::error::Exception;
use mlx_rs::transforms::compile::compile;
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::{self, Pieces};

struct MyNorm;

type Norm = Box<dyn for<'a> FnMut((&'a Array, &'a Array, &'a Array)) -> Result<Array, Exception>>;

/// The norm as one compiled function: MLX traces it once per input shape and afterwards
/// replays it with its element-wise ops fused. eps is an input, so one function serves
/// every norm whatever its eps.
fn compiled_norm() -> Norm {
    Box::new(compile(
        |(x, weight, eps): (&Array, &Array, &Array)| {
            let mean_square = x.square()?.mean_axis(-1, true)?;
            let inverse_rms = mean_square.add(eps)?.rsqrt()?;
            x.multiply(&inverse_rms)?.multiply(weight)
        },
        false,
    ))
}

thread_local! {
    // Made once per thread: MLX's compile cache belongs to the thread that runs the model.
    static NORM: RefCell<Norm> = RefCell::new(compiled_norm());
}

impl Pieces for MyNorm {
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        let eps = Array::from_f32(eps);
        Ok(NORM.with(|f| (f.borrow_mut())((x, weight, &eps)))?)
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    // Every norm of every layer, and the final one, is MyNorm's from here on.
    let model = model.with_pieces(MyNorm);
    // The loop, then the ops of one decode step counted and the host's µs per op here.
    run.decode_counting_ops(&model, &tokenizer)
}
