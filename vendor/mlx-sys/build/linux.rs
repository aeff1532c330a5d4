//! quest patch: the non-Apple build. It compiles only mlx-c (with the `cc` crate, no
//! cmake) against an existing MLX build — the official Linux wheel from PyPI
//! (`mlx-cpu==0.32.2`, or `mlx-cuda-13`/`mlx-cuda-12` 0.32.2 through `MLX_DIR`) — and uses the
//! committed bindings in `src/bindings.rs` (no libclang needed). See PATCHES.md.
//!
//! `QUEST_MLX=cuda` builds against MLX's CUDA wheel instead (`mlx-cuda-13==0.32.2`, with the
//! CUDA runtime wheels it depends on, unpacked side by side as pip would install them, so
//! libmlx.so's RPATH `$ORIGIN/../../nvidia/*/lib` finds them); see `fetch_cuda_wheels`.
//!
//! The wheel bundles netlib's reference BLAS/LAPACK (unoptimised loops: a 135M model
//! takes seconds to prefill). Unless `QUEST_BLAS=bundled`, the build also fetches OpenBLAS
//! from PyPI (`scipy-openblas32`, pinned by version and sha256: the DYNAMIC_ARCH build that
//! NumPy and SciPy ship, which picks its kernels for the CPU it finds) and, in its own copy
//! of the unpacked wheel, puts it under the file names libmlx.so loads, through a small
//! forwarding library made here from libmlx's own imports (see `patch_openblas`).

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

/// mlx-c 0.7.0 compiles against exactly this MLX (0.32.4's headers break it).
const MLX_VERSION: &str = "0.32.2";
const MLX_WHEEL: &str = "mlx-cpu";
/// MLX's CUDA 13 build (`QUEST_MLX=cuda`); pip brings the CUDA runtime wheels it names.
const MLX_CUDA_WHEEL: &str = "mlx-cuda-13";

/// Which MLX build quest links, chosen with `QUEST_MLX` at build time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mlx {
    /// `mlx-cpu` (the default): MLX's CPU backend.
    Cpu,
    /// `mlx-cuda-13`: MLX's CUDA backend (its CPU backend is there too).
    Cuda,
}

/// OpenBLAS from PyPI (BSD-3-Clause): the build NumPy and SciPy ship. It is built with
/// DYNAMIC_ARCH, so it chooses its kernels at load for the CPU it runs on (Haswell, Zen,
/// SkylakeX, …): one library for every x86-64 CPU MLX's wheel runs on. (A library built for
/// one CPU, e.g. `cmeel-openblas` 0.3.31's SKYLAKEX-only build, dies with SIGILL on a CPU
/// without AVX-512.) Its symbols carry a `scipy_` prefix: see [`write_forwarding`].
const OPENBLAS_PACKAGE: &str = "scipy-openblas32";
const OPENBLAS_VERSION: &str = "0.3.34.481.3";
/// The pinned wheels' sha256 (x86-64 and aarch64 manylinux_2_28); pip refuses any other
/// file (`--require-hashes`).
const OPENBLAS_SHA256: &[&str] = &[
    "0595f94cd58c1f8a0d90c975621f4587337a003916b1979e834ebdf2cb5d9504",
    "e085dddbc5b9aa130f83def515d31c440e69f387a90c7e63b154a5575b4466bc",
];
/// Where the wheel keeps the library, and the prefix its symbols carry.
const OPENBLAS_LIB_IN_WHEEL: &str = "scipy_openblas32/lib/libscipy_openblas.so";
const OPENBLAS_LIB: &str = "libscipy_openblas.so";
const OPENBLAS_SYMBOL_PREFIX: &str = "scipy_";
/// The forwarding library the build makes: libmlx's unprefixed BLAS and LAPACK imports,
/// each a jump to the prefixed symbol.
const FORWARDING_LIB: &str = "libquest_blas.so";
/// OpenBLAS's own entry points, forwarded too: quest asks for them by their usual names
/// (src/blas.rs: the build's description, the kernel family chosen, the thread count).
const OPENBLAS_CONTROLS: &[&str] = &[
    "openblas_get_config",
    "openblas_get_corename",
    "openblas_get_num_threads",
    "openblas_set_num_threads",
];

