//! quest's CUDA kernels compiled once per GPU and kept on disk, so a new process does not
//! compile them again.
//!
//! MLX 0.32.2 compiles a source-text custom kernel with NVRTC in every process (it keeps no
//! compiled custom kernel on disk): about 10 s for quest's on an H200, inside the first
//! decode steps of every exercise run. MLX also takes a kernel already compiled
//! (`fast::precompiled_cuda_kernel`, wrapped for quest in vendor/mlx-sys's
//! `src/shims/precompiled_kernel.cpp`). So quest compiles each variant itself, with the
//! NVRTC that MLX's CUDA build loads (the `nvidia-cuda-nvrtc` wheel) and MLX's own options,
//! into a CUBIN for this GPU's architecture, and keeps it under the cache folder
//! (`QUEST_CACHE`, `cuda-kernels/`), keyed by the source, the architecture, the NVRTC
//! version and MLX's version. A later process reads the file and hands it to MLX.
//!
//! The text compiled here is [`KernelSpec::precompiled_text`]: the same kernel body as
//! MLX's, in a self-contained `extern "C"` function (MLX's device headers are not in its
//! wheel), with an input's shape, where a kernel reads one, passed as eight ints after the
//! outputs (MLX passes a precompiled kernel inputs, outputs, then scalars).
//!
//! How a call hands MLX the kernel ([`Compiled::place`]): MLX's precompiled path takes the
//! CUBIN itself as the kernel's "source", copies it twice into every call's graph node and
//! hashes all of it at every launch to find its module. So quest puts each CUBIN once in
//! MLX's own module cache, under the name MLX derives from a short key, and a call hands
//! MLX the key (`QUEST_KERNEL_HANDOFF=bytes` hands over the CUBIN, as before).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};

use super::spec::KernelSpec;

/// NVRTC's entry points quest uses (`nvrtc.h`), looked up in the loaded library.
struct Nvrtc {
    version: (c_int, c_int),
    create: unsafe extern "C" fn(
        *mut *mut c_void,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    compile: unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int,
    log: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int,
    cubin_size: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
}

/// Part of every cached kernel's key: bump it when [`Compiler::compile`]'s options change,
/// so no process reads a kernel compiled the old way.
const OPTIONS_VERSION: &str = "quest-nvrtc-options-1";

/// What compiling here needs: NVRTC, the CUDA headers beside it, the GPU's architecture.
pub struct Compiler {
    nvrtc: Nvrtc,
    include: PathBuf,
    /// `sm_90a` on an H200: what MLX compiles for (a plain `sm_XY` below 9.0).
    pub arch: String,
    cache: PathBuf,
}

fn symbol<T>(lib: *mut c_void, name: &str) -> Result<T> {
    let c = CString::new(name)?;
    // SAFETY: a symbol lookup in a library dlopen returned.
    let f = unsafe { libc::dlsym(lib, c.as_ptr()) };
    anyhow::ensure!(!f.is_null(), "the library has no {name}");
    // SAFETY: T is the function pointer type of the C declaration of `name`.
    Ok(unsafe { std::mem::transmute_copy(&f) })
}

fn dlopen(path: &str, flags: c_int) -> Option<*mut c_void> {
    let c = CString::new(path).ok()?;
    // SAFETY: dlopen of a library path.
    let lib = unsafe { libc::dlopen(c.as_ptr(), flags) };
    (!lib.is_null()).then_some(lib)
}

/// The folder of the loaded libmlx.so (the wheel's `mlx/lib`), from this process's maps.
fn libmlx_dir() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libmlx.so"))
        .and_then(|path| Path::new(path).parent().map(Path::to_path_buf))
}

impl Nvrtc {
    fn load(lib: *mut c_void) -> Result<Nvrtc> {
        let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int =
            symbol(lib, "nvrtcVersion")?;
        let mut version = (0, 0);
        // SAFETY: nvrtcVersion(int*, int*).
        unsafe { version_fn(&mut version.0, &mut version.1) };
        Ok(Nvrtc {
            version,
            create: symbol(lib, "nvrtcCreateProgram")?,
            compile: symbol(lib, "nvrtcCompileProgram")?,
            log_size: symbol(lib, "nvrtcGetProgramLogSize")?,
            log: symbol(lib, "nvrtcGetProgramLog")?,
            cubin_size: symbol(lib, "nvrtcGetCUBINSize")?,
            cubin: symbol(lib, "nvrtcGetCUBIN")?,
            destroy: symbol(lib, "nvrtcDestroyProgram")?,
        })
    }
}

