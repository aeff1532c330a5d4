//! When MLX's CUDA backend commits a graph (`QUEST_GRAPH_COMMIT`). MLX 0.32.2 records a
//! step's kernels into a CUDA graph and commits it (adds the dependencies, updates or
//! instantiates the executable graph, launches it) when it holds more than 100 nodes or
//! 1000 "MB" of its nodes' inputs (elements, the weights included; compute capability 9.0),
//! and at the end of every `async_eval` (mlx/backend/cuda/device.cpp, `get_graph_limits`;
//! `CommandEncoder::needs_commit`). A decode step with quest's kernels is five nodes a
//! layer, so a Qwen3-8B step is committed about twice under MLX's limits. quest raises both
//! limits, so that a step's graph is committed once, at its `async_eval`: one commit a
//! step costs the host less time a layer (docs/gpu/2026-12-06-qmv-applied/, `commit/`).

use std::sync::OnceLock;

use anyhow::Result;

use super::{Backend, BUILT_FOR};

/// What `QUEST_GRAPH_COMMIT` chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphCommit {
    /// One commit a step: quest raises MLX's limits ([`STEP_LIMITS`]).
    Step,
    /// MLX's own limits.
    Mlx,
}

impl std::str::FromStr for GraphCommit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "step" => Ok(GraphCommit::Step),
            "mlx" => Ok(GraphCommit::Mlx),
            other => Err(format!("unknown choice `{other}`; use step or mlx")),
        }
    }
}

/// MLX's variables and the values that commit a decode step's graph once: far above a
/// step's nodes (five a layer, 36 layers at 8B) and its inputs' elements (Qwen3-8B's
/// weights, 4.7 G bytes, count fewer than 100 000 × 2²⁰ elements).
pub const STEP_LIMITS: [(&str, &str); 2] = [
    ("MLX_MAX_OPS_PER_BUFFER", "1000"),
    ("MLX_MAX_MB_PER_BUFFER", "100000"),
];

static SET_BY_QUEST: OnceLock<Vec<&'static str>> = OnceLock::new();

/// On a CUDA build with `QUEST_GRAPH_COMMIT=step` (the default), sets [`STEP_LIMITS`] for
/// this process and every exercise binary it starts, each unless already set (a value you
/// set is kept). MLX reads them at its first GPU work, so this runs first in `main`, while
/// the process has one thread. A CPU or Metal build sets nothing: Metal reads the same
/// names for its command buffers, where nothing was measured.
pub fn set_for_this_process() -> Result<()> {
    let choice = crate::settings::GRAPH_COMMIT.parse::<GraphCommit>()?;
    let mut set = Vec::new();
    if BUILT_FOR == Backend::Cuda && choice == GraphCommit::Step {
        for (name, value) in STEP_LIMITS {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, value);
                set.push(name);
            }
        }
    }
    let _ = SET_BY_QUEST.set(set);
    Ok(())
}

/// The variables [`set_for_this_process`] set: a Python peer (mlx-lm) runs without them,
/// with MLX's own limits, as a user of mlx-lm runs it.
pub fn set_by_quest() -> &'static [&'static str] {
    SET_BY_QUEST.get().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_takes_its_values_only() {
        assert_eq!("step".parse(), Ok(GraphCommit::Step));
        assert_eq!("mlx".parse(), Ok(GraphCommit::Mlx));
        assert!("once"
            .parse::<GraphCommit>()
            .unwrap_err()
            .contains("use step or mlx"));
    }
}
