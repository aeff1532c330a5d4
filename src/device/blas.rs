//! Which BLAS MLX's CPU backend runs on, and with how many threads.
//!
//! On Linux the build links libmlx against OpenBLAS from PyPI (`scipy-openblas32`, the
//! DYNAMIC_ARCH build NumPy ships, through a forwarding library: see
//! vendor/mlx-sys/PATCHES.md) unless `QUEST_BLAS=bundled` keeps the reference BLAS the
//! `mlx-cpu` wheel bundles; an `MLX_DIR` install is used as it is; macOS keeps Accelerate.
//! What actually serves `cblas_sgemm` in this process is asked of the dynamic loader
//! (`dladdr`), not assumed, and so is the kernel family OpenBLAS chose for this CPU.
//!
//! Threads: OpenBLAS starts its pool when it is loaded, before `main`, with one thread per
//! CPU. [`init`] sets the count quest uses: `QUEST_BLAS_THREADS` when set, else half the
//! CPUs this process may use, at least 1 and at most [`MAX_DEFAULT_THREADS`]; when
//! `OPENBLAS_NUM_THREADS` is set, OpenBLAS's own reading of it is kept. Half, because MLX's
//! CPU stream runs on a thread of its own beside the host loop, and OpenBLAS's threads
//! spin while they wait: with as many BLAS threads as CPUs, anything else running on the
//! machine stalls them, while on an idle machine a second thread gains only a little
//! (docs/cpu/2026-12-01-openblas-dense/, "Threads"). A small model's matrices gain nothing from more than 8.

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{bail, Result};

/// The BLAS the linked libmlx was built to load: `openblas-<version>`, `bundled` (the
/// wheel's reference BLAS), `external` (an `MLX_DIR` install) or `accelerate` (macOS).
pub const BUILT_WITH: &str = env!("QUEST_MLX_BLAS");

/// The default thread count never exceeds this.
pub const MAX_DEFAULT_THREADS: usize = 8;

/// The library that serves a symbol in this process, and its real path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    /// The file name the loader opened (may be a symlink, e.g. the wheel's `libblas-….so`).
    pub loaded_as: PathBuf,
    /// The same file with symlinks resolved.
    pub file: PathBuf,
}

/// Which loaded library defines `symbol` in the global scope (what libmlx's calls bind
/// to), or `None` when no loaded object defines it.
#[cfg(unix)]
pub fn provider(symbol: &str) -> Option<Provider> {
    let address = lookup(symbol)?;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `address` came from dlsym; dladdr only reads the loader's tables.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let loaded_as = PathBuf::from(name.to_string_lossy().into_owned());
    let file = std::fs::canonicalize(&loaded_as).unwrap_or_else(|_| loaded_as.clone());
    Some(Provider { loaded_as, file })
}

#[cfg(not(unix))]
pub fn provider(_symbol: &str) -> Option<Provider> {
    None
}

#[cfg(unix)]
fn lookup(symbol: &str) -> Option<*mut libc::c_void> {
    // Make sure libmlx (and with it its BLAS) is loaded and linked into this binary.
    let _ = super::Backend::detect();
    let name = std::ffi::CString::new(symbol).ok()?;
    // SAFETY: a plain symbol lookup in the global scope.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!address.is_null()).then_some(address)
}

/// OpenBLAS's build description (`openblas_get_config()`, e.g. "OpenBLAS 0.3.34.481.3
/// DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"), when OpenBLAS is loaded.
pub fn openblas_config() -> Option<String> {
    static_string("openblas_get_config")
}

/// The kernel family OpenBLAS runs on this CPU (`openblas_get_corename()`, e.g. "Haswell",
/// "SkylakeX", "Zen"): chosen at load by a DYNAMIC_ARCH build, fixed by any other.
pub fn kernel_family() -> Option<String> {
    static_string("openblas_get_corename")
}

/// Whether the loaded OpenBLAS picks its kernels for the CPU it runs on (`DYNAMIC_ARCH` in
/// its build description). A build for one CPU dies with SIGILL on an older one.
pub fn dynamic_arch() -> Option<bool> {
    openblas_config().map(|config| config.split_whitespace().any(|w| w == "DYNAMIC_ARCH"))
}

