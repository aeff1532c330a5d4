//! A learner's own CUDA kernel inside quest's model: the same road quest's kernels take
//! ([`super::custom`]: MLX's custom-kernel API, mlx-c's `mlx_fast_cuda_kernel_*`), for a
//! kernel whose body an exercise writes.
//!
//! ```text
//! const NORM: YourKernel = YourKernel {
//!     name: "my_norm",
//!     inputs: &[("x", Dtype::Float16), ("weight", Dtype::Float16), ("eps", Dtype::Float32)],
//!     outputs: &[("out", Dtype::Float16)],
//!     body: r#"  const int row = blockIdx.x; …"#,
//! };
//! // in `Pieces::rms_norm`: one block of 256 threads per row, D the row's width
//! NORM.launch(&[x, weight, &eps], (x.shape(), x.dtype()), (rows, 1, 1), (256, 1, 1), &[("D", d)])
//! ```
//!
//! MLX wraps `body` in a `__global__` function taking the inputs (`const T*`) and then the
//! outputs (`T*`) by their names, and each `(name, value)` of `ints` as a `constexpr int`
//! before the body. On a CUDA build quest compiles it once for this GPU and keeps it
//! ([`super::precompiled`]); elsewhere it cannot run, and [`YourKernel::compile_here`]
//! compiles the same text with NVRTC from PyPI, which needs no GPU, to say whether it
//! compiles and what NVRTC said.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use mlx_rs::{Array, Dtype};

use super::custom::{Config, Objects, Output};
use super::spec::KernelSpec;
use crate::device::Backend;

/// A CUDA kernel an exercise writes: its name, its arguments' names and dtypes, its body.
#[derive(Clone, Copy)]
pub struct YourKernel {
    /// A C identifier, one per kernel of the exercise.
    pub name: &'static str,
    pub inputs: &'static [(&'static str, Dtype)],
    pub outputs: &'static [(&'static str, Dtype)],
    /// The kernel's body, between the braces of the function MLX writes around it.
    pub body: &'static str,
}

/// What NVRTC made of a kernel off the GPU: the architecture and the CUBIN's size.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub arch: String,
    pub nvrtc: String,
    pub cubin_bytes: usize,
}

thread_local! {
    // MLX objects belong to the thread that made them, as the model's arrays do: one
    // kernel object per kernel name, a call description per output shape, grid and ints.
    static OBJECTS: RefCell<Objects<&'static str, CallKey>> = RefCell::default();
}

type CallKey = (
    Vec<i32>,
    (i32, i32, i32),
    (i32, i32, i32),
    Vec<(String, i32)>,
);

impl YourKernel {
    fn spec(&self) -> KernelSpec {
        KernelSpec {
            name: self.name,
            inputs: self.inputs.to_vec(),
            outputs: self.outputs.to_vec(),
            source: self.body,
            header: String::new(),
            shared_memory: 0,
        }
    }

    /// Runs the kernel on `inputs` (in the order of [`YourKernel::inputs`]), one output of
    /// `output`'s shape and dtype: `blocks` thread blocks of `threads` threads each, and
    /// `ints` as compile-time constants of the body. A node of the graph like any op:
    /// nothing runs until the graph is evaluated. Only on a CUDA build, on an NVIDIA GPU.
    pub fn launch(
        &self,
        inputs: &[&Array],
        output: (&[i32], Dtype),
        blocks: (i32, i32, i32),
        threads: (i32, i32, i32),
        ints: &[(&str, i32)],
    ) -> Result<Array> {
        if Backend::detect() != Backend::Cuda {
            bail!(
                "`{}` is a CUDA kernel: it runs on an NVIDIA GPU, with quest built for CUDA (README). \
                 Here quest can only compile it (`YourKernel::compile_here`)",
                self.name
            );
        }
        anyhow::ensure!(
            inputs.len() == self.inputs.len(),
            "`{}` takes {} inputs ({}), given {}",
            self.name,
            self.inputs.len(),
            self.inputs
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
            inputs.len()
        );
        // The body reads each input as the type it declares: another dtype would be read
        // as garbage, so it is refused here, named.
        for (array, (name, dtype)) in inputs.iter().zip(self.inputs) {
            anyhow::ensure!(
                array.dtype() == *dtype,
                "`{}`'s input `{name}` is declared {dtype:?} and given {:?}: convert it first (`as_dtype`)",
                self.name,
                array.dtype()
            );
        }
        // MLX counts the grid in threads, as Metal does.
        let grid = (
            blocks.0 * threads.0,
            blocks.1 * threads.1,
            blocks.2 * threads.2,
        );
        let key: CallKey = (
            output.0.to_vec(),
            grid,
            threads,
            ints.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        );
        let hand_compiled = super::precompiled::compiler().is_some();
        let kernel = *self;
        let outs = OBJECTS.with(|objects| {
            objects.borrow_mut().apply(
                &self.name,
                |_| kernel.spec().make(),
                &key,
                |_| {
                    let out = Output {
                        shape: output.0,
                        dtype: output.1,
                    };
                    Config::new(&[out], grid, threads, ints)
                },
                inputs,
                hand_compiled,
            )
        })?;
        Ok(outs.into_iter().next().expect("a kernel of one output"))
    }