/// Which BLAS libmlx runs on, chosen with `QUEST_BLAS`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Blas {
    /// OpenBLAS from PyPI, in a patched copy of the wheel (the default).
    OpenBlas,
    /// The wheel's own reference BLAS/LAPACK, as `pip install mlx-cpu` gives it.
    Bundled,
}

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
    println!("cargo:rerun-if-env-changed=QUEST_BLAS");
    println!("cargo:rerun-if-env-changed=QUEST_MLX");
    println!("cargo:rerun-if-changed=build/linux.rs");
    println!("cargo:rerun-if-changed=src/shims/mach_time.c");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let mlx_c_root = manifest.join("src/mlx-c");
    let mlx = mlx_choice();
    // `external`: an MLX_DIR install is used as it is, never patched. The CUDA wheel's
    // CPU backend keeps its bundled BLAS: quest runs models on the GPU there.
    let (mlx_dir, blas_name) = match env::var_os("MLX_DIR") {
        Some(dir) => (PathBuf::from(dir), "external".to_owned()),
        None if mlx == Mlx::Cuda => (fetch_cuda_wheels(&out_dir), "bundled".to_owned()),
        None => {
            let stock = fetch_wheel(&out_dir);
            match blas_choice() {
                Blas::Bundled => (stock, "bundled".to_owned()),
                Blas::OpenBlas => (
                    with_openblas(&out_dir, &stock),
                    format!("openblas-{OPENBLAS_VERSION}"),
                ),
            }
        }
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
    // quest's wrapper of MLX's precompiled CUDA kernels (mlx-c 0.7 has none).
    let precompiled = manifest.join("src/shims/precompiled_kernel.cpp");
    println!("cargo:rerun-if-changed={}", precompiled.display());
    build.file(precompiled);
    // quest's record of MLX's fused ops in the graph (mlx/c/fast.cpp calls it).
    let seen = manifest.join("src/shims/seen.cpp");
    println!("cargo:rerun-if-changed={}", seen.display());
    build.file(seen);
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
    // DEP_MLX_BLAS: `openblas-<version>`, `bundled` (the wheel's reference BLAS) or
    // `external` (MLX_DIR, used as installed).
    println!("cargo:blas={blas_name}");
    // DEP_MLX_BLAS_FILES: the files that make the BLAS in `mlx_cpu.libs` (the forwarding
    // library first), for the Python peers' venv to get the same (src/bench/peer.rs).
    if blas_name.starts_with("openblas-") {
        println!("cargo:blas_files={FORWARDING_LIB} {OPENBLAS_LIB}");
    }
    // DEP_MLX_BACKEND: `cuda` when libmlx is MLX's CUDA build (quest then refuses to run
    // on a machine where MLX finds no GPU), else `cpu`.
    let cuda = mlx == Mlx::Cuda || is_cuda_build(&libdir);
    println!("cargo:backend={}", if cuda { "cuda" } else { "cpu" });
}

fn mlx_choice() -> Mlx {
    match env::var("QUEST_MLX").as_deref() {
        Err(_) | Ok("") | Ok("cpu") => Mlx::Cpu,
        Ok("cuda") => Mlx::Cuda,
        Ok(other) => panic!(
            "\n\nmlx-sys: QUEST_MLX={other} is not a choice. Leave it unset (or `cpu`) to build against\n\
             {MLX_WHEEL}=={MLX_VERSION}, or set QUEST_MLX=cuda to build against MLX's CUDA build\n\
             ({MLX_CUDA_WHEEL}=={MLX_VERSION} and the CUDA runtime wheels it needs, from PyPI).\n"
        ),
    }
}

