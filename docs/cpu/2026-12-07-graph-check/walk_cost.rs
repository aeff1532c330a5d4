// The graph check's cost: how long quest's walk (`quest::lm::graph::names`) takes on what
// it reads, built as an exercise is (`measure.sh` builds it through the lab) and run on
// this CPU. Three graphs:
//  - `seam`: one norm's output in a decode step, as `lm::pieces::Counted` walks it: the
//    rms-norm solution's ops over an input with 30 layers' worth of graph above it, the walk
//    stopping at the call's inputs;
//  - `check`: the piece check's walk of one row, no stops: the norm over its random inputs;
//  - `fused`: MLX's fused norm (its CPU fallback, the last node renamed), stops at inputs.
// Each is walked 2,000 times after 200 untimed; the median of 9 rounds of the mean, µs.
use std::time::Instant;

use anyhow::Result;
use mlx_rs::Array;
use quest::lm::graph;

fn norm(x: &Array, weight: &Array, eps: f32) -> Result<Array> {
    let mean_square = x.square()?.mean_axis(-1, true)?;
    let inverse_rms = mean_square.add(Array::from_f32(eps))?.rsqrt()?;
    Ok(x.multiply(&inverse_rms)?.multiply(weight)?)
}

fn random(shape: &[i32], seed: u64) -> Result<Array> {
    let key = mlx_rs::random::key(seed)?;
    Ok(mlx_rs::random::normal::<f32>(shape, None, None, &key)?)
}

fn time(label: &str, out: &Array, stops: &[&Array]) -> Result<()> {
    let nodes = graph::names(out, stops)?.len();
    for _ in 0..200 {
        graph::names(out, stops)?;
    }
    let mut rounds = Vec::new();
    for _ in 0..9 {
        let at = Instant::now();
        for _ in 0..2000 {
            graph::names(out, stops)?;
        }
        rounds.push(at.elapsed().as_secs_f64() * 1e6 / 2000.0);
    }
    rounds.sort_by(f64::total_cmp);
    println!(
        "{label}: {nodes} nodes listed, {:.2} µs a walk (median of 9; min {:.2}, max {:.2})",
        rounds[4], rounds[0], rounds[8]
    );
    Ok(())
}

fn main() -> Result<()> {
    let weight = random(&[576], 2)?;
    // 30 layers' worth of lazy graph above the input (a matmul and a residual add each).
    let w = random(&[576, 576], 3)?.multiply(Array::from_f32(0.04))?;
    w.eval()?;
    let mut h = random(&[1, 1, 576], 4)?;
    for _ in 0..30 {
        h = h.add(mlx_rs::ops::matmul(norm(&h, &weight, 1e-5)?, &w)?)?;
    }
    let out = norm(&h, &weight, 1e-5)?;
    time("seam", &out, &[&h, &weight])?;
    let x = random(&[1, 7, 576], 5)?;
    let checked = norm(&x, &weight, 1e-5)?;
    time("check", &checked, &[])?;
    let fused = mlx_rs::fast::rms_norm(&h, Some(&weight), 1e-5)?;
    time("fused", &fused, &[&h, &weight])?;
    Ok(())
}