    /// Where the kernel can run (a CUDA build on an NVIDIA GPU): nothing, it compiles at its
    /// first launch. Anywhere else: compiles it for an H200 (`sm_90a`) with
    /// [`YourKernel::compile_here`] and stops the run, saying what NVRTC said or that it
    /// compiled and runs on a GPU only. An exercise calls it before it loads the model.
    pub fn compile_or_stop(&self, ints: &[(&str, i32)]) -> Result<()> {
        if Backend::detect() == Backend::Cuda {
            return Ok(());
        }
        let compiled = self.compile_here(ints, "sm_90a")?;
        bail!(
            "your kernel `{}` compiles for {} with NVRTC {} ({} bytes of CUBIN). It runs on an \
             NVIDIA GPU only, with quest built for CUDA (README): on this machine the lesson \
             can check no more than that",
            self.name,
            compiled.arch,
            compiled.nvrtc,
            compiled.cubin_bytes
        )
    }

    /// Whether an exercise's error is [`YourKernel::compile_or_stop`]'s stop after a
    /// kernel that compiled (its run's stderr carries the text, not the type).
    pub fn stopped_compiled(error: &str) -> bool {
        error.contains("` compiles for ")
    }

    /// The source quest compiles for `ints`, as MLX's would be (the same body).
    pub fn text(&self, ints: &[(&str, i32)]) -> Result<String> {
        Ok(self.spec().precompiled_text(ints)?.1)
    }

    /// Compiles the kernel for `ints` with NVRTC on this machine, GPU or not: for `arch`
    /// (an H200's is `sm_90a`), with the NVRTC of [`nvrtc_here`]. `Err` holds NVRTC's log.
    pub fn compile_here(&self, ints: &[(&str, i32)], arch: &str) -> Result<Compiled> {
        let cache = crate::settings::cache_dir()?.join("your-kernels");
        self.compile_with(&nvrtc_here()?, ints, arch, &cache)
    }

    /// [`YourKernel::compile_here`] with the NVRTC library at `nvrtc` (its CUDA headers in
    /// `../include`).
    pub fn compile_with(
        &self,
        nvrtc: &Path,
        ints: &[(&str, i32)],
        arch: &str,
        cache: &Path,
    ) -> Result<Compiled> {
        let compiler =
            super::precompiled::Compiler::beside(nvrtc, arch.to_owned(), cache.to_owned())?;
        let cubin = compiler
            .compile(&self.text(ints)?)
            .with_context(|| format!("your kernel `{}` does not compile", self.name))?;
        Ok(Compiled {
            arch: arch.to_owned(),
            nvrtc: compiler.version(),
            cubin_bytes: cubin.len(),
        })
    }
}

/// The NVRTC wheels quest compiles with off the GPU: the versions `mlx-cuda-13==0.32.2`
/// resolves to, so a kernel compiles here as on the GPU machine.
pub const NVRTC_WHEELS: &[&str] = &["nvidia-cuda-nvrtc==13.5.37", "nvidia-cuda-runtime==13.5.37"];

