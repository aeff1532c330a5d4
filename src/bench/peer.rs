//! The Python peer: mlx-lm 0.32.2 on the same MLX, in a venv quest makes itself from PyPI
//! (by package name) the first time, in its cache folder.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::Measured;

const SCRIPT: &str = include_str!("peer.py");
/// The same MLX as the Rust side; `mlx-cpu` is MLX's Linux CPU build, `mlx-cuda-13` its
/// CUDA build (what a `QUEST_MLX=cuda` quest links).
fn packages() -> &'static [&'static str] {
    if cfg!(target_os = "macos") {
        &["mlx==0.32.2", "mlx-lm==0.32.2"]
    } else if crate::device::BUILT_FOR == crate::device::Backend::Cuda {
        &["mlx==0.32.2", "mlx-cuda-13==0.32.2", "mlx-lm==0.32.2"]
    } else {
        &["mlx==0.32.2", "mlx-cpu==0.32.2", "mlx-lm==0.32.2"]
    }
}

/// `QUEST_PEER_PYTHON`: a Python that already imports mlx 0.32.2 and mlx_lm 0.32.2 (on
/// the same MLX build as quest), used instead of the venv: for a machine without PyPI.
pub const PEER_PYTHON_ENV: &str = crate::settings::PEER_PYTHON.name;

/// What the peer decodes: a model file or folder, or a random-weights model's config
/// (built by the peer itself: the same shape, its own random values).
pub enum PeerModel {
    Path(PathBuf),
    Config(serde_json::Value),
}

#[derive(Deserialize)]
struct Output {
    results: std::collections::BTreeMap<String, Vec<Measured>>,
}

impl Output {
    /// The last round of loop `name`.
    fn take(&mut self, name: &str) -> Result<Measured> {
        self.results
            .remove(name)
            .and_then(|mut runs| runs.pop())
            .with_context(|| format!("no `{name}` result"))
    }
}

/// Which MLX the peer's venv runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerBuild {
    /// The same BLAS as this quest build (OpenBLAS put under the wheel as the Rust side
    /// has it), so the side-by-side compares loops, not BLAS libraries.
    Matched,
    /// `pip install mlx-cpu` as it comes: the wheel's reference BLAS.
    Stock,
}

pub struct Peer {
    python: PathBuf,
    script: PathBuf,
    /// `OPENBLAS_NUM_THREADS` for the peer: the Rust side's thread count.
    threads: Option<usize>,
}

impl Peer {
    /// The venv, made (and said so) when missing. Errors say why there is no peer.
    pub fn ensure() -> Result<Self> {
        Self::ensure_build(PeerBuild::Matched)
    }

    pub fn ensure_build(build: PeerBuild) -> Result<Self> {
        crate::device::blas::init()?;
        if let Some(python) = crate::settings::PEER_PYTHON.os() {
            return Self::given(PathBuf::from(python));
        }
        let openblas = match build {
            PeerBuild::Matched => build_openblas()?,
            PeerBuild::Stock => None,
        };
        let name = match &openblas {
            Some(_) => format!("peer-venv-{}", crate::device::blas::BUILT_WITH),
            None => "peer-venv".to_owned(),
        };
        let dir = crate::settings::cache_dir()?.join(name);
        let python = dir.join("bin/python");
        let ready = || {
            Command::new(&python)
                .args([
                    "-c",
                    "import mlx.core as mx, mlx_lm; assert mx.__version__ == '0.32.2'",
                ])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !ready() {
            eprintln!(
                "quest: setting up the Python peer ({}{}) in {} — once, from PyPI",
                packages().join(" "),
                if openblas.is_some() {
                    ", on OpenBLAS"
                } else {
                    ""
                },
                dir.display()
            );
            let status = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .status();
            if !matches!(status, Ok(s) if s.success()) {
                bail!("python3 -m venv failed (is Python 3 with venv installed?)");
            }
            let status = Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages())
                .status()
                .context("could not run pip in the peer venv")?;
            if !status.success() {
                bail!(
                    "pip could not install {} (no PyPI access?)",
                    packages().join(" ")
                );
            }
            if let Some(lib) = &openblas {
                patch_venv(&python, lib)?;
            }
            if !ready() {
                bail!(
                    "the peer venv {} does not import mlx 0.32.2 and mlx_lm; delete it to make it again",
                    dir.display()
                );
            }
        }
        let script = dir.join("quest_peer.py");
        std::fs::write(&script, SCRIPT)?;
        let threads = openblas.and_then(|_| crate::device::blas::threads());
        Ok(Self {
            python,
            script,
            threads,
        })
    }

