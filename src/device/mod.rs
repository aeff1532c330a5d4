//! The machine quest runs on: which MLX backend this build linked and finds here, and
//! (on the CPU) which BLAS serves its matmuls. The bottom room: it depends on nothing
//! else of quest's but the settings table, and every other room may ask it.

pub mod blas;
pub mod graph_commit;

use mlx_rs::Dtype;
use serde::{Deserialize, Serialize};

/// An MLX backend: the one this process's arrays run on ([`Backend::detect`]), the one
/// this build was made for ([`BUILT_FOR`]), the one a report or a benchmark ran on. In
/// files it is its name: `cpu`, `metal`, `cuda`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Metal,
    Cuda,
}

/// The backend this build linked MLX for: `Cuda` (`QUEST_MLX=cuda`) or `Cpu`.
pub const BUILT_FOR: Backend = match env!("QUEST_MLX_BACKEND").as_bytes() {
    b"cuda" => Backend::Cuda,
    _ => Backend::Cpu,
};

/// A CUDA build runs models on the GPU or not at all: where MLX finds no usable NVIDIA
/// GPU it would fall back to its CPU backend unseen, and every number would be a CPU's.
pub fn require_built_backend() -> anyhow::Result<()> {
    if BUILT_FOR == Backend::Cuda && Backend::detect() != Backend::Cuda {
        anyhow::bail!(
            "this quest was built for NVIDIA GPUs (QUEST_MLX=cuda), but MLX finds no usable \
             CUDA GPU on this machine (check `nvidia-smi` and the NVIDIA driver). Build quest \
             without QUEST_MLX=cuda to run on the CPU"
        );
    }
    Ok(())
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Backend {
    /// Asks MLX which GPU backend it was built with, once per process. (Never call
    /// `Stream::gpu()` to find out: on a CPU-only build that exits the process.)
    pub fn detect() -> Self {
        static DETECTED: std::sync::OnceLock<Backend> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            let mut available = false;
            unsafe { mlx_sys::mlx_cuda_is_available(&mut available) };
            if available {
                return Backend::Cuda;
            }
            unsafe { mlx_sys::mlx_metal_is_available(&mut available) };
            if available {
                Backend::Metal
            } else {
                Backend::Cpu
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Metal => "metal",
            Backend::Cuda => "cuda",
        }
    }

    /// How a run's backend is recorded in the progress file and the benchmarks' rows:
    /// `mlx-cpu`, `mlx-cuda`, `mlx-metal`.
    pub fn recorded_name(self) -> String {
        format!("mlx-{}", self.name())
    }

    /// Its kind: the CPU, or a GPU.
    pub fn kind(self) -> BackendKind {
        match self {
            Backend::Cpu => BackendKind::Cpu,
            Backend::Metal | Backend::Cuda => BackendKind::Gpu,
        }
    }

    /// Activations and float weights: float32 on CPU (MLX's CPU bf16 is ~10x slower and
    /// accumulates in bf16), float16 on a GPU.
    pub fn float_dtype(self) -> Dtype {
        match self {
            Backend::Cpu => Dtype::Float32,
            Backend::Metal | Backend::Cuda => Dtype::Float16,
        }
    }
}

/// The bytes this machine can give a new allocation without swapping: `MemAvailable` in
/// /proc/meminfo, or less where a container's memory limit leaves less (cgroup v2's
/// `memory.max` or v1's `memory.limit_in_bytes`, less the container's own process memory,
/// its page cache not counted: the kernel reclaims that); `None` where the OS does not say
/// (not Linux).
pub fn memory_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo_available(&meminfo)?;
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let left = |limit: &str, stat: &str, key: &str| {
        let limit: u64 = read(limit)?.trim().parse().ok()?;
        Some(limit.saturating_sub(stat_value(&read(stat)?, key)?))
    };
    let container = left(
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory.stat",
        "anon",
    )
    .or_else(|| {
        left(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.stat",
            "total_rss",
        )
    });
    // No limit reads `max` (v2) or a number near 2^63 (v1): then MemAvailable is the bound.
    Some(container.map_or(available, |left| left.min(available)))
}

/// A value of a cgroup `memory.stat` (`key value` lines).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Where a lesson's exercise runs at all (its `runs_on`): a kind of backend, or one GPU
/// backend by name. Not a [`Backend`] nor a [`BackendKind`]: a lesson's requirement, which
/// names a set of backends, and may name one vendor's GPU because code can be that
/// vendor's own (a CUDA kernel runs on `cuda`, not on Metal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunsOn {
    Cpu,
    Gpu,
    Cuda,
    Metal,
}

impl RunsOn {
    /// Whether an exercise that runs here runs on `backend`.
    pub fn holds(self, backend: Backend) -> bool {
        match self {
            RunsOn::Cpu => backend == Backend::Cpu,
            RunsOn::Gpu => backend.kind() == BackendKind::Gpu,
            RunsOn::Cuda => backend == Backend::Cuda,
            RunsOn::Metal => backend == Backend::Metal,
        }
    }

    /// Its name in lesson.yaml.
    pub fn key(self) -> &'static str {
        match self {
            RunsOn::Cpu => "cpu",
            RunsOn::Gpu => "gpu",
            RunsOn::Cuda => "cuda",
            RunsOn::Metal => "metal",
        }
    }
}

/// A backend's kind: the CPU, or any GPU (Metal or CUDA). A lesson's `shows_on` names
/// kinds: a speed effect follows the kind of memory and launch cost, not the vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cpu,
    Gpu,
}

impl BackendKind {
    /// Its name in lesson.yaml: `cpu` or `gpu`.
    pub fn key(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:         9000000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(meminfo_available(meminfo), Some(22_000_000 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
        let stat = "cache 6000000000\nrss 1000\ntotal_rss 2048\nanon 4096\n";
        assert_eq!(stat_value(stat, "total_rss"), Some(2048));
        assert_eq!(stat_value(stat, "anon"), Some(4096));
        assert_eq!(stat_value(stat, "anon_thp"), None);
        // This machine says, where it is Linux.
        if cfg!(target_os = "linux") {
            assert!(memory_available().is_some_and(|bytes| bytes > 0));
        }
    }
}
