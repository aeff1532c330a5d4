//! What one op costs the host: how many ops a graph holds ([`graph_ops`]) and how long
//! this backend takes per op ([`host_cost_per_op`]). The fixed term of a decode step is
//! mostly the one times the other.

use std::time::Instant;

use anyhow::{ensure, Result};
use mlx_rs::Array;

/// The ops (primitives) of the graph that computes `outputs`, not yet evaluated: each
/// node MLX would run, counted once however many outputs it has (a split's parts are one
/// op). Inputs — weights, the cache's evaluated arrays, constants — are not ops. Read off
/// MLX's own graph export (`export_to_dot`), so it counts what MLX records, fused ops and
/// compiled functions as one node each.
pub fn graph_ops(outputs: &[&Array]) -> Result<usize> {
    Ok(graph_op_kinds(outputs)?.values().sum())
}

/// [`graph_ops`] by kind: each op's name as MLX prints it (`Multiply`, `RMSNorm`, …) and
/// how many of it the graph holds.
pub fn graph_op_kinds(outputs: &[&Array]) -> Result<std::collections::BTreeMap<String, usize>> {
    let dot = export_to_dot(outputs)?;
    // Each op is a line `{ <primitive> [label ="<name>", shape=rectangle]; }`, its input
    // arrows, then its outputs `<primitive> -> "<array>"`. The primitive's address is no
    // name for the op: a compiled function's every call shares one primitive. Its first
    // output's name is; an op seen again through another of its outputs counts once.
    let mut ops: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    let mut open: Option<(String, String)> = None; // (primitive, label) awaiting its output
    for line in dot.lines() {
        if line.contains("shape=rectangle") {
            let rest = line.trim_start_matches("{ ");
            let primitive = rest.split(' ').next().unwrap_or_default().to_owned();
            let label = rest.split('"').nth(1).unwrap_or_default().to_owned();
            open = Some((primitive, label));
        } else if let Some((primitive, label)) = &open {
            if let Some(output) = line.strip_prefix(&format!("{primitive} -> ")) {
                ops.entry(output.to_owned())
                    .or_insert_with(|| label.clone());
                open = None;
            }
        }
    }
    let mut kinds = std::collections::BTreeMap::new();
    for label in ops.values() {
        *kinds.entry(label.clone()).or_insert(0) += 1;
    }
    Ok(kinds)
}

/// MLX's dot text of the graph of `outputs`.
pub fn export_to_dot(outputs: &[&Array]) -> Result<String> {
    let raw: Vec<mlx_sys::mlx_array> = outputs.iter().map(|a| a.as_ptr()).collect();
    let mut buffer: *mut libc::c_char = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: the vector and namer are freed below on every path; the memory stream's
    // buffer is valid after fclose and freed once copied.
    unsafe {
        let vector = mlx_sys::mlx_vector_array_new_data(raw.as_ptr(), raw.len());
        let namer = mlx_sys::mlx_node_namer_new();
        let stream = libc::open_memstream(&mut buffer, &mut size);
        let status = if stream.is_null() {
            1
        } else {
            let status = mlx_sys::mlx_export_to_dot(stream.cast(), namer, vector);
            libc::fclose(stream);
            status
        };
        mlx_sys::mlx_node_namer_free(namer);
        mlx_sys::mlx_vector_array_free(vector);
        let text = if buffer.is_null() {
            String::new()
        } else {
            let bytes = std::slice::from_raw_parts(buffer.cast::<u8>(), size);
            let text = String::from_utf8_lossy(bytes).into_owned();
            libc::free(buffer.cast());
            text
        };
        ensure!(status == 0, "MLX could not export the graph");
        Ok(text)
    }
}

/// The host's cost of one op on this backend, measured: chains of `n` cheap element-wise
/// ops (`x · 1`) on a 16-float array, each built and evaluated, timed for several `n`
/// in interleaved rounds; the slope of the median time against `n` is the time one more
/// op adds (building it, scheduling it, running a kernel that does almost nothing).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct OpCost {
    /// µs per op: the fitted slope.
    pub us_per_op: f64,
    /// µs of a chain of no op (the fit's intercept: an eval's own cost).
    pub us_fixed: f64,
    /// (ops in the chain, median µs) for each length measured.
    pub points: Vec<(usize, f64)>,
}

/// Chain lengths [`host_cost_per_op`] measures, and its rounds.
const CHAIN_OPS: [usize; 4] = [50, 100, 200, 400];
const CHAIN_ROUNDS: usize = 9;

/// Measures [`OpCost`] on the default device (a warm-up chain first).
pub fn host_cost_per_op() -> Result<OpCost> {
    let one = Array::from_f32(1.0);
    let chain = |n: usize| -> Result<f64> {
        let x = Array::from_slice(&[1.0f32; 16], &[1, 16]);
        x.eval()?;
        let at = Instant::now();
        let mut y = x;
        for _ in 0..n {
            y = y.multiply(&one)?;
        }
        y.eval()?;
        Ok(at.elapsed().as_secs_f64() * 1e6)
    };
    chain(CHAIN_OPS[CHAIN_OPS.len() - 1])?;
    let mut times = vec![Vec::new(); CHAIN_OPS.len()];
    for _ in 0..CHAIN_ROUNDS {
        for (i, &n) in CHAIN_OPS.iter().enumerate() {
            times[i].push(chain(n)?);
        }
    }
    let points: Vec<(usize, f64)> = CHAIN_OPS
        .iter()
        .zip(&times)
        .map(|(&n, t)| (n, crate::stats::median(t)))
        .collect();
    let line: Vec<(f64, f64)> = points.iter().map(|&(n, t)| (n as f64, t)).collect();
    let (us_fixed, us_per_op) = crate::stats::least_squares(&line);
    Ok(OpCost {
        us_per_op,
        us_fixed,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_ops_counts_the_primitives_of_a_times_b_plus_c() {
        let a = Array::from_slice(&[1.0f32, 2.0], &[2]);
        let b = Array::from_slice(&[3.0f32, 4.0], &[2]);
        let c = Array::from_slice(&[5.0f32, 6.0], &[2]);
        let y = a.multiply(&b).unwrap().add(&c).unwrap();
        assert_eq!(graph_ops(&[&y]).unwrap(), 2);
        // A split is one op whatever its parts; both parts given count it once.
        let parts = mlx_rs::ops::split_equal(&y, 2, 0).unwrap();
        assert_eq!(graph_ops(&[&parts[0], &parts[1]]).unwrap(), 3);
        // A compiled function's calls share one primitive, and are an op each.
        let gate = crate::lm::models::activations::swiglu(&y, &a).unwrap();
        let twice = crate::lm::models::activations::swiglu(&gate, &b).unwrap();
        assert_eq!(graph_ops(&[&twice]).unwrap(), 4);
        // An evaluated array is an input: nothing left to run.
        y.eval().unwrap();
        assert_eq!(graph_ops(&[&y]).unwrap(), 0);
    }

    #[test]
    fn host_cost_per_op_is_a_positive_slope() {
        let cost = host_cost_per_op().unwrap();
        assert!(cost.us_per_op > 0.0, "{cost:?}");
        assert_eq!(cost.points.len(), CHAIN_OPS.len());
    }
}