/// NVRTC's library file (`…/nvidia/cu13/lib/libnvrtc.so.13`, the CUDA headers in
/// `…/nvidia/cu13/include`): `QUEST_NVRTC`'s, else the wheels of [`NVRTC_WHEELS`],
/// fetched from PyPI once into `QUEST_CACHE`.
pub fn nvrtc_here() -> Result<PathBuf> {
    if let Some(path) = crate::settings::NVRTC.os() {
        return Ok(PathBuf::from(path));
    }
    let root = crate::settings::cache_dir()?.join("nvrtc-13.5.37");
    fetch_nvrtc(&root)
}

/// Fetches [`NVRTC_WHEELS`] with `python3 -m pip download` and unpacks them into `root`
/// (once: a complete `root` is used as it is); the library file.
pub fn fetch_nvrtc(root: &Path) -> Result<PathBuf> {
    let lib = root.join("nvidia/cu13/lib/libnvrtc.so.13");
    if lib.is_file() && root.join("nvidia/cu13/include/cuda_fp16.h").is_file() {
        return Ok(lib);
    }
    // Each fetch in its own folders, then one rename: two processes (or tests) fetching
    // at once never see each other's half-unpacked files, and the first rename wins.
    static FETCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = FETCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let unique = format!("{}-{n}", std::process::id());
    let download = root.with_extension(format!("download-{unique}"));
    let staging = root.with_extension(format!("staging-{unique}"));
    let fetched = std::process::Command::new("python3")
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
        .args(NVRTC_WHEELS)
        .status();
    if !fetched.is_ok_and(|s| s.success()) {
        let _ = std::fs::remove_dir_all(&download);
        bail!(
            "could not fetch NVRTC from PyPI ({}) with python3's pip: connect to the network, \
             or set QUEST_NVRTC to an NVRTC library (libnvrtc.so.13, its CUDA headers in ../include)",
            NVRTC_WHEELS.join(", ")
        );
    }
    for wheel in std::fs::read_dir(&download)?.flatten() {
        let unpacked = std::process::Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(wheel.path())
            .arg(&staging)
            .status();
        if !unpacked.is_ok_and(|s| s.success()) {
            bail!("could not unpack {}", wheel.path().display());
        }
    }
    let _ = std::fs::remove_dir_all(&download);
    if !lib.is_file() {
        // An earlier fetch that stopped half-way: this one takes its place.
        let _ = std::fs::remove_dir_all(root);
    }
    if std::fs::rename(&staging, root).is_err() {
        // Another fetch finished first: its files are the same.
        let _ = std::fs::remove_dir_all(&staging);
    }
    anyhow::ensure!(lib.is_file(), "the NVRTC wheel has no {}", lib.display());
    Ok(lib)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOUBLE: YourKernel = YourKernel {
        name: "double",
        inputs: &[("x", Dtype::Float32)],
        outputs: &[("out", Dtype::Float32)],
        body: "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < N) out[i] = 2.0f * x[i];",
    };

    #[test]
    fn your_kernel_is_written_as_quest_compiles_its_own() {
        let text = DOUBLE.text(&[("N", 8)]).unwrap();
        assert!(
            text.contains("extern \"C\" __global__ void quest_double_N8(\n    const float* x,\n    float* out) {\n  constexpr int N = 8;\n"),
            "{text}"
        );
        assert!(
            text.ends_with("if (i < N) out[i] = 2.0f * x[i];\n}\n"),
            "{text}"
        );
    }

    #[test]
    fn off_cuda_a_launch_says_where_the_kernel_runs() {
        if Backend::detect() == Backend::Cuda {
            return;
        }
        let x = Array::from_slice(&[1.0f32, 2.0], &[2]);
        let err = DOUBLE
            .launch(
                &[&x],
                (&[2], Dtype::Float32),
                (1, 1, 1),
                (32, 1, 1),
                &[("N", 2)],
            )
            .unwrap_err();
        assert!(format!("{err}").contains("runs on an NVIDIA GPU"), "{err}");
    }
}