impl Compiler {
    /// NVRTC at `nvrtc` (the library file), the CUDA headers in `include`, compiling for
    /// `arch`, keeping CUBINs in `cache`.
    pub fn new(nvrtc: &Path, include: PathBuf, arch: String, cache: PathBuf) -> Result<Self> {
        let lib = dlopen(&nvrtc.to_string_lossy(), libc::RTLD_NOW | libc::RTLD_LOCAL)
            .with_context(|| format!("could not load NVRTC from {}", nvrtc.display()))?;
        anyhow::ensure!(
            include.join("cuda_fp16.h").is_file(),
            "no CUDA headers in {}",
            include.display()
        );
        Ok(Compiler {
            nvrtc: Nvrtc::load(lib)?,
            include,
            arch,
            cache,
        })
    }

    /// NVRTC at `nvrtc` with the CUDA headers where its wheel puts them (`../include`
    /// beside `lib/`), compiling for `arch`, keeping CUBINs in `cache`.
    pub fn beside(nvrtc: &Path, arch: String, cache: PathBuf) -> Result<Self> {
        let include = nvrtc
            .parent()
            .map(|lib| lib.join("../include"))
            .unwrap_or_default();
        Compiler::new(nvrtc, include, arch, cache)
    }

    /// For this process's GPU: the NVRTC and headers of the CUDA wheels MLX's build
    /// loads (beside libmlx: `../../nvidia/cu13`), the architecture of device 0 as the
    /// driver reports it, the cache under `QUEST_CACHE`.
    fn for_this_gpu() -> Result<Self> {
        let cu13 = libmlx_dir()
            .context("could not find the loaded libmlx.so")?
            .join("../../nvidia/cu13");
        let arch = gpu_arch()?;
        let cache = crate::settings::cache_dir()?.join("cuda-kernels");
        Compiler::new(
            &cu13.join("lib/libnvrtc.so.13"),
            cu13.join("include"),
            arch,
            cache,
        )
    }

    /// The CUBIN of `text` (its kernel `symbol`), from the cache when an earlier process
    /// made it, else compiled now and kept.
    pub fn cubin(&self, text: &str) -> Result<Vec<u8>> {
        let mut key = Sha256::new();
        key.update(text.as_bytes());
        key.update(
            format!(
                "\n{OPTIONS_VERSION}\n{}\nnvrtc {}.{}\nmlx {}\n",
                self.arch,
                self.nvrtc.version.0,
                self.nvrtc.version.1,
                mlx_version()
            )
            .as_bytes(),
        );
        let key: String = key.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let path = self.cache.join(format!("{key}.cubin"));
        if let Ok(bytes) = std::fs::read(&path) {
            if !bytes.is_empty() {
                return Ok(bytes);
            }
        }
        let cubin = self.compile(text)?;
        std::fs::create_dir_all(&self.cache)
            .with_context(|| format!("creating {}", self.cache.display()))?;
        // Written whole, then renamed: a reader never sees half a file.
        let partial = path.with_extension(format!("cubin.{}", std::process::id()));
        std::fs::write(&partial, &cubin)?;
        std::fs::rename(&partial, &path)?;
        Ok(cubin)
    }

    /// NVRTC's version, `major.minor`.
    pub fn version(&self) -> String {
        format!("{}.{}", self.nvrtc.version.0, self.nvrtc.version.1)
    }

