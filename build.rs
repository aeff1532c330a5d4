// Every binary needs an rpath to libmlx: mlx-sys's own link args do not reach
// dependents, so each package that links MLX emits it from DEP_MLX_LIBDIR.
pub fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MLX_LIBDIR");
    println!("cargo:rerun-if-env-changed=DEP_MLX_BLAS");
    println!("cargo:rerun-if-env-changed=DEP_MLX_BACKEND");
    // `cuda` when linked against MLX's CUDA build (`QUEST_MLX=cuda`): `quest::lm` then
    // refuses to run where MLX finds no GPU instead of falling back to the CPU unseen.
    let backend = std::env::var("DEP_MLX_BACKEND").unwrap_or_else(|_| "cpu".into());
    println!("cargo:rustc-env=QUEST_MLX_BACKEND={backend}");
    if let Ok(libdir) = std::env::var("DEP_MLX_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
        println!("cargo:rustc-env=QUEST_MLX_LIBDIR={libdir}");
        // MLX's CUDA build needs CUDA libraries that exist only where it runs.
        println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
    }
    // Which BLAS the linked libmlx runs on (`openblas-<version>`, `bundled`, `external`;
    // `accelerate` on macOS): `quest::blas` reports it and the dladdr test checks it.
    let blas = std::env::var("DEP_MLX_BLAS").unwrap_or_else(|_| {
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
            "accelerate".into()
        } else {
            "unknown".into()
        }
    });
    println!("cargo:rustc-env=QUEST_MLX_BLAS={blas}");
    // The files that make that BLAS in the wheel copy's `mlx_cpu.libs` (the Python peers'
    // venv gets the same ones).
    println!("cargo:rerun-if-env-changed=DEP_MLX_BLAS_FILES");
    let files = std::env::var("DEP_MLX_BLAS_FILES").unwrap_or_default();
    println!("cargo:rustc-env=QUEST_MLX_BLAS_FILES={files}");
    if std::env::var_os("DEP_MLX_LIBDIR").is_none() {
        println!("cargo:rustc-env=QUEST_MLX_LIBDIR=");
    }
}
