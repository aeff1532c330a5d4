//! Which BLAS serves MLX's CPU backend in this process, asked of the dynamic loader
//! (`dladdr`) and of OpenBLAS itself: the library the build chose, one that picks its
//! kernels for the CPU it runs on, and that runs on a CPU without AVX-512 (this binary run
//! again under QEMU's user-mode emulation of one) — not a timing.

use std::path::Path;
use std::process::Command;

use mlx_rs::Array;
use quest::device::blas;

use super::lm_helpers::mlx_lock;

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Whether the build says it linked OpenBLAS: what the probes below must then find loaded.
fn on_openblas() -> bool {
    blas::BUILT_WITH.starts_with("openblas")
}

/// OpenBLAS's build description, where the build says it linked OpenBLAS; a build that
/// says so but loaded none fails here, whatever the test asked next.
fn loaded_openblas() -> Option<String> {
    let config = blas::openblas_config();
    assert!(
        config.is_some() || !on_openblas(),
        "the build says it linked {} (quest::device::blas::BUILT_WITH), but no loaded library answers \
         openblas_get_config: MLX's CPU backend runs on something else",
        blas::BUILT_WITH
    );
    config
}

#[test]
fn cblas_sgemm_comes_from_the_blas_the_build_chose() {
    let sgemm = blas::provider("cblas_sgemm")
        .expect("no loaded library defines cblas_sgemm; libmlx and its BLAS are not loaded");
    match blas::BUILT_WITH {
        built if on_openblas() => {
            let version = built.strip_prefix("openblas-").unwrap_or_else(|| {
                panic!("BUILT_WITH `{built}` names no OpenBLAS version (`openblas-<version>`)")
            });
            // libmlx's unprefixed imports bind to the forwarding library the build made
            // from libmlx's own import list (vendor/mlx-sys/PATCHES.md)…
            assert_eq!(
                file_name(&sgemm.file),
                "libquest_blas.so",
                "cblas_sgemm is served by {} (loaded as {}), not the forwarding library",
                sgemm.file.display(),
                sgemm.loaded_as.display()
            );
            // …which jumps to OpenBLAS's prefixed symbols, in the copy beside it.
            let real = blas::provider("scipy_cblas_sgemm").expect("no scipy_cblas_sgemm loaded");
            assert_eq!(file_name(&real.file), "libscipy_openblas.so");
            assert_eq!(real.file.parent(), sgemm.file.parent());
            // LAPACK (LU, Cholesky, eigh, …) and OpenBLAS's own entry points: the same two files.
            let lapack = blas::provider("sgetrf_").expect("no LAPACK sgetrf_ loaded");
            assert_eq!(lapack.file, sgemm.file);
            let config = blas::provider("openblas_get_config").expect("no openblas_get_config");
            assert_eq!(config.file, sgemm.file);
            let described = loaded_openblas().unwrap();
            assert!(
                described.starts_with(&format!("OpenBLAS {version}")),
                "{described}"
            );
            // It lives in quest's own copy of the wheel, not anywhere system-wide.
            assert!(
                sgemm.file.to_string_lossy().contains("+openblas-"),
                "{}",
                sgemm.file.display()
            );
        }
        "bundled" => {
            assert!(
                file_name(&sgemm.file).starts_with("libblas-"),
                "QUEST_BLAS=bundled, yet cblas_sgemm is served by {}",
                sgemm.file.display()
            );
            assert!(blas::openblas_config().is_none());
        }
        // An `MLX_DIR` install or macOS: the build promises no library, so there is none
        // to check it against.
        "external" | "accelerate" => eprintln!(
            "BLAS `{}`: cblas_sgemm from {}",
            blas::BUILT_WITH,
            sgemm.file.display()
        ),
        other => panic!(
            "quest::device::blas::BUILT_WITH is `{other}`, none of the BLAS builds this test knows \
             (openblas-<version>, bundled, external, accelerate)"
        ),
    }
}

/// A BLAS built for one CPU (as `cmeel-openblas` 0.3.31 is, for Skylake-X) dies with
/// SIGILL on every CPU without that one's instructions; a DYNAMIC_ARCH build chooses its
/// kernels when it loads, and says which.
#[test]
fn the_blas_chooses_its_kernels_for_the_cpu_it_runs_on() {
    if !on_openblas() {
        return;
    }
    let config = loaded_openblas().unwrap();
    assert_eq!(
        blas::dynamic_arch(),
        Some(true),
        "the loaded OpenBLAS is built for one CPU ({config}): on a CPU without that CPU's \
         instructions MLX dies with SIGILL; it must be a DYNAMIC_ARCH build"
    );
    let kernels = blas::kernel_family().expect("OpenBLAS names no kernel family");
    assert!(!kernels.trim().is_empty());
    // The description quest prints and records names them.
    let described = blas::describe();
    assert!(
        described.contains(&format!("{kernels} kernels")),
        "{described}"
    );
}

#[test]
fn the_thread_count_is_set_as_documented() {
    blas::init().unwrap();
    if loaded_openblas().is_none() {
        return;
    }
    match blas::wanted_threads().unwrap() {
        Some(n) => assert_eq!(blas::threads(), Some(n)),
        None => assert!(blas::threads().is_some()),
    }
    assert!(blas::default_threads() >= 1 && blas::default_threads() <= blas::MAX_DEFAULT_THREADS);
}