    /// Compiles `text` to a CUBIN with MLX's NVRTC options (mlx/backend/cuda/jit_module.cpp).
    pub fn compile(&self, text: &str) -> Result<Vec<u8>> {
        let n = &self.nvrtc;
        let source = CString::new(text)?;
        let file = CString::new("quest_kernel.cu")?;
        let options: Vec<CString> = [
            "--device-as-default-execution-space".to_owned(),
            format!("--gpu-architecture={}", self.arch),
            format!("--include-path={}", self.include.display()),
        ]
        .into_iter()
        .map(CString::new)
        .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut program: *mut c_void = std::ptr::null_mut();
        // SAFETY: NVRTC's C API, used as nvrtc.h documents; the program is destroyed below.
        unsafe {
            if (n.create)(
                &mut program,
                source.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            ) != 0
            {
                bail!("NVRTC could not take the kernel's source");
            }
            let compiled = (n.compile)(program, pointers.len() as c_int, pointers.as_ptr());
            let result = if compiled == 0 {
                let mut size = 0usize;
                (n.cubin_size)(program, &mut size);
                let mut cubin = vec![0u8; size];
                (n.cubin)(program, cubin.as_mut_ptr().cast());
                Ok(cubin)
            } else {
                let mut size = 0usize;
                (n.log_size)(program, &mut size);
                let mut log = vec![0u8; size.max(1)];
                (n.log)(program, log.as_mut_ptr().cast());
                let log = CStr::from_bytes_until_nul(&log)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(anyhow!("NVRTC could not compile it:\n{log}"))
            };
            (n.destroy)(&mut program);
            result
        }
    }
}

/// MLX's version, which a cached kernel is keyed by.
fn mlx_version() -> String {
    let mut s = unsafe { mlx_sys::mlx_string_new() };
    let version = unsafe {
        if mlx_sys::mlx_version(&mut s) == 0 {
            CStr::from_ptr(mlx_sys::mlx_string_data(s))
                .to_string_lossy()
                .into_owned()
        } else {
            "?".into()
        }
    };
    unsafe { mlx_sys::mlx_string_free(s) };
    version
}

/// Device 0's architecture as MLX compiles for it: `sm_90a` for compute capability 9.0
/// (the `a` from 9.0 on, as MLX's jit_module.cpp does), `sm_86` for 8.6.
fn gpu_arch() -> Result<String> {
    let lib = dlopen("libcuda.so.1", libc::RTLD_NOW | libc::RTLD_LOCAL)
        .context("could not load the NVIDIA driver (libcuda.so.1)")?;
    let init: unsafe extern "C" fn(u32) -> c_int = symbol(lib, "cuInit")?;
    let get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int = symbol(lib, "cuDeviceGet")?;
    let attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
        symbol(lib, "cuDeviceGetAttribute")?;
    let (mut device, mut major, mut minor) = (0, 0, 0);
    // SAFETY: the driver API as cuda.h declares it; 75 and 76 are
    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
    unsafe {
        anyhow::ensure!(init(0) == 0, "the NVIDIA driver did not start");
        anyhow::ensure!(get(&mut device, 0) == 0, "the NVIDIA driver found no GPU 0");
        anyhow::ensure!(
            attribute(&mut major, 75, device) == 0 && attribute(&mut minor, 76, device) == 0,
            "the NVIDIA driver gave no compute capability"
        );
    }
    Ok(format!(
        "sm_{major}{minor}{}",
        if major >= 9 { "a" } else { "" }
    ))
}

/// Device 0's streaming multiprocessors, asked of the driver once; `None` where it cannot
/// say (no driver, no GPU).
pub fn sm_count() -> Option<i32> {
    static SMS: OnceLock<Option<i32>> = OnceLock::new();
    *SMS.get_or_init(|| {
        let lib = dlopen("libcuda.so.1", libc::RTLD_NOW | libc::RTLD_LOCAL)?;
        let init: unsafe extern "C" fn(u32) -> c_int = symbol(lib, "cuInit").ok()?;
        let get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int =
            symbol(lib, "cuDeviceGet").ok()?;
        let attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
            symbol(lib, "cuDeviceGetAttribute").ok()?;
        let (mut device, mut sms) = (0, 0);
        // SAFETY: the driver API as cuda.h declares it; 16 is
        // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
        let ok = unsafe {
            init(0) == 0 && get(&mut device, 0) == 0 && attribute(&mut sms, 16, device) == 0
        };
        (ok && sms > 0).then_some(sms)
    })
}

