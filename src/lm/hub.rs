//! Turning what the user typed (`--model`) into files: a known model name, a GGUF file,
//! an MLX / Hugging Face directory, or a repo id found offline in the Hugging Face cache.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::lm::fetch;

/// Where a model's files are and in which format.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// `config.json` + `*.safetensors` + tokenizer files.
    Directory(PathBuf),
    Gguf(PathBuf),
}

pub fn resolve(spec: &str) -> Result<ModelSource> {
    if spec == fetch::DEFAULT_MODEL {
        return Ok(ModelSource::Gguf(fetch::ensure(&fetch::SMOLLM2)?));
    }
    let path = Path::new(spec);
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "gguf") {
            return Ok(ModelSource::Gguf(path.to_path_buf()));
        }
        bail!("{spec} is a file but not a .gguf; give a GGUF file or a model directory");
    }
    if path.is_dir() {
        return from_dir(path);
    }
    if let Some(snapshot) = hf_cache_snapshot(spec) {
        return from_dir(&snapshot);
    }
    bail!(
        "no model `{spec}`: it is not `{}`, not an existing file or directory, and not a repo id found in \
         the Hugging Face cache ({}). quest works offline: download the model first or give a path",
        fetch::DEFAULT_MODEL,
        hf_hub_dir().display()
    )
}

fn from_dir(dir: &Path) -> Result<ModelSource> {
    if dir.join("config.json").is_file() {
        return Ok(ModelSource::Directory(dir.to_path_buf()));
    }
    let ggufs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    match ggufs.as_slice() {
        [one] => Ok(ModelSource::Gguf(one.clone())),
        [] => bail!(
            "{} has neither a config.json nor a .gguf file",
            dir.display()
        ),
        _ => bail!(
            "{} has several .gguf files; pass the one you want",
            dir.display()
        ),
    }
}

fn hf_hub_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return dir.into();
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Path::new(&home).join("hub");
    }
    dirs::home_dir()
        .unwrap_or_default()
        .join(".cache/huggingface/hub")
}

/// `org/name` → `<hub>/models--org--name/snapshots/<refs/main>` (offline, as huggingface_hub does).
fn hf_cache_snapshot(repo_id: &str) -> Option<PathBuf> {
    let (org, name) = repo_id.split_once('/')?;
    if org.is_empty() || name.is_empty() || name.contains('/') {
        return None;
    }
    let repo = hf_hub_dir().join(format!("models--{org}--{name}"));
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs/main")) {
        let snapshot = repo.join("snapshots").join(rev.trim());
        if snapshot.is_dir() {
            return Some(snapshot);
        }
    }
    // No refs/main: take the newest snapshot.
    std::fs::read_dir(repo.join("snapshots"))
        .ok()?
        .filter_map(|e| e.ok())
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_resolve_in_the_hf_cache() {
        let hub = std::env::temp_dir().join(format!("quest-hub-{}", std::process::id()));
        let snap = hub.join("models--mlx-community--Tiny/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(hub.join("models--mlx-community--Tiny/refs")).unwrap();
        std::fs::write(hub.join("models--mlx-community--Tiny/refs/main"), "abc123").unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        std::env::set_var("HF_HUB_CACHE", &hub);
        assert_eq!(
            resolve("mlx-community/Tiny").unwrap(),
            ModelSource::Directory(snap)
        );
        assert!(resolve("mlx-community/Missing").is_err());
        std::fs::remove_dir_all(hub).unwrap();
    }
}
