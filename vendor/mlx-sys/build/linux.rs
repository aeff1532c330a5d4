//! quest patch: the non-Apple build. It compiles only mlx-c (with the `cc` crate, no
//! cmake) against an existing MLX build — the official Linux wheel from PyPI
//! (`mlx-cpu==0.32.2`, or `mlx-cuda-13`/`mlx-cuda-12` 0.32.2 through `MLX_DIR`) — and uses the
//! committed bindings in `src/bindings.rs` (no libclang needed). See PATCHES.md.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

/// mlx-c 0.7.0 compiles against exactly this MLX (0.32.4's headers break it).
const MLX_VERSION: &str = "0.32.2";
const MLX_WHEEL: &str = "mlx-cpu";

/// mlx-c's own source list (CMakeLists.txt `mlxc-src`).
const MLX_C_SOURCES: &[&str] = &[
    "array",
    "closure",
    "compile",
    "cuda",
    "device",
    "distributed",
    "distributed_group",
    "error",
    "export",
    "fast",
    "fft",
    "graph_utils",
    "io",
    "io_types",
    "linalg",
    "map",
    "memory",
    "metal",
    "ops",
    "random",
    "stream",
    "string",
    "transforms",
    "transforms_impl",
    "vector",
    "version",
];

pub fn main() {
    println!("cargo:rerun-if-env-changed=MLX_DIR");
    println!("cargo:rerun-if-changed=build/linux.rs");
    println!("cargo:rerun-if-changed=src/shims/mach_time.c");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let mlx_c_root = manifest.join("src/mlx-c");
    let mlx_dir = match env::var_os("MLX_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => fetch_wheel(&out_dir),
    };
    let include = mlx_dir.join("include");
    let libdir = mlx_dir.join("lib");
    check_mlx_dir(&mlx_dir, &include, &libdir);

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++20")
        .pic(true)
        .include(&mlx_c_root)
        .flag("-isystem")
        .flag(include.to_str().expect("MLX_DIR must be valid UTF-8"))
        .warnings(false);
    for name in MLX_C_SOURCES {
        let file = mlx_c_root.join("mlx/c").join(format!("{name}.cpp"));
        println!("cargo:rerun-if-changed={}", file.display());
        build.file(file);
    }
    build.compile("mlxc");

    // mlx-rs seeds its RNG with mach_approximate_time(); give it a monotonic clock here.
    cc::Build::new()
        .file(manifest.join("src/shims/mach_time.c"))
        .compile("mlx_sys_shims");

    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=dylib=mlx");
    println!("cargo:rustc-link-lib=dylib=stdc++");
    // Dependents read these as DEP_MLX_LIBDIR / DEP_MLX_INCLUDE: a binary needs an rpath
    // to libmlx, and `rustc-link-arg` from this crate does not reach dependents.
    println!("cargo:libdir={}", libdir.display());
    println!("cargo:include={}", include.display());
    println!("cargo:version={MLX_VERSION}");

}

fn check_mlx_dir(mlx_dir: &Path, include: &Path, libdir: &Path) {
    let lib = libdir.join("libmlx.so");
    if !include.join("mlx/mlx.h").is_file() || !lib.is_file() {
        panic!(
            "\n\nmlx-sys: {} is not an MLX install (expected include/mlx/mlx.h and lib/libmlx.so).\n\
             Point MLX_DIR at the `mlx` folder of an installed MLX {MLX_VERSION} wheel, e.g.\n  \
             MLX_DIR=$(python3 -c 'import mlx, os; print(os.path.dirname(mlx.__file__))')\n\
             or unset MLX_DIR to let the build download {MLX_WHEEL}=={MLX_VERSION} with pip.\n",
            mlx_dir.display()
        );
    }
    let version_h = fs::read_to_string(include.join("mlx/version.h")).unwrap_or_default();
    let found = ["MLX_VERSION_MAJOR", "MLX_VERSION_MINOR", "MLX_VERSION_PATCH"]
        .map(|key| {
            version_h
                .lines()
                .find_map(|line| line.trim().strip_prefix(&format!("#define {key} ")))
                .map(|value| value.trim().to_owned())
                .unwrap_or_else(|| "?".into())
        })
        .join(".");
    if found != MLX_VERSION {
        panic!(
            "\n\nmlx-sys: MLX at {} is version {found}, but mlx-c 0.7.0 needs exactly {MLX_VERSION}.\n\
             Install `{MLX_WHEEL}=={MLX_VERSION}` (or mlx-cuda-13=={MLX_VERSION}) and point MLX_DIR at it.\n",
            mlx_dir.display()
        );
    }
}

/// Downloads the official MLX Linux wheel by package name with pip and unpacks it whole:
/// libmlx.so finds its bundled BLAS through an RPATH relative to the wheel's layout.
fn fetch_wheel(out_dir: &Path) -> PathBuf {
    let root = out_dir.join(format!("{MLX_WHEEL}-{MLX_VERSION}"));
    let mlx_dir = root.join("mlx");
    if mlx_dir.join("lib/libmlx.so").is_file() {
        return mlx_dir;
    }
    let download = out_dir.join("wheel-download");
    fs::create_dir_all(&download).unwrap();
    let python = find_python();
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d"])
        .arg(&download)
        .arg(format!("{MLX_WHEEL}=={MLX_VERSION}"))
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        panic!(
            "\n\nmlx-sys: could not download {MLX_WHEEL}=={MLX_VERSION} with `{python} -m pip download`.\n\
             quest needs the official MLX Linux build. Either make pip reach PyPI, or install it yourself\n\
             (`pip install {MLX_WHEEL}=={MLX_VERSION}`) and set MLX_DIR to its `mlx` folder.\n"
        );
    }
    let wheel = fs::read_dir(&download)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("mlx_cpu-") && n.ends_with(".whl"))
        })
        .expect("pip reported success but left no mlx_cpu wheel");
    let staging = out_dir.join("wheel-staging");
    let _ = fs::remove_dir_all(&staging);
    let status = Command::new(&python)
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&staging)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        panic!("mlx-sys: could not unpack {}", wheel.display());
    }
    // zipfile drops the executable bit; the shared libraries only need to be readable.
    let _ = fs::remove_dir_all(&root);
    fs::rename(&staging, &root).unwrap();
    mlx_dir
}

fn find_python() -> String {
    for candidate in ["python3", "python"] {
        if Command::new(candidate)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|out| out.status.success())
        {
            return candidate.to_owned();
        }
    }
    panic!(
        "\n\nmlx-sys: neither python3 nor python with pip was found; pip is needed once to download\n\
         {MLX_WHEEL}=={MLX_VERSION}. Install Python 3 with pip, or set MLX_DIR to an MLX {MLX_VERSION} install.\n"
    );
}