/// The line [`a_matmul_and_an_inverse_through_the_blas`] prints for the emulated run.
const PROBE_LINE: &str = "quest-blas-probe:";

/// A float32 matmul (`cblas_sgemm`) and an inverse (LAPACK's `sgetrf_`/`sgetri_`) on MLX's
/// CPU stream, checked against plain arithmetic; prints the kernels OpenBLAS chose. Run
/// here as any test, and under QEMU by the next one.
#[test]
fn a_matmul_and_an_inverse_through_the_blas() {
    if !on_openblas() {
        // The CPU build on OpenBLAS is the one whose BLAS this checks (MLX's CUDA build
        // runs matmuls on the GPU).
        return;
    }
    let _mlx = mlx_lock();
    blas::init().unwrap();
    loaded_openblas();
    let n = 48usize;
    // Diagonally dominant, so well conditioned.
    let values: Vec<f32> = (0..n * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            if r == c {
                n as f32
            } else {
                ((r * 7 + c * 3) % 11) as f32 / 11.0
            }
        })
        .collect();
    let a = Array::from_slice(&values, &[n as i32, n as i32]);
    let product = a.matmul(&a).unwrap();
    let got: Vec<f32> = product.as_slice::<f32>().to_vec();
    for r in 0..n {
        for c in 0..n {
            let want: f64 = (0..n)
                .map(|k| values[r * n + k] as f64 * values[k * n + c] as f64)
                .sum();
            let diff = (got[r * n + c] as f64 - want).abs();
            assert!(
                diff <= 1e-4 * want.abs().max(1.0),
                "matmul [{r},{c}]: {} vs {want}",
                got[r * n + c]
            );
        }
    }
    let inverse = mlx_rs::linalg::inv(&a).unwrap();
    let identity = inverse.matmul(&a).unwrap();
    let got: Vec<f32> = identity.as_slice::<f32>().to_vec();
    for r in 0..n {
        for c in 0..n {
            let want = if r == c { 1.0 } else { 0.0 };
            assert!(
                (got[r * n + c] - want).abs() < 1e-4,
                "inv(a) a [{r},{c}] = {}",
                got[r * n + c]
            );
        }
    }
    println!(
        "{PROBE_LINE} {} | {}",
        blas::kernel_family().unwrap_or_else(|| "-".into()),
        blas::describe()
    );
}

/// QEMU's x86-64 CPU models without AVX-512 that the emulated run takes, and the OpenBLAS
/// kernel family each must lead to: Haswell is AVX2 and FMA (most laptops, AMD Zen 1–3).
const EMULATED_CPUS: &[(&str, &str)] = &[("Haswell", "Haswell")];

/// This test binary run again under `qemu-x86_64 -cpu Haswell` (user-mode emulation: the
/// CPU it reports has no AVX-512, whatever this machine has), running the matmul and
/// inverse above. A BLAS built for one newer CPU dies there with SIGILL. The emulated
/// process gets no `OPENBLAS_CORETYPE` (some machines set it), so OpenBLAS chooses its
/// kernels itself from the CPU it sees. `.ci/run` installs QEMU (`qemu-user`); elsewhere
/// the test says how to run it and passes.
#[test]
fn mlx_runs_on_a_cpu_without_avx512() {
    if !on_openblas() || std::env::consts::ARCH != "x86_64" {
        return;
    }
    let qemu = "qemu-x86_64";
    if Command::new(qemu).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{qemu} is not installed, so this CI run cannot show the BLAS runs on a CPU \
             without AVX-512: .ci/run installs it (apt-get install qemu-user)"
        );
        eprintln!(
            "skipped: {qemu} is not installed (apt-get install qemu-user) to run MLX on an \
             emulated CPU without AVX-512"
        );
        return;
    }
    let this = std::env::current_exe().unwrap();
    for &(cpu, family) in EMULATED_CPUS {
        let out = Command::new(qemu)
            .args(["-cpu", cpu])
            .arg(&this)
            .args([
                "blas::a_matmul_and_an_inverse_through_the_blas",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env_remove("OPENBLAS_CORETYPE")
            .env_remove("OPENBLAS_VERBOSE")
            .env("QUEST_BLAS_THREADS", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_ne!(
                out.status.signal(),
                Some(libc::SIGILL),
                "on an emulated {cpu} (no AVX-512) MLX was killed by SIGILL: the BLAS ({}) \
                 is built for a newer CPU\n{stderr}",
                blas::openblas_config().unwrap_or_default()
            );
        }
        assert!(
            out.status.success(),
            "{cpu}: {}\n{stdout}\n{stderr}",
            out.status
        );
        let line = stdout
            .lines()
            .find_map(|l| {
                l.split_once(PROBE_LINE)
                    .map(|(_, rest)| rest.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("{cpu}: the probe printed no `{PROBE_LINE}` line\n{stdout}"));
        let chosen = line.split(" | ").next().unwrap_or_default();
        assert_eq!(
            chosen, family,
            "on an emulated {cpu}, OpenBLAS chose {chosen} kernels ({line})"
        );
        eprintln!("emulated {cpu}: {line}");
    }
}