    /// The peer on a Python the user gave (`QUEST_PEER_PYTHON`), checked like the venv.
    fn given(python: PathBuf) -> Result<Self> {
        let ok = Command::new(&python)
            .args([
                "-c",
                "import mlx.core as mx, mlx_lm; assert mx.__version__ == '0.32.2'",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        anyhow::ensure!(
            ok,
            "{PEER_PYTHON_ENV}={} does not import mlx 0.32.2 and mlx_lm; install them there \
             ({}) or unset {PEER_PYTHON_ENV} to let quest make its own venv",
            python.display(),
            packages().join(" ")
        );
        let script = std::env::temp_dir().join(format!("quest_peer_{}.py", std::process::id()));
        std::fs::write(&script, SCRIPT)?;
        // The Rust side's OpenBLAS thread count, as for the venv: left to OpenBLAS's default
        // (every core), a peer on OpenBLAS would run mlx-lm with more threads than quest and
        // compare unlike work (a Python on another BLAS ignores it).
        Ok(Self {
            python,
            script,
            threads: crate::device::blas::threads(),
        })
    }

    /// One round of the original lesson's Python hand loop and mlx-lm's `generate_step`, on `model`
    /// (a GGUF file or an MLX directory), in the weight layout the Rust side ran.
    pub fn round(
        &self,
        model: &PeerModel,
        prompt_ids: &[u32],
        max_tokens: usize,
        warmup: bool,
        weights: &str,
    ) -> Result<[Measured; 2]> {
        let mut runs = self.run(&Ask {
            model,
            prompt_ids,
            max_tokens,
            warmup,
            weights,
            loops: "hand,generate",
        })?;
        let generate = runs.pop().context("no `generate` result")?;
        let hand = runs.pop().context("no `hand` result")?;
        Ok([hand, generate])
    }

    /// One round of `generate_step` alone, quantized weights (mlx-lm's own layout).
    pub fn round_generate(
        &self,
        model: &PeerModel,
        prompt_ids: &[u32],
        max_tokens: usize,
        warmup: bool,
    ) -> Result<Measured> {
        let mut runs = self.run(&Ask {
            model,
            prompt_ids,
            max_tokens,
            warmup,
            weights: "quantized",
            loops: "generate",
        })?;
        runs.pop().context("no `generate` result")
    }

    /// mlx-lm's `generate_step` on `model` (`weights`: `quantized` or `dense`) in a process
    /// that stays up: [`PeerSession::round`] runs one round when asked, so its rounds can
    /// be interleaved with the Rust side's in one run, each side's model made once.
    pub fn serve_generate(
        &self,
        model: &PeerModel,
        prompt_ids: &[u32],
        max_tokens: usize,
        weights: &str,
    ) -> Result<PeerSession> {
        let mut command = self.command(&Ask {
            model,
            prompt_ids,
            max_tokens,
            warmup: true,
            weights,
            loops: "generate",
        });
        command
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().context("could not start the Python peer")?;
        let stdin = child.stdin.take().context("the Python peer has no stdin")?;
        let stdout = BufReader::new(
            child
                .stdout
                .take()
                .context("the Python peer has no stdout")?,
        );
        let mut session = PeerSession {
            child,
            stdin: Some(stdin),
            stdout,
        };
        let ready = session.line()?;
        anyhow::ensure!(
            ready.contains("\"ready\""),
            "the Python peer did not start: {ready}"
        );
        Ok(session)
    }

    fn command(&self, ask: &Ask) -> Command {
        let Ask {
            model,
            prompt_ids,
            max_tokens,
            warmup,
            weights,
            loops,
        } = *ask;
        let ids: Vec<String> = prompt_ids.iter().map(u32::to_string).collect();
        let mut command = Command::new(&self.python);
        command.arg(&self.script);
        match model {
            PeerModel::Path(path) if path.is_dir() => command.arg("--mlx-dir").arg(path),
            PeerModel::Path(path) => command.arg("--gguf").arg(path),
            PeerModel::Config(config) => command.arg("--config").arg(config.to_string()),
        };
        command
            .args([
                "--prompt-ids",
                &ids.join(","),
                "--max-tokens",
                &max_tokens.to_string(),
                "--rounds",
                "1",
            ])
            .args(["--warmup", if warmup { "1" } else { "0" }])
            .args(["--weights", weights, "--loops", loops]);
        if let Some(n) = self.threads {
            command.env("OPENBLAS_NUM_THREADS", n.to_string());
        }
        // mlx-lm as its users run it: with MLX's own limits on a CUDA graph.
        for name in crate::device::graph_commit::set_by_quest() {
            command.env_remove(name);
        }
        command
    }

    fn run(&self, ask: &Ask) -> Result<Vec<Measured>> {
        let output = self
            .command(ask)
            .output()
            .context("could not start the Python peer")?;
        let said = String::from_utf8_lossy(&output.stderr);
        if let Some(killed) = crate::lab::runner::Killed::from_status(
            crate::lab::runner::Program::PythonPeer,
            &output.status,
            &said,
        ) {
            bail!(killed);
        }
        if !output.status.success() {
            bail!(
                "the Python peer failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let mut parsed: Output = serde_json::from_slice(&output.stdout)
            .context("the Python peer's output is not JSON")?;
        ask.loops.split(',').map(|name| parsed.take(name)).collect()
    }
}

/// What the peer is asked to run: `loops` (`hand`, `generate`) on `model` in `weights`.
#[derive(Clone, Copy)]
struct Ask<'a> {
    model: &'a PeerModel,
    prompt_ids: &'a [u32],
    max_tokens: usize,
    warmup: bool,
    weights: &'a str,
    loops: &'a str,
}

/// A Python peer that stays up between rounds ([`Peer::serve_generate`]); dropping it
/// ends the process.
pub struct PeerSession {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl PeerSession {
    /// One round of `generate_step`, now.
    pub fn round(&mut self) -> Result<Measured> {
        let stdin = self.stdin.as_mut().context("the Python peer was closed")?;
        writeln!(stdin, "round")
            .and_then(|_| stdin.flush())
            .context("the Python peer stopped (see its error above)")?;
        let line = self.line()?;
        let mut parsed: Output =
            serde_json::from_str(&line).context("the Python peer's output is not JSON")?;
        parsed.take("generate")
    }

    fn line(&mut self) -> Result<String> {
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .context("reading the Python peer")?;
        if n == 0 {
            // Its stderr went to the terminal; the signal, if one ended it, is said here.
            if let Ok(status) = self.child.wait() {
                if let Some(killed) = crate::lab::runner::Killed::from_status(
                    crate::lab::runner::Program::PythonPeer,
                    &status,
                    "",
                ) {
                    bail!(killed);
                }
            }
            bail!("the Python peer ended early (see its error above)");
        }
        Ok(line)
    }
}

impl Drop for PeerSession {
    fn drop(&mut self) {
        // Closing stdin ends its loop; then it is waited for, so no process is left behind.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The files that make this build's OpenBLAS in its patched copy of the wheel (the
/// forwarding library first, then OpenBLAS itself), when the Rust side runs on OpenBLAS.
fn build_openblas() -> Result<Option<Vec<PathBuf>>> {
    if !crate::device::blas::BUILT_WITH.starts_with("openblas-") {
        return Ok(None);
    }
    let libs = Path::new(env!("QUEST_MLX_LIBDIR")).join("../../mlx_cpu.libs");
    let files: Vec<PathBuf> = env!("QUEST_MLX_BLAS_FILES")
        .split_whitespace()
        .map(|name| libs.join(name))
        .collect();
    anyhow::ensure!(
        !files.is_empty(),
        "this quest was built on OpenBLAS, but its build did not say which files make it; rebuild quest (cargo build)"
    );
    for file in &files {
        anyhow::ensure!(
            file.is_file(),
            "this quest was built on OpenBLAS, but {} is gone; rebuild quest (cargo build)",
            file.display()
        );
    }
    Ok(Some(files))
}

/// Puts OpenBLAS under the venv's mlx-cpu exactly as the build does under its copy of the
/// wheel (vendor/mlx-sys/PATCHES.md): the forwarding library and OpenBLAS in
/// `mlx_cpu.libs`, the wheel's libblas/liblapack names as symlinks to the forwarding
/// library (the venv's libmlx is the same wheel's, so it imports the same symbols).
fn patch_venv(python: &Path, openblas: &[PathBuf]) -> Result<()> {
    let out = Command::new(python)
        .args([
            "-c",
            "import mlx, os; print(os.path.join(os.path.dirname(mlx.__path__[0]), 'mlx_cpu.libs'))",
        ])
        .output()
        .context("could not ask the peer venv where mlx is")?;
    let libs = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let names: Vec<String> = std::fs::read_dir(&libs)
        .with_context(|| format!("the peer venv has no {}", libs.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let find = |prefix: &str| {
        names
            .iter()
            .find(|n| n.starts_with(prefix) && n.contains(".so"))
            .cloned()
            .with_context(|| format!("{} has no {prefix}*.so", libs.display()))
    };
    let (blas, lapack) = (find("libblas-")?, find("liblapack-")?);
    for file in openblas {
        std::fs::copy(file, libs.join(file.file_name().unwrap()))?;
    }
    let forwarding = openblas[0].file_name().unwrap();
    for name in [&blas, &lapack] {
        std::fs::remove_file(libs.join(name))?;
        std::os::unix::fs::symlink(forwarding, libs.join(name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for peer.py that speaks the same `--serve` protocol: a ready line, then one
    /// JSON line per `round`, until stdin closes. It counts rounds in tok/s.
    const FAKE: &str = r#"
import json, sys
assert "--serve" in sys.argv and "--config" in sys.argv
print(json.dumps({"ready": True}), flush=True)
n = 0
for line in sys.stdin:
    if line.strip() != "round":
        break
    n += 1
    print(json.dumps({"results": {"generate": [{"ttft_ms": 1.0, "decode_tok_s": float(n), "tokens": [n]}]}}), flush=True)
"#;

    fn fake_peer(script: &str) -> (tempfile::TempDir, Peer) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer.py");
        std::fs::write(&path, script).unwrap();
        let peer = Peer {
            python: PathBuf::from("python3"),
            script: path,
            threads: None,
        };
        (dir, peer)
    }

    #[test]
    fn a_served_peer_runs_one_round_per_request() {
        let (_dir, peer) = fake_peer(FAKE);
        let model = PeerModel::Config(serde_json::json!({"model_type": "llama"}));
        let mut session = peer
            .serve_generate(&model, &[1, 2, 3], 8, "quantized")
            .unwrap();
        let rates: Vec<f64> = (0..3)
            .map(|_| session.round().unwrap().decode_tok_s)
            .collect();
        assert_eq!(rates, [1.0, 2.0, 3.0]);
        drop(session); // closes stdin and waits: the fake's loop ends
    }

    #[test]
    fn a_peer_that_fails_to_start_says_so() {
        let (_dir, peer) = fake_peer("import sys; sys.exit('no mlx here')");
        let model = PeerModel::Config(serde_json::json!({}));
        let err = peer
            .serve_generate(&model, &[1], 8, "quantized")
            .err()
            .expect("a peer that exits is an error");
        assert!(format!("{err:#}").contains("ended early"), "{err:#}");
    }
}