/// This process's compiler, made once: `None` (said once on stderr) where it cannot be
/// made, and then MLX compiles quest's kernels from their source, as before.
pub fn compiler() -> Option<&'static Compiler> {
    static COMPILER: OnceLock<Option<Compiler>> = OnceLock::new();
    COMPILER
        .get_or_init(|| match crate::settings::KERNEL_CACHE.parse::<KernelCache>() {
            // MLX compiles quest's kernels from their source, in every process, as before.
            Ok(KernelCache::Off) => None,
            _ if cfg!(target_os = "macos") => None,
            _ => match Compiler::for_this_gpu() {
                Ok(c) => Some(c),
                Err(e) => {
                    eprintln!(
                        "quest: its CUDA kernels cannot be kept compiled here ({e:#}); MLX compiles them in each process"
                    );
                    None
                }
            },
        })
        .as_ref()
}

/// Where quest runs its kernels kept compiled (`QUEST_KERNEL_CACHE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelCache {
    /// In every process: handed over by key, a kept kernel costs the host less a call than
    /// MLX's compile from source, whose text MLX hashes at every launch (on an H100,
    /// Qwen3-0.6B's host time a layer 41.3 → 29.4 µs: docs/gpu/2026-12-06-qmv-applied/).
    On,
    /// Only in the processes that start their clocks with their first graph (an exercise);
    /// those that warm up first let MLX compile from source once, as before kept kernels
    /// were handed over by key (for measuring one against the other).
    Fresh,
    /// In none: MLX compiles them from source in every process.
    Off,
}

impl std::str::FromStr for KernelCache {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(KernelCache::On),
            "fresh" => Ok(KernelCache::Fresh),
            "off" => Ok(KernelCache::Off),
            other => Err(format!("unknown choice `{other}`; use on, fresh or off")),
        }
    }
}

/// `QUEST_KERNEL_CACHE=off`: MLX compiles quest's kernels from source in every process (the
/// way they ran before quest kept them compiled; for measuring one against the other).
pub const KEEP_ENV: &str = crate::settings::KERNEL_CACHE.name;

/// How a call hands MLX a kept kernel (`QUEST_KERNEL_HANDOFF`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// A short key; the CUBIN waits in MLX's module cache ([`Compiled::place`]).
    Key,
    /// The whole CUBIN, at every call.
    Bytes,
}

impl std::str::FromStr for Handoff {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "key" => Ok(Handoff::Key),
            "bytes" => Ok(Handoff::Bytes),
            other => Err(format!("unknown hand-off `{other}`; use key or bytes")),
        }
    }
}

/// A kernel variant compiled for this GPU: its `extern "C"` symbol and CUBIN, and the
/// short key a call hands MLX instead of the CUBIN where [`Compiled::place`] put the CUBIN
/// in MLX's own module cache.
pub struct Compiled {
    pub symbol: CString,
    pub cubin: Vec<u8>,
    pub key: Option<CString>,
}

impl Compiled {
    /// `symbol`'s CUBIN, placed for MLX to read by key when `QUEST_KERNEL_HANDOFF=key`
    /// (the default). Why: MLX 0.32.2 copies a precompiled kernel's image twice into every
    /// call's graph node and hashes all of it at every launch (mlx/backend/cuda/
    /// custom_kernel.cpp) — some 5 µs of host time a call for a 27 KB CUBIN (quest's are
    /// 9–45 KB), five calls a layer. With the image in MLX's module cache under the name MLX
    /// derives from the key, MLX reads it once per process and a call hands over 76 bytes. Where it
    /// cannot be placed (said once on stderr), the call hands over the CUBIN, as before.
    pub fn place(symbol: CString, cubin: Vec<u8>) -> Compiled {
        // A value other than these two stopped the process earlier (Kernels::for_process).
        let key = match crate::settings::KERNEL_HANDOFF.parse::<Handoff>() {
            Ok(Handoff::Bytes) => None,
            _ => place_in_mlx_cache(None, &symbol, &cubin)
                .map(|(key, _)| key)
                .map_err(|e| {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        eprintln!("quest: {e:#}; each call hands MLX the whole kernel")
                    });
                })
                .ok(),
        };
        Compiled { symbol, cubin, key }
    }

    /// What a call hands MLX as the kernel's "source": the key, else the CUBIN.
    fn handed(&self) -> &[u8] {
        match &self.key {
            Some(key) => key.as_bytes(),
            None => &self.cubin,
        }
    }
}

