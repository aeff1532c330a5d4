//! The Python peer: mlx-lm 0.32.2 on the same MLX, in a venv quest makes itself from PyPI
//! (by package name) the first time, in its cache folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::Measured;

const SCRIPT: &str = include_str!("peer.py");
/// The same MLX as the Rust side; `mlx-cpu` is MLX's Linux CPU build.
const PACKAGES: &[&str] = if cfg!(target_os = "macos") {
    &["mlx==0.32.2", "mlx-lm==0.32.2"]
} else {
    &["mlx==0.32.2", "mlx-cpu==0.32.2", "mlx-lm==0.32.2"]
};

pub struct Peer {
    python: PathBuf,
    script: PathBuf,
}

#[derive(Deserialize)]
struct Output {
    results: std::collections::BTreeMap<String, Vec<Measured>>,
}

impl Peer {
    /// The venv, made (and said so) when missing. Errors say why there is no peer.
    pub fn ensure() -> Result<Self> {
        let dir = crate::lm::fetch::cache_dir()?.join("peer-venv");
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
                "quest: setting up the Python peer ({}) in {} — once, from PyPI",
                PACKAGES.join(" "),
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
                .args(PACKAGES)
                .status()
                .context("could not run pip in the peer venv")?;
            if !status.success() || !ready() {
                bail!(
                    "pip could not install {} (no PyPI access?)",
                    PACKAGES.join(" ")
                );
            }
        }
        let script = dir.join("quest_peer.py");
        std::fs::write(&script, SCRIPT)?;
        Ok(Self { python, script })
    }

    /// One round of the seed's hand loop and mlx-lm's `generate_step`, on `model`
    /// (a GGUF file or an MLX directory).
    pub fn round(
        &self,
        model: &Path,
        prompt_ids: &[u32],
        max_tokens: usize,
        warmup: bool,
    ) -> Result<[Measured; 2]> {
        let ids: Vec<String> = prompt_ids.iter().map(u32::to_string).collect();
        let source_flag = if model.is_dir() {
            "--mlx-dir"
        } else {
            "--gguf"
        };
        let output = Command::new(&self.python)
            .arg(&self.script)
            .arg(source_flag)
            .arg(model)
            .args([
                "--prompt-ids",
                &ids.join(","),
                "--max-tokens",
                &max_tokens.to_string(),
                "--rounds",
                "1",
            ])
            .args(["--warmup", if warmup { "1" } else { "0" }])
            .output()
            .context("could not start the Python peer")?;
        if !output.status.success() {
            bail!(
                "the Python peer failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let mut parsed: Output = serde_json::from_slice(&output.stdout)
            .context("the Python peer's output is not JSON")?;
        let mut take = |name: &str| -> Result<Measured> {
            parsed
                .results
                .remove(name)
                .and_then(|mut runs| runs.pop())
                .with_context(|| format!("no `{name}` result"))
        };
        Ok([take("hand")?, take("generate")?])
    }
}
