//! Every CUDA kernel of quest's compiles as quest compiles it itself (`kernels::precompiled`),
//! here, without a GPU: `quest dev kernels --nvrtc` through NVRTC from PyPI, the same wheels
//! MLX's CUDA build brings (pinned to the versions `mlx-cuda-13==0.32.2` resolved to), for
//! the H200's architecture and an older one. A kernel that does not compile is found before
//! a device carry, and the CUDA build's first run would otherwise only say "MLX compiles it
//! from its source".

use std::path::{Path, PathBuf};

use crate::common::text;

/// NVRTC and the CUDA headers, unpacked once into the test target's folder
/// (`quest::kernels::yours::fetch_nvrtc`); `None` where there is nothing to compile
/// for (not x86_64) or, off CI, when pip cannot fetch them (said why). On CI it must.
fn nvrtc() -> Option<PathBuf> {
    if std::env::consts::ARCH != "x86_64" {
        return None;
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvrtc-13.5.37");
    let fetched = quest::kernels::yours::fetch_nvrtc(&root);
    if let Err(e) = &fetched {
        assert!(std::env::var_os("CI").is_none(), "{e:#}");
        eprintln!("skipped: {e:#}");
    }
    fetched.ok()
}

#[test]
fn every_kernel_compiles_as_quest_compiles_it() {
    let Some(lib) = nvrtc() else { return };
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

/// A learner's kernel as the exercise writes it: one block per row of `x`, the row's
/// squares summed across the block, then every value scaled (an RMSNorm).
const NORM: quest::kernels::YourKernel = quest::kernels::YourKernel {
    name: "test_norm",
    inputs: &[
        ("x", mlx_rs::Dtype::Float16),
        ("weight", mlx_rs::Dtype::Float16),
        ("eps", mlx_rs::Dtype::Float32),
    ],
    outputs: &[("out", mlx_rs::Dtype::Float16)],
    body: r#"
  const int row = blockIdx.x;
  __shared__ float partial[32];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = __half2float(x[row * D + i]);
    sum += v * v;
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; w++) total += partial[w];
    partial[0] = rsqrtf(total / D + eps[0]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += blockDim.x)
    out[row * D + i] = __float2half(__half2float(x[row * D + i]) * partial[0] * __half2float(weight[i]));
"#,
};

#[test]
fn a_learners_kernel_compiles_off_the_gpu_and_a_broken_one_says_what_nvrtc_said() {
    let Some(lib) = nvrtc() else { return };
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("your-kernels");
    let compiled = NORM
        .compile_with(&lib, &[("D", 576)], "sm_90a", &cache)
        .unwrap();
    assert_eq!(compiled.arch, "sm_90a");
    assert!(compiled.nvrtc.starts_with("13."), "{compiled:?}");
    assert!(compiled.cubin_bytes > 1000, "{compiled:?}");
    // The compile-time constant is the body's: without it the body names an unknown D.
    let unbound = NORM.compile_with(&lib, &[], "sm_90a", &cache).unwrap_err();
    let said = format!("{unbound:#}");
    assert!(
        said.contains("your kernel `test_norm` does not compile"),
        "{said}"
    );
    assert!(said.contains("identifier \"D\" is undefined"), "{said}");
    // A typo in the body: NVRTC's own line, not a guess.
    let typo = quest::kernels::YourKernel {
        body: "  out[0] = __float2half(x_value);",
        ..NORM
    };
    let said = format!(
        "{:#}",
        typo.compile_with(&lib, &[], "sm_90a", &cache).unwrap_err()
    );
    assert!(
        said.contains("identifier \"x_value\" is undefined"),
        "{said}"
    );
}