/// A `const char* f(void)` of OpenBLAS's that returns a static string.
fn static_string(symbol: &str) -> Option<String> {
    #[cfg(unix)]
    {
        let f = lookup(symbol)?;
        // SAFETY: OpenBLAS's `char* openblas_get_config(void)` / `openblas_get_corename`.
        let f: extern "C" fn() -> *const libc::c_char = unsafe { std::mem::transmute(f) };
        let s = f();
        (!s.is_null()).then(|| {
            unsafe { std::ffi::CStr::from_ptr(s) }
                .to_string_lossy()
                .trim()
                .to_owned()
        })
    }
    #[cfg(not(unix))]
    None
}

/// OpenBLAS's current thread count, when OpenBLAS is loaded.
pub fn threads() -> Option<usize> {
    #[cfg(unix)]
    {
        let f = lookup("openblas_get_num_threads")?;
        // SAFETY: OpenBLAS's `int openblas_get_num_threads(void)`.
        let f: extern "C" fn() -> libc::c_int = unsafe { std::mem::transmute(f) };
        Some(f().max(1) as usize)
    }
    #[cfg(not(unix))]
    None
}

/// The thread count quest asks of OpenBLAS: `QUEST_BLAS_THREADS`, else
/// [`default_threads`]. `None` when `OPENBLAS_NUM_THREADS`
/// is set (OpenBLAS has read it already).
pub fn wanted_threads() -> Result<Option<usize>> {
    if let Some(value) = crate::settings::BLAS_THREADS.raw() {
        return match value.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => bail!(
                "QUEST_BLAS_THREADS={value} is not a thread count; set it to a whole number of at \
                 least 1 (or unset it for the default, half the CPUs, 1 to {MAX_DEFAULT_THREADS})"
            ),
        };
    }
    if std::env::var_os("OPENBLAS_NUM_THREADS").is_some() {
        return Ok(None);
    }
    Ok(Some(default_threads()))
}

/// Half the CPUs this process may use, at least 1 and at most [`MAX_DEFAULT_THREADS`].
pub fn default_threads() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) / 2).clamp(1, MAX_DEFAULT_THREADS)
}

/// Sets OpenBLAS's thread count once per process (see the module doc). Does nothing when
/// MLX does not run on OpenBLAS. `lm::load` and the benchmarks call it.
pub fn init() -> Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let wanted = wanted_threads().map_err(|e| e.to_string())?;
        #[cfg(unix)]
        if let (Some(n), Some(f)) = (wanted, lookup("openblas_set_num_threads")) {
            // SAFETY: OpenBLAS's `void openblas_set_num_threads(int)`.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
            f(n as libc::c_int);
        }
        #[cfg(not(unix))]
        let _ = wanted;
        Ok(())
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// The library and the kernels it chose, without the thread count: "OpenBLAS 0.3.34.481.3
/// (Haswell kernels)", "the mlx-cpu wheel's reference BLAS", …
pub fn library() -> String {
    match openblas_config() {
        Some(config) => {
            let version = name_and_version(&config);
            match kernel_family() {
                Some(kernels) => format!("{version} ({kernels} kernels)"),
                None => version,
            }
        }
        None => describe(),
    }
}

/// One line for humans: "OpenBLAS 0.3.34.481.3 (Haswell kernels, 1 thread)", "the
/// mlx-cpu wheel's reference BLAS", …
pub fn describe() -> String {
    match (openblas_config(), threads()) {
        (Some(config), Some(n)) => {
            let version = name_and_version(&config);
            let threads = format!("{n} thread{}", if n == 1 { "" } else { "s" });
            match kernel_family() {
                Some(kernels) => format!("{version} ({kernels} kernels, {threads})"),
                None => format!("{version} ({threads})"),
            }
        }
        _ => match BUILT_WITH {
            "bundled" => "the mlx-cpu wheel's reference BLAS".into(),
            "accelerate" => "Accelerate".into(),
            other => format!("BLAS: {other}"),
        },
    }
}

/// "OpenBLAS 0.3.34.481.3" from OpenBLAS's build description.
fn name_and_version(config: &str) -> String {
    config
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}
