//! Which library serves `cblas_sgemm` in this process, asked of the dynamic loader
//! (`dladdr`): the BLAS the build chose, not a timing.

use std::path::Path;

use quest::blas;

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn cblas_sgemm_comes_from_the_blas_the_build_chose() {
    let sgemm = blas::provider("cblas_sgemm")
        .expect("no loaded library defines cblas_sgemm; libmlx and its BLAS are not loaded");
    match blas::BUILT_WITH {
        built if built.starts_with("openblas-") => {
            let version = built.trim_start_matches("openblas-");
            assert_eq!(
                file_name(&sgemm.file),
                "libopenblas.so.0",
                "cblas_sgemm is served by {} (loaded as {}), not OpenBLAS",
                sgemm.file.display(),
                sgemm.loaded_as.display()
            );
            // OpenBLAS's own entry points come from the very same file, and it says so.
            let config = blas::provider("openblas_get_config").expect("no openblas_get_config");
            assert_eq!(config.file, sgemm.file);
            let described = blas::openblas_config().unwrap();
            assert!(
                described.starts_with(&format!("OpenBLAS {version}")),
                "{described}"
            );
            // libmlx's LAPACK (LU, Cholesky, eigh, …) is the same OpenBLAS.
            let lapack = blas::provider("sgetrf_").expect("no LAPACK sgetrf_ loaded");
            assert_eq!(lapack.file, sgemm.file);
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
        other => eprintln!(
            "BLAS `{other}` (MLX_DIR or macOS): cblas_sgemm from {}",
            sgemm.file.display()
        ),
    }
}

#[test]
fn the_thread_count_is_set_as_documented() {
    blas::init().unwrap();
    if blas::openblas_config().is_none() {
        return;
    }
    match blas::wanted_threads().unwrap() {
        Some(n) => assert_eq!(blas::threads(), Some(n)),
        None => assert!(blas::threads().is_some()),
    }
    assert!(blas::default_threads() >= 1 && blas::default_threads() <= blas::MAX_DEFAULT_THREADS);
}