/// Puts `cubin` in MLX's module cache (`folder`, else the one MLX reads) and says its key
/// and file. The key is named by the CUBIN's sha256, so another CUBIN under the same kernel
/// name is another module.
fn place_in_mlx_cache(
    folder: Option<&Path>,
    symbol: &CStr,
    cubin: &[u8],
) -> Result<(CString, PathBuf)> {
    let key = CString::new(format!("quest-cubin:{}", crate::course::sha256_hex(cubin)))?;
    #[cfg(target_os = "macos")]
    {
        let _ = (folder, symbol);
        bail!("MLX has no CUDA backend on macOS")
    }
    #[cfg(not(target_os = "macos"))]
    {
        let mut what = [0 as c_char; 512];
        let folder = folder
            .map(|f| CString::new(f.as_os_str().as_encoded_bytes()))
            .transpose()?;
        // SAFETY: every pointer is valid for the length passed; the shim writes at most
        // `what.len()` bytes, NUL included.
        let placed = unsafe {
            quest_place_precompiled_module(
                folder.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
                symbol.as_ptr(),
                key.as_ptr(),
                cubin.as_ptr().cast(),
                cubin.len(),
                what.as_mut_ptr(),
                what.len(),
            )
        };
        // SAFETY: the shim wrote a NUL-terminated text into `what`.
        let what = unsafe { CStr::from_ptr(what.as_ptr()) }.to_string_lossy();
        if placed != 0 {
            bail!("quest's CUDA kernel could not be put in MLX's module cache: {what}");
        }
        Ok((key, PathBuf::from(what.into_owned())))
    }
}

/// Compiled variants by their constants, per kernel object: call descriptions of other
/// shapes with the same constants share one.
#[derive(Default)]
pub struct Variants(HashMap<Vec<(String, i32)>, Option<Rc<Compiled>>>);

impl Variants {
    /// The variant of `spec` for `ints`, compiled (or read from the cache) on first use;
    /// `None` where it cannot be, and MLX's source path runs it. Asked once per call
    /// description, which keeps the answer.
    pub fn get(&mut self, spec: &KernelSpec, ints: &[(String, i32)]) -> Option<Rc<Compiled>> {
        self.0
            .entry(ints.to_vec())
            .or_insert_with(|| {
                let compiler = compiler()?;
                let borrowed: Vec<(&str, i32)> =
                    ints.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                let made = spec.precompiled_text(&borrowed).and_then(|(symbol, text)| {
                    Ok(Compiled::place(
                        CString::new(symbol)?,
                        compiler.cubin(&text)?,
                    ))
                });
                match made {
                    Ok(compiled) => Some(Rc::new(compiled)),
                    Err(e) => {
                        eprintln!("quest: {e:#}; MLX compiles `{}` from its source", spec.name);
                        None
                    }
                }
            })
            .clone()
    }
}

// Only the Linux build of mlx-sys compiles the shim (macOS keeps upstream's build, and MLX
// has no CUDA there).
#[cfg(not(target_os = "macos"))]
extern "C" {
    /// vendor/mlx-sys/src/shims/precompiled_kernel.cpp.
    fn quest_precompiled_cuda_kernel(
        outputs: *mut mlx_sys::mlx_vector_array,
        name: *const c_char,
        binary: *const c_char,
        binary_len: usize,
        inputs: mlx_sys::mlx_vector_array,
        output_shapes: *const c_int,
        output_ndims: *const usize,
        output_dtypes: *const mlx_sys::mlx_dtype,
        num_outputs: usize,
        int_scalars: *const c_int,
        num_scalars: usize,
        grid_x: c_int,
        grid_y: c_int,
        grid_z: c_int,
        block_x: c_int,
        block_y: c_int,
        block_z: c_int,
        shared_memory: c_int,
        ensure_row_contiguous: bool,
        stream: mlx_sys::mlx_stream,
    ) -> c_int;

    /// vendor/mlx-sys/src/shims/precompiled_kernel.cpp.
    fn quest_place_precompiled_module(
        folder: *const c_char,
        name: *const c_char,
        key: *const c_char,
        binary: *const c_char,
        binary_len: usize,
        what: *mut c_char,
        what_len: usize,
    ) -> c_int;
}