/// Whether the libmlx.so in `libdir` is MLX's CUDA build (it names libcuda.so.1).
fn is_cuda_build(libdir: &Path) -> bool {
    fs::read(libdir.join("libmlx.so"))
        .is_ok_and(|bytes| bytes.windows(12).any(|w| w == b"libcuda.so.1"))
}

/// Downloads `mlx-cuda-13==0.32.2` with the CUDA runtime wheels it depends on (cuBLAS,
/// cuDNN, cuFFT, NVRTC, NCCL, the runtime: about 1.6 GB) and unpacks them all into one
/// folder, as pip lays out site-packages: libmlx.so finds them through its RPATH
/// (`$ORIGIN/../../nvidia/<name>/lib`). The NVIDIA driver (libcuda.so.1) is not a wheel:
/// it comes with the machine's GPU driver, so a binary links here without it
/// (`--allow-shlib-undefined`) and runs only where it is installed.
fn fetch_cuda_wheels(out_dir: &Path) -> PathBuf {
    let root = out_dir.join(format!("{MLX_CUDA_WHEEL}-{MLX_VERSION}"));
    let mlx_dir = root.join("mlx");
    if mlx_dir.join("lib/libmlx.so").is_file() && root.join("nvidia").is_dir() {
        return mlx_dir;
    }
    let download = out_dir.join("cuda-download");
    fs::create_dir_all(&download).unwrap();
    let python = find_python();
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--only-binary=:all:", "-d"])
        .arg(&download)
        .arg(format!("{MLX_CUDA_WHEEL}=={MLX_VERSION}"))
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        panic!(
            "\n\nmlx-sys: could not download {MLX_CUDA_WHEEL}=={MLX_VERSION} and its CUDA runtime wheels with\n\
             `{python} -m pip download` (QUEST_MLX=cuda). Either make pip reach PyPI, or install it\n\
             yourself (`pip install {MLX_CUDA_WHEEL}=={MLX_VERSION}`) and set MLX_DIR to its `mlx` folder.\n"
        );
    }
    let wheels: Vec<PathBuf> = fs::read_dir(&download)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "whl"))
        .collect();
    unzip_all(&wheels, &root);
    // The unpacked tree is the install; the downloaded wheels are pip's cache's business.
    let _ = fs::remove_dir_all(&download);
    mlx_dir
}

fn blas_choice() -> Blas {
    match env::var("QUEST_BLAS").as_deref() {
        Err(_) | Ok("") | Ok("openblas") => Blas::OpenBlas,
        Ok("bundled") => Blas::Bundled,
        Ok(other) => panic!(
            "\n\nmlx-sys: QUEST_BLAS={other} is not a choice. Leave it unset (or `openblas`) to run MLX's CPU\n\
             backend on OpenBLAS ({OPENBLAS_PACKAGE}=={OPENBLAS_VERSION} from PyPI), or set QUEST_BLAS=bundled to keep\n\
             the reference BLAS that the {MLX_WHEEL} wheel bundles (much slower).\n"
        ),
    }
}

/// A copy of the unpacked wheel at `stock` (its `mlx` folder) whose BLAS and LAPACK are
/// OpenBLAS, in its own folder beside the stock copy, so switching `QUEST_BLAS` back and
/// forth never corrupts either. Returns the copy's `mlx` folder.
fn with_openblas(out_dir: &Path, stock: &Path) -> PathBuf {
    let root = out_dir.join(format!(
        "{MLX_WHEEL}-{MLX_VERSION}+openblas-{OPENBLAS_VERSION}"
    ));
    let mlx_dir = root.join("mlx");
    if mlx_dir.join("lib/libmlx.so").is_file() {
        return mlx_dir;
    }
    let openblas = fetch_openblas(out_dir);
    let staging = out_dir.join("openblas-staging");
    let _ = fs::remove_dir_all(&staging);
    copy_tree(stock.parent().unwrap(), &staging);
    patch_openblas(out_dir, &staging, &openblas);
    let _ = fs::remove_dir_all(&root);
    fs::rename(&staging, &root).unwrap();
    // The patched copy holds its own copy of the library; the wheel and its unpacked tree
    // are no longer needed.
    let _ = fs::remove_dir_all(out_dir.join("openblas-download"));
    let _ = fs::remove_dir_all(out_dir.join(format!("{OPENBLAS_PACKAGE}-{OPENBLAS_VERSION}")));
    mlx_dir
}

