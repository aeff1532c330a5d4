//! Every CUDA kernel of quest's compiles as quest compiles it itself (`kernels::precompiled`),
//! here, without a GPU: `quest dev kernels --nvrtc` through NVRTC from PyPI, the same wheels
//! MLX's CUDA build brings (pinned to the versions `mlx-cuda-13==0.32.2` resolved to), for
//! the H200's architecture and an older one. A kernel that does not compile is found before
//! a device carry, and the CUDA build's first run would otherwise only say "MLX compiles it
//! from its source".

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::text;

const WHEELS: &[&str] = &["nvidia-cuda-nvrtc==13.5.37", "nvidia-cuda-runtime==13.5.37"];

/// NVRTC and the CUDA headers, unpacked once into the test target's folder; `None` (said
/// why) when pip cannot fetch them.
fn nvrtc() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvrtc-13.5.37");
    let lib = root.join("nvidia/cu13/lib/libnvrtc.so.13");
    if lib.is_file() && root.join("nvidia/cu13/include/cuda_fp16.h").is_file() {
        return Some(lib);
    }
    let download = root.with_extension("download");
    let _ = std::fs::remove_dir_all(&download);
    let fetched = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
        ])
        .arg(&download)
        .args(WHEELS)
        .status()
        .is_ok_and(|s| s.success());
    if !fetched {
        return None;
    }
    let staging = root.with_extension("staging");
    let _ = std::fs::remove_dir_all(&staging);
    for wheel in std::fs::read_dir(&download).unwrap().flatten() {
        let ok = Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(wheel.path())
            .arg(&staging)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "could not unpack {}", wheel.path().display());
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&staging, &root).unwrap();
    let _ = std::fs::remove_dir_all(&download);
    Some(lib)
}

#[test]
fn every_kernel_compiles_as_quest_compiles_it() {
    if std::env::consts::ARCH != "x86_64" {
        return;
    }
    let Some(lib) = nvrtc() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "pip could not download {WHEELS:?} from PyPI"
        );
        eprintln!("skipped: pip could not download {WHEELS:?} (no PyPI access?)");
        return;
    };
    let out = std::env::temp_dir().join(format!("quest-test-kernels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    for arch in ["sm_90a", "sm_80"] {
        let run = crate::common::quest_command()
            .args(["dev", "kernels", "--out"])
            .arg(&out)
            .arg("--nvrtc")
            .arg(&lib)
            .args(["--arch", arch])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&run);
        assert!(run.status.success(), "{arch}:\n{stdout}\n{stderr}");
        // One source per variant as MLX builds it, and the same variant as quest compiles it.
        let written = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".precompiled.cu"))
            .count();
        let compiled = stdout
            .lines()
            .filter(|l| l.contains(&format!(": compiles for {arch} (")))
            .count();
        assert!(written > 0, "{stdout}");
        assert_eq!(compiled, written, "{arch}:\n{stdout}\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
