// Every binary needs an rpath to libmlx: mlx-sys's own link args do not reach
// dependents, so each package that links MLX emits it from DEP_MLX_LIBDIR. quest depends
// on mlx-sys and passes what it read on (`links = "quest"`): the exercises' packages
// depend on quest and mlx-rs alone, never on mlx-sys (MLX's C API is no crate of theirs),
// and read it as DEP_QUEST_LIBDIR.
pub fn main() {
    let dep = |key: &str| -> Option<String> {
        for from in ["MLX", "QUEST"] {
            println!("cargo:rerun-if-env-changed=DEP_{from}_{key}");
        }
        std::env::var(format!("DEP_MLX_{key}"))
            .or_else(|_| std::env::var(format!("DEP_QUEST_{key}")))
            .ok()
    };
    // quest itself (the package with `links`): what it read, for its dependents.
    let passes_on = std::env::var_os("CARGO_MANIFEST_LINKS").is_some();
    let pass_on = |key: &str, value: &str| {
        if passes_on {
            println!("cargo:{key}={value}");
        }
    };
    // `cuda` when linked against MLX's CUDA build (`QUEST_MLX=cuda`): `quest::lm` then
    // refuses to run where MLX finds no GPU instead of falling back to the CPU unseen.
    let backend = dep("BACKEND").unwrap_or_else(|| "cpu".into());
    println!("cargo:rustc-env=QUEST_MLX_BACKEND={backend}");
    pass_on("backend", &backend);
    let libdir = dep("LIBDIR");
    if let Some(libdir) = &libdir {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
        println!("cargo:rustc-env=QUEST_MLX_LIBDIR={libdir}");
        // MLX's CUDA build needs CUDA libraries that exist only where it runs.
        println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
        pass_on("libdir", libdir);
    }
    // Which BLAS the linked libmlx runs on (`openblas-<version>`, `bundled`, `external`;
    // `accelerate` on macOS): `quest::blas` reports it and the dladdr test checks it.
    let blas = dep("BLAS").unwrap_or_else(|| {
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
            "accelerate".into()
        } else {
            "unknown".into()
        }
    });
    println!("cargo:rustc-env=QUEST_MLX_BLAS={blas}");
    if dep("BLAS").is_some() {
        pass_on("blas", &blas);
    }
    // The files that make that BLAS in the wheel copy's `mlx_cpu.libs` (the Python peers'
    // venv gets the same ones).
    let files = dep("BLAS_FILES").unwrap_or_default();
    println!("cargo:rustc-env=QUEST_MLX_BLAS_FILES={files}");
    pass_on("blas_files", &files);
    if libdir.is_none() {
        println!("cargo:rustc-env=QUEST_MLX_LIBDIR=");
    }
}