/// libmlx.so names its BLAS and LAPACK by hashed file names (`libblas-….so.3.10.0`,
/// `liblapack-….so.3.10.0`) found through its RPATH `$ORIGIN/../../mlx_cpu.libs`. Both
/// become symlinks to one forwarding library there ([`FORWARDING_LIB`]: one file, so the
/// loader maps it once), which defines every symbol libmlx takes from those two files as a
/// jump to OpenBLAS's prefixed one, and needs `libscipy_openblas.so`, copied beside it
/// (its RUNPATH is `$ORIGIN`). The symbol list is read from libmlx itself; a symbol OpenBLAS
/// lacks stops the build, naming it.
fn patch_openblas(out_dir: &Path, wheel_root: &Path, openblas: &Path) {
    let libs = wheel_root.join("mlx_cpu.libs");
    let names: Vec<String> = fs::read_dir(&libs)
        .unwrap_or_else(|e| panic!("mlx-sys: the wheel has no {}: {e}", libs.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let find = |prefix: &str| {
        names
            .iter()
            .find(|n| n.starts_with(prefix) && n.contains(".so"))
            .unwrap_or_else(|| {
                panic!(
                    "mlx-sys: {MLX_WHEEL}=={MLX_VERSION} has no {prefix}*.so in mlx_cpu.libs; \
                     set QUEST_BLAS=bundled to build without OpenBLAS"
                )
            })
            .clone()
    };
    let (blas, lapack) = (find("libblas-"), find("liblapack-"));
    let libmlx = wheel_root.join("mlx/lib/libmlx.so");
    let imported = undefined_symbols(&libmlx);
    let mut provided = defined_symbols(&libs.join(&blas));
    provided.extend(defined_symbols(&libs.join(&lapack)));
    let mut forwarded: Vec<String> = imported.intersection(&provided).cloned().collect();
    if forwarded.is_empty() {
        panic!(
            "mlx-sys: {} imports nothing from {blas} or {lapack}; the wheel is not laid out as \
             expected. Set QUEST_BLAS=bundled to build without OpenBLAS.",
            libmlx.display()
        );
    }
    forwarded.extend(OPENBLAS_CONTROLS.iter().map(|s| s.to_string()));
    forwarded.sort();
    forwarded.dedup();
    let offered = defined_symbols(openblas);
    let missing: Vec<&String> = forwarded
        .iter()
        .filter(|s| !offered.contains(&format!("{OPENBLAS_SYMBOL_PREFIX}{s}")))
        .collect();
    if !missing.is_empty() {
        panic!(
            "\n\nmlx-sys: {OPENBLAS_PACKAGE}=={OPENBLAS_VERSION} does not define {} (with its `{OPENBLAS_SYMBOL_PREFIX}` \
             prefix), which libmlx.so needs: {}.\nSet QUEST_BLAS=bundled to build on the wheel's own BLAS.\n",
            if missing.len() == 1 { "a symbol" } else { "symbols" },
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    fs::copy(openblas, libs.join(OPENBLAS_LIB)).unwrap();
    let source = out_dir.join("quest_blas_forward.S");
    fs::write(&source, write_forwarding(&forwarded)).unwrap();
    build_forwarding(&source, &libs);
    for name in [&blas, &lapack] {
        fs::remove_file(libs.join(name)).unwrap();
        symlink(FORWARDING_LIB, &libs.join(name));
    }
}

/// The forwarding library's source: for each symbol, a global function that jumps through
/// the GOT to OpenBLAS's prefixed symbol (a tail call: arguments and the stack untouched).
fn write_forwarding(symbols: &[String]) -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let jump = |target: &str| match arch.as_str() {
        "x86_64" => format!("    jmp *{target}@GOTPCREL(%rip)\n"),
        "aarch64" => format!(
            "    adrp x16, :got:{target}\n    ldr x16, [x16, :got_lo12:{target}]\n    br x16\n"
        ),
        other => panic!(
            "\n\nmlx-sys: no BLAS forwarding for {other}; set QUEST_BLAS=bundled to build on the wheel's own BLAS.\n"
        ),
    };
    let mut text = format!(
        "// Made by mlx-sys's build (quest patch): libmlx's BLAS and LAPACK imports, forwarded to\n\
         // {OPENBLAS_PACKAGE}=={OPENBLAS_VERSION}, whose symbols carry the prefix `{OPENBLAS_SYMBOL_PREFIX}`.\n    .text\n"
    );
    for symbol in symbols {
        text += &format!(
            "    .globl {symbol}\n    .type {symbol}, %function\n    .p2align 4\n{symbol}:\n{}    .size {symbol}, .-{symbol}\n",
            jump(&format!("{OPENBLAS_SYMBOL_PREFIX}{symbol}"))
        );
    }
    text + "    .section .note.GNU-stack,\"\",%progbits\n"
}

/// Assembles and links the forwarding library into `libs`, against the OpenBLAS copy
/// there; `--no-undefined` makes a symbol that does not resolve stop the build.
fn build_forwarding(source: &Path, libs: &Path) {
    let compiler = cc::Build::new().get_compiler();
    let mut command = compiler.to_command();
    command
        .arg("-shared")
        .arg("-o")
        .arg(libs.join(FORWARDING_LIB))
        .arg(source)
        .arg(format!("-L{}", libs.display()))
        .arg(format!("-l:{OPENBLAS_LIB}"))
        .arg(format!("-Wl,-soname,{FORWARDING_LIB}"))
        .arg("-Wl,--enable-new-dtags,-rpath,$ORIGIN")
        .arg("-Wl,--no-undefined");
    let status = command.status();
    if !matches!(status, Ok(s) if s.success()) {
        panic!(
            "\n\nmlx-sys: could not build the BLAS forwarding library ({command:?}).\n\
             Set QUEST_BLAS=bundled to build on the wheel's own BLAS.\n"
        );
    }
}

/// The dynamic symbols an ELF shared library imports.
fn undefined_symbols(lib: &Path) -> std::collections::BTreeSet<String> {
    dynamic_symbols(lib, true)
}

/// The dynamic symbols an ELF shared library defines.
fn defined_symbols(lib: &Path) -> std::collections::BTreeSet<String> {
    dynamic_symbols(lib, false)
}

fn dynamic_symbols(lib: &Path, undefined: bool) -> std::collections::BTreeSet<String> {
    use object::{Object, ObjectSymbol};
    let data = fs::read(lib).unwrap_or_else(|e| panic!("mlx-sys: cannot read {}: {e}", lib.display()));
    let file = object::File::parse(&*data)
        .unwrap_or_else(|e| panic!("mlx-sys: {} is not a shared library: {e}", lib.display()));
    file.dynamic_symbols()
        .filter(|s| s.is_undefined() == undefined && (undefined || s.is_global()))
        .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(str::to_owned))
        .collect()
}

fn symlink(target: &str, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("mlx-sys: could not link {} -> {target}: {e}", link.display()));
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest);
        } else if kind.is_symlink() {
            let target = fs::read_link(entry.path()).unwrap();
            std::os::unix::fs::symlink(target, &dest).unwrap();
        } else {
            fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Downloads the pinned OpenBLAS wheel with pip (its sha256 checked) and returns its
/// library.
fn fetch_openblas(out_dir: &Path) -> PathBuf {
    let root = out_dir.join(format!("{OPENBLAS_PACKAGE}-{OPENBLAS_VERSION}"));
    let lib = root.join(OPENBLAS_LIB_IN_WHEEL);
    if lib.is_file() {
        return lib;
    }
    let download = out_dir.join("openblas-download");
    fs::create_dir_all(&download).unwrap();
    let requirements = download.join("requirements.txt");
    let hashes: Vec<String> = OPENBLAS_SHA256.iter().map(|h| format!("--hash=sha256:{h}")).collect();
    fs::write(
        &requirements,
        format!("{OPENBLAS_PACKAGE}=={OPENBLAS_VERSION} {}\n", hashes.join(" ")),
    )
    .unwrap();
    let wheel = pip_download(&download, &["-r", requirements.to_str().unwrap()], "scipy_openblas32-")
        .unwrap_or_else(|python| {
            panic!(
                "\n\nmlx-sys: could not download {OPENBLAS_PACKAGE}=={OPENBLAS_VERSION} (OpenBLAS) with `{python} -m pip download`\n\
                 (or its sha256 is not one of the pinned ones). quest runs MLX's CPU backend on OpenBLAS; the\n\
                 reference BLAS the {MLX_WHEEL} wheel bundles is about 30x slower to the first token. Either make\n\
                 pip reach PyPI, or build on the bundled BLAS:\n  \
                 QUEST_BLAS=bundled cargo build\n"
            )
        });
    unzip(&wheel, &root);
    if !lib.is_file() {
        panic!(
            "mlx-sys: {} has no {OPENBLAS_LIB_IN_WHEEL}; set QUEST_BLAS=bundled to build without OpenBLAS",
            wheel.display()
        );
    }
    lib
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
    let wheel = pip_download(&download, &[&format!("{MLX_WHEEL}=={MLX_VERSION}")], "mlx_cpu-")
        .unwrap_or_else(|python| {
            panic!(
                "\n\nmlx-sys: could not download {MLX_WHEEL}=={MLX_VERSION} with `{python} -m pip download`.\n\
                 quest needs the official MLX Linux build. Either make pip reach PyPI, or install it yourself\n\
                 (`pip install {MLX_WHEEL}=={MLX_VERSION}`) and set MLX_DIR to its `mlx` folder.\n"
            )
        });
    unzip(&wheel, &root);
    mlx_dir
}

/// `pip download` of one pinned wheel (no dependencies) into `download`: `requirement` is
/// pip's arguments for it (a `name==version`, or `-r file` with hashes); the wheel's path,
/// or, when pip fails, the Python command that was tried.
fn pip_download(download: &Path, requirement: &[&str], file_prefix: &str) -> Result<PathBuf, String> {
    fs::create_dir_all(download).unwrap();
    let python = find_python();
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d"])
        .arg(download)
        .args(requirement)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        return Err(python);
    }
    Ok(fs::read_dir(download)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(file_prefix) && n.ends_with(".whl"))
        })
        .unwrap_or_else(|| panic!("pip reported success but left no {file_prefix}*.whl")))
}

/// Unpacks a wheel whole into `root` (through a staging folder, so a half-unpacked wheel
/// is never mistaken for a complete one).
fn unzip(wheel: &Path, root: &Path) {
    unzip_all(&[wheel.to_owned()], root)
}

/// Unpacks wheels whole into one folder `root`, as pip installs them side by side.
fn unzip_all(wheels: &[PathBuf], root: &Path) {
    let staging = PathBuf::from(format!("{}.staging", root.display()));
    let _ = fs::remove_dir_all(&staging);
    for wheel in wheels {
        let status = Command::new(find_python())
            .args(["-m", "zipfile", "-e"])
            .arg(wheel)
            .arg(&staging)
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            panic!("mlx-sys: could not unpack {}", wheel.display());
        }
    }
    // zipfile drops the executable bit; the shared libraries only need to be readable.
    let _ = fs::remove_dir_all(root);
    fs::rename(&staging, root).unwrap();
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