/// One call of a compiled kernel: what MLX's precompiled path takes.
pub struct Call<'a> {
    /// Every output's dimensions, one after another, and how many each has.
    pub output_shapes: &'a [c_int],
    pub output_ndims: &'a [usize],
    pub output_dtypes: &'a [mlx_sys::mlx_dtype],
    pub scalars: &'a [c_int],
    pub grid: (i32, i32, i32),
    pub block: (i32, i32, i32),
    pub shared_memory: i32,
}

/// Adds `compiled` to the graph on the default stream: MLX's `precompiled_cuda_kernel`.
pub fn apply(
    compiled: &Compiled,
    inputs: mlx_sys::mlx_vector_array,
    call: &Call,
    outputs: &mut mlx_sys::mlx_vector_array,
    stream: mlx_sys::mlx_stream,
) -> bool {
    #[cfg(target_os = "macos")]
    {
        let _ = (compiled, inputs, call, outputs, stream);
        false
    }
    // SAFETY: every pointer is valid for the lengths passed; MLX copies what it keeps.
    #[cfg(not(target_os = "macos"))]
    unsafe {
        quest_precompiled_cuda_kernel(
            outputs,
            compiled.symbol.as_ptr(),
            compiled.handed().as_ptr().cast(),
            compiled.handed().len(),
            inputs,
            call.output_shapes.as_ptr(),
            call.output_ndims.as_ptr(),
            call.output_dtypes.as_ptr(),
            call.output_ndims.len(),
            call.scalars.as_ptr(),
            call.scalars.len(),
            call.grid.0,
            call.grid.1,
            call.grid.2,
            call.block.0,
            call.block.1,
            call.block.2,
            call.shared_memory,
            true,
            stream,
        ) == 0
    }
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;

    #[test]
    fn a_cubin_is_placed_where_mlx_reads_it_by_the_name_its_key_hashes_to() {
        let folder = tempfile::tempdir().unwrap();
        let symbol = CString::new("quest_demo").unwrap();
        let cubin = b"\x7fELF not a real CUBIN".to_vec();
        let (key, ptx) = place_in_mlx_cache(Some(folder.path()), &symbol, &cubin).unwrap();
        assert!(key.to_str().unwrap().starts_with("quest-cubin:"));
        // MLX's name for a precompiled module: `{name}_{std::hash(source):x}`.
        let stem = ptx.file_stem().unwrap().to_str().unwrap();
        let hash = stem.strip_prefix("quest_demo_").unwrap();
        assert!(!hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(ptx.parent().unwrap(), folder.path());
        assert_eq!(std::fs::read(&ptx).unwrap(), cubin);
        let names = std::fs::read_to_string(ptx.with_extension("txt")).unwrap();
        assert_eq!(names, "quest_demo\tquest_demo\n");

        // Placed again: the same key and file; a damaged file is written again.
        std::fs::write(&ptx, b"half").unwrap();
        let again = place_in_mlx_cache(Some(folder.path()), &symbol, &cubin).unwrap();
        assert_eq!(again, (key.clone(), ptx.clone()));
        assert_eq!(std::fs::read(&ptx).unwrap(), cubin);

        // Another CUBIN of the same kernel is another module.
        let other = place_in_mlx_cache(Some(folder.path()), &symbol, b"other").unwrap();
        assert_ne!(other.0, key);
        assert_ne!(other.1, ptx);
        let left: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("partial"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    #[test]
    fn the_hand_off_and_the_kernel_cache_take_their_values_only() {
        assert_eq!("key".parse::<Handoff>(), Ok(Handoff::Key));
        assert_eq!("bytes".parse::<Handoff>(), Ok(Handoff::Bytes));
        assert!("keys"
            .parse::<Handoff>()
            .unwrap_err()
            .contains("use key or bytes"));
        assert_eq!("fresh".parse(), Ok(KernelCache::Fresh));
        assert!("yes".parse::<KernelCache>().is_err());
    }

    #[test]
    fn a_folder_that_cannot_be_made_is_said() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let symbol = CString::new("quest_demo").unwrap();
        let e =
            place_in_mlx_cache(Some(&file.path().join("under-a-file")), &symbol, b"x").unwrap_err();
        assert!(format!("{e:#}").contains("cannot be made"), "{e:#}");
    }
}
