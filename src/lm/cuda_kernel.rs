//! quest's own CUDA kernels inside MLX's graph (issue #12), and which of them are on.
//!
//! Each runs as an MLX custom kernel (mlx-c's `mlx_fast_cuda_kernel_*`, which mlx-rs does
//! not wrap): MLX compiles its source with NVRTC on first use, and a call is one node of
//! the step's graph like any primitive. Every kernel has a switch, `QUEST_<NAME>=mlx|quest`
//! (read once; `mlx` is MLX's own ops; the default is [`Kernel::default_choice`]), so each
//! is measured against what it replaces (`quest qmv --kernel …`). A new kernel is one
//! entry in [`Kernel`].
//!
//! Compiled once per GPU: MLX 0.32.2's CUDA backend compiles a source-text custom kernel
//! in every new process (it keeps none on disk), and quest's take about 10 s to compile on
//! the H200, at their first use, inside the decode loop; a learner's run is a new process
//! each time (`quest run`, `submit`, `bench`). So quest compiles each variant itself and
//! keeps it on disk ([`crate::lm::precompiled`]), and hands MLX the compiled kernel; where
//! that cannot be done (no NVRTC found, say), MLX compiles the source as before.
//!
//! Where they are on by default: where they are kept compiled ([`kept_compiled`]), and in a
//! process that warms its graphs up before its clocks start ([`warm_process`]: `quest fit`,
//! `qmv`, `slope`, `batch`; there MLX compiles them from source once, which costs the host
//! less per call: [`hand_compiled`]). Elsewhere every new process would pay the compile
//! again, which cannot pay (on Qwen3-8B's shape they save about 3 ms a token, 150 → 278
//! tok/s, so ~3000 tokens to earn back 10 s), and MLX's ops run.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use anyhow::{anyhow, bail, Result};
use mlx_rs::{Array, Dtype, Stream};

use crate::device::Backend;

/// quest's kernels, each replacing some of MLX's ops in a decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// A 4-bit matrix times one row ([`crate::lm::qmv`]), for MLX's `quantized_matmul`.
    Matvec,
    /// A decode step's q, k and v heads from the fused projection — per-head q/k norm and
    /// RoPE included — in one kernel ([`crate::lm::qkv`]), for a split, three reshapes,
    /// two norms and two RoPEs.
    Qkv,
    /// The residual add and the RMS norm after it ([`crate::lm::add_norm`]), for an `add`
    /// and an `rms_norm`, twice a block.
    AddNorm,
    /// A decode step's attention from the fused projection's row: the heads as [`Kernel::Qkv`]
    /// makes them, the new key and value written into the cache, attention over it
    /// ([`crate::lm::attend`]), for the q/k/v kernel, two cache writes, two cache views,
    /// MLX's attention and a reshape.
    Attend,
}

impl Kernel {
    pub const ALL: [Kernel; 4] = [Kernel::Matvec, Kernel::Qkv, Kernel::AddNorm, Kernel::Attend];
    pub const CHOICES: &'static str = "matvec, qkv, addnorm or attend";

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Matvec => "matvec",
            Kernel::Qkv => "qkv",
            Kernel::AddNorm => "addnorm",
            Kernel::Attend => "attend",
        }
    }

    /// What runs when its environment variable is unset: quest's kernel where it kept
    /// SmolLM2's greedy tokens on its real weights and was ahead of MLX's ops in interleaved
    /// runs over six shapes on the H200 (docs/benchmarks.md, issue #12, sessions 5–6). The
    /// q/k/v heads: logits MLX's to the bit, ×0.96–1.54 (10 of 12 rows at least even).
    /// Attention with the cache write: logits within 1.2e-2, ×1.04–1.76 (all six, twice).
    /// The folding matvec (with attention on): within 1.7e-2, ×1.04–1.53 (all six). The
    /// add + norm kernel measured no gain (×0.92–1.10): MLX's.
    ///
    ///
    /// That is where the kernels are kept compiled across processes ([`kept_compiled`]) or
    /// in a warmed process ([`warm_process`]); in any other, MLX's ops (the module doc says
    /// why).
    pub fn default_choice(self) -> Impl {
        if !WARMED.load(Ordering::Relaxed) && !kept_compiled() {
            return Impl::Mlx;
        }
        self.warmed_choice()
    }

    /// What runs by default in a process that warms its graphs up before timing them.
    pub fn warmed_choice(self) -> Impl {
        match self {
            Kernel::Matvec | Kernel::Qkv | Kernel::Attend => Impl::Quest,
            Kernel::AddNorm => Impl::Mlx,
        }
    }

    /// The environment variable that chooses (`mlx` or `quest`).
    pub fn env(self) -> &'static str {
        match self {
            Kernel::Matvec => "QUEST_QMV",
            Kernel::Qkv => "QUEST_QKV",
            Kernel::AddNorm => "QUEST_ADDNORM",
            Kernel::Attend => "QUEST_ATTEND",
        }
    }

    fn slot(self) -> &'static AtomicU8 {
        // 0: not chosen yet (read the environment on first use), 1: MLX, 2: quest.
        static SLOTS: [AtomicU8; Kernel::ALL.len()] =
            [const { AtomicU8::new(0) }; Kernel::ALL.len()];
        &SLOTS[self as usize]
    }
}

impl std::str::FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kernel `{s}`; use {}", Kernel::CHOICES))
    }
}

/// Whose code runs where a kernel of quest's could.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// MLX's own ops.
    Mlx,
    /// quest's kernel.
    Quest,
}

impl Impl {
    pub const CHOICES: &'static str = "mlx or quest";

    pub fn as_str(self) -> &'static str {
        match self {
            Impl::Mlx => "mlx",
            Impl::Quest => "quest",
        }
    }
}

impl std::str::FromStr for Impl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mlx" => Ok(Impl::Mlx),
            "quest" => Ok(Impl::Quest),
            other => Err(format!("unknown choice `{other}`; use {}", Impl::CHOICES)),
        }
    }
}

/// Set by [`warm_process`].
static WARMED: AtomicBool = AtomicBool::new(false);

/// Says this process runs every graph once before its clocks start (the in-process
/// benchmarks), so quest's kernels, compiled at that first run, are on by default here.
/// Call it before the first graph is built: a kernel's choice is read once.
pub fn warm_process() {
    WARMED.store(true, Ordering::Relaxed);
}

/// Whether quest's kernels are kept compiled across processes (by quest, on disk), so a new
/// process need not compile them again: on CUDA, where NVRTC and the GPU's architecture
/// were found ([`crate::lm::precompiled::compiler`]).
pub fn kept_compiled() -> bool {
    CUDA.with(|c| *c) && crate::lm::precompiled::compiler().is_some()
}

/// Whether this process hands MLX the kernels quest compiled, rather than their source:
/// where they are kept compiled, except in a warmed process. There MLX compiles each from
/// source once, before the clocks start, and a call costs the host less: MLX copies and
/// hashes a precompiled kernel's whole binary (13–28 KB) at every call, a source-built one's
/// name and text (measured on the H200, `quest fit`: host 84 against 106 µs a layer on
/// Qwen3-8B, 279 against 258 tok/s; docs/gpu/2026-12-01-kept-kernels).
fn hand_compiled() -> bool {
    !WARMED.load(Ordering::Relaxed) && kept_compiled()
}

/// quest's kernels that run in the graphs built now (none off CUDA): what a report says
/// it measured.
pub fn running() -> Result<Vec<&'static str>> {
    let mut names = Vec::new();
    for kernel in Kernel::ALL {
        if in_use(kernel)? {
            names.push(kernel.name());
        }
    }
    Ok(names)
}

/// What runs for `kernel`: its environment variable, else [`Kernel::default_choice`].
pub fn current(kernel: Kernel) -> Result<Impl> {
    match kernel.slot().load(Ordering::Relaxed) {
        1 => Ok(Impl::Mlx),
        2 => Ok(Impl::Quest),
        _ => {
            let choice = match std::env::var(kernel.env()) {
                Ok(v) if !v.is_empty() => v
                    .parse()
                    .map_err(|e: String| anyhow!("{}: {e}", kernel.env()))?,
                _ => kernel.default_choice(),
            };
            set(kernel, choice);
            Ok(choice)
        }
    }
}

/// Chooses for the graphs built from now on (e.g. to interleave both in one run).
pub fn set(kernel: Kernel, choice: Impl) {
    let v = match choice {
        Impl::Mlx => 1,
        Impl::Quest => 2,
    };
    kernel.slot().store(v, Ordering::Relaxed);
}

thread_local! {
    // Asked of MLX once per thread: this is checked for every projection of every step.
    static CUDA: bool = Backend::detect() == Backend::Cuda;
}

/// Whether quest's `kernel` runs in the graphs built now: chosen, and MLX runs on CUDA.
pub fn in_use(kernel: Kernel) -> Result<bool> {
    Ok(CUDA.with(|c| *c) && current(kernel)? == Impl::Quest)
}

thread_local! {
    static POSITION: std::cell::RefCell<Option<(i32, Array)>> = const { std::cell::RefCell::new(None) };
}

/// `[position]` as an int32 array for a kernel's input: the same array for every layer of
/// a step (each new array is host work, and a step asks once a layer).
pub fn position(position: i32) -> Array {
    POSITION.with(|cell| {
        let mut cell = cell.borrow_mut();
        match &*cell {
            Some((p, array)) if *p == position => array.clone(),
            _ => {
                let array = Array::from_slice(&[position], &[1]);
                *cell = Some((position, array.clone()));
                array
            }
        }
    })
}

/// One of quest's kernels for MLX: MLX's custom-kernel object (its name, argument names,
/// source and shared memory fixed when it is made) and the variants quest compiled of it
/// ([`crate::lm::precompiled`]), which run instead where there are. MLX objects belong to
/// the thread that made them, as the model's arrays do, so callers keep these in
/// thread-locals.
pub struct CustomKernel {
    raw: mlx_sys::mlx_fast_cuda_kernel,
    spec: KernelSpec,
    /// The inputs whose shape the source reads, by position: a compiled variant gets them
    /// as ints (found once here, not at every call).
    shaped: Vec<usize>,
    compiled: std::cell::RefCell<crate::lm::precompiled::Variants>,
}

impl Drop for CustomKernel {
    fn drop(&mut self) {
        unsafe { mlx_sys::mlx_fast_cuda_kernel_free(self.raw) };
    }
}

fn strings(items: &[&str]) -> Result<mlx_sys::mlx_vector_string> {
    let vec = unsafe { mlx_sys::mlx_vector_string_new() };
    for item in items {
        let c = CString::new(*item)?;
        if unsafe { mlx_sys::mlx_vector_string_append_value(vec, c.as_ptr()) } != 0 {
            unsafe { mlx_sys::mlx_vector_string_free(vec) };
            bail!("mlx: could not build a kernel's argument names");
        }
    }
    Ok(vec)
}

/// What MLX compiles for one of quest's kernels: its name, its arguments' names and dtypes
/// (inputs, then outputs), the body, the header before it and its shared memory. [`make`]
/// gives it to MLX; [`text`] writes the source MLX would compile for it, so that it can be
/// compiled off the GPU (`quest dev kernels`, docs/gpu/nvrtc_check.py).
///
/// [`make`]: KernelSpec::make
/// [`text`]: KernelSpec::text
#[derive(Clone)]
pub struct KernelSpec {
    pub name: &'static str,
    pub inputs: Vec<(&'static str, Dtype)>,
    pub outputs: Vec<(&'static str, Dtype)>,
    pub source: &'static str,
    pub header: String,
    pub shared_memory: i32,
}

impl KernelSpec {
    pub fn make(&self) -> Result<CustomKernel> {
        CustomKernel::new(self)
    }

    /// The inputs whose shape the source reads (`{name}_shape`).
    fn reads_shape(&self, input: &str) -> bool {
        self.source.contains(&format!("{input}_shape"))
    }

    /// The kernel for `ints` as quest compiles it itself ([`crate::lm::precompiled`]): its
    /// `extern "C"` symbol and a self-contained source with the same body as
    /// [`KernelSpec::text`]'s, taking the inputs, the outputs, then for each input whose
    /// shape it reads that shape as [`crate::lm::precompiled::SHAPE_INTS`] ints (MLX passes
    /// a precompiled kernel no shapes; it passes int scalars after the outputs).
    /// Only the CUDA headers are included (no cooperative groups, which none of quest's
    /// kernels use: their header needs libcu++ from MLX's wheel).
    pub fn precompiled_text(&self, ints: &[(&str, i32)]) -> Result<(String, String)> {
        use crate::lm::precompiled::SHAPE_INTS;
        anyhow::ensure!(
            !self.source.contains("cg::"),
            "`{}` uses cooperative groups, which quest's own compile does not include",
            self.name
        );
        let mut symbol = format!("quest_{}", self.name);
        for (name, value) in ints {
            symbol += &format!("_{name}{}", *value as u32);
        }
        let mut params = Vec::new();
        let mut shaped = Vec::new();
        for (name, dtype) in &self.inputs {
            params.push(format!("    const {}* {name}", cuda_type(*dtype)?));
            for suffix in ["strides", "ndim"] {
                if self.source.contains(&format!("{name}_{suffix}")) {
                    bail!(
                        "`{}` reads {name}_{suffix}, which a precompiled kernel is not given",
                        self.name
                    );
                }
            }
            if self.reads_shape(name) {
                shaped.push(*name);
            }
        }
        for (name, dtype) in &self.outputs {
            params.push(format!("    {}* {name}", cuda_type(*dtype)?));
        }
        for name in &shaped {
            params.extend((0..SHAPE_INTS).map(|i| format!("    int {name}_shape_{i}")));
        }
        let mut text = format!(
            "// quest's `{}` kernel, compiled by quest for MLX's precompiled custom kernels.\n\
             #include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\n\
             // NVRTC has no <cstdint>; MLX's device headers give these.\n\
             typedef signed char int8_t;\ntypedef unsigned char uint8_t;\ntypedef short int16_t;\n\
             typedef unsigned short uint16_t;\ntypedef int int32_t;\ntypedef unsigned int uint32_t;\n\
             typedef long long int64_t;\ntypedef unsigned long long uint64_t;\n\
             #ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n\n{}\
             extern \"C\" __global__ void {symbol}(\n{}) {{\n",
            self.name,
            self.header,
            params.join(",\n")
        );
        for name in &shaped {
            let dims: Vec<String> = (0..SHAPE_INTS)
                .map(|i| format!("{name}_shape_{i}"))
                .collect();
            text += &format!(
                "  const int {name}_shape[{SHAPE_INTS}] = {{{}}};\n",
                dims.join(", ")
            );
        }
        for (name, value) in ints {
            text += &format!("  constexpr int {name} = {value};\n");
        }
        text += "\n";
        text += self.source;
        text += "\n}\n";
        Ok((symbol, text))
    }

    /// The source MLX 0.32's CUDA backend builds for a call with the compile-time
    /// constants `ints` (mlx/backend/cuda/custom_kernel.cpp, `build_kernel`; every input an
    /// array of at least one dimension).
    pub fn text(&self, ints: &[(&str, i32)]) -> Result<String> {
        let mut text = format!(
            "\n#include \"mlx/backend/cuda/device/utils.cuh\"\n\n#include <cooperative_groups.h>\n\n{}\
             namespace mlx::core::cu {{\n\nnamespace cg = cooperative_groups;\n\n\
             __global__ void custom_kernel_{}(\n",
            self.header, self.name
        );
        for (name, dtype) in &self.inputs {
            text += &format!("    const {}* {name},\n", cuda_type(*dtype)?);
            for (suffix, kind) in [("shape", "Shape"), ("strides", "Strides"), ("ndim", "int")] {
                if self.source.contains(&format!("{name}_{suffix}")) {
                    text += &format!("    const __grid_constant__ {kind} {name}_{suffix},\n");
                }
            }
        }
        let outputs = self
            .outputs
            .iter()
            .map(|(name, dtype)| Ok(format!("    {}* {name}", cuda_type(*dtype)?)))
            .collect::<Result<Vec<_>>>()?;
        text += &outputs.join(",\n");
        text += ") {\n";
        for (name, value) in ints {
            text += &format!("  constexpr int {name} = {value};\n");
        }
        if !ints.is_empty() {
            text += "\n";
        }
        text += self.source;
        text += "\n}\n\n} // namespace mlx::core::cu\n";
        Ok(text)
    }

    /// [`KernelSpec::text`] under the file name `file`, and the text quest compiles.
    pub fn source(&self, file: String, ints: &[(&str, i32)]) -> Result<KernelSource> {
        Ok(KernelSource {
            file,
            text: self.text(ints)?,
            precompiled: self.precompiled_text(ints)?.1,
        })
    }
}

/// A kernel's full source (as [`KernelSpec::text`] writes it) under a file name that says
/// which variant it is.
pub struct KernelSource {
    pub file: String,
    pub text: String,
    /// The same kernel as quest compiles it itself ([`KernelSpec::precompiled_text`]).
    pub precompiled: String,
}

fn cuda_type(dtype: Dtype) -> Result<&'static str> {
    Ok(match dtype {
        Dtype::Float16 => "__half",
        Dtype::Float32 => "float",
        Dtype::Bfloat16 => "__nv_bfloat16",
        Dtype::Int32 => "int32_t",
        Dtype::Uint32 => "uint32_t",
        other => bail!("quest's kernels take no {other:?}"),
    })
}

/// An output's shape and dtype.
#[derive(Clone, Copy)]
pub struct Output<'a> {
    pub shape: &'a [i32],
    pub dtype: Dtype,
}

impl CustomKernel {
    /// MLX wraps the spec's source in a `__global__` function taking the inputs (as
    /// `const T*`) then the outputs (`T*`), by their names; the header goes before it.
    /// Inputs are made row contiguous first.
    pub fn new(spec: &KernelSpec) -> Result<Self> {
        let names =
            |args: &[(&'static str, Dtype)]| args.iter().map(|(n, _)| *n).collect::<Vec<_>>();
        let input_names = strings(&names(&spec.inputs))?;
        let output_names = strings(&names(&spec.outputs))?;
        let (c_name, c_source, c_header) = (
            CString::new(spec.name)?,
            CString::new(spec.source)?,
            CString::new(spec.header.as_str())?,
        );
        let kernel = unsafe {
            let k = mlx_sys::mlx_fast_cuda_kernel_new(
                c_name.as_ptr(),
                input_names,
                output_names,
                c_source.as_ptr(),
                c_header.as_ptr(),
                true,
                spec.shared_memory,
            );
            mlx_sys::mlx_vector_string_free(input_names);
            mlx_sys::mlx_vector_string_free(output_names);
            k
        };
        if kernel.ctx.is_null() {
            bail!("mlx: could not make quest's `{}` kernel", spec.name);
        }
        Ok(CustomKernel {
            raw: kernel,
            spec: spec.clone(),
            shaped: (spec.inputs.iter().enumerate())
                .filter(|(_, (name, _))| spec.reads_shape(name))
                .map(|(i, _)| i)
                .collect(),
            compiled: Default::default(),
        })
    }

    /// Adds the kernel to the graph (lazily, on the default stream), with `config`'s
    /// outputs, grid and constants.
    pub fn apply(&self, inputs: &[&Array], config: &Config) -> Result<Vec<Array>> {
        unsafe {
            let ins = mlx_sys::mlx_vector_array_new();
            let mut ok = true;
            for a in inputs {
                ok &= mlx_sys::mlx_vector_array_append_value(ins, a.as_ptr()) == 0;
            }
            let mut outs = mlx_sys::mlx_vector_array_new();
            let stream = Stream::new();
            let compiled = if hand_compiled() {
                // Looked up once per call description, then kept in it.
                let found = config
                    .compiled
                    .get_or_init(|| self.compiled.borrow_mut().get(&self.spec, &config.ints));
                found.as_deref()
            } else {
                None
            };
            if let (true, Some(compiled)) = (ok, compiled) {
                // An input's shape, where the kernel reads it, as ints after the outputs.
                let mut scalars = Vec::new();
                for &i in &self.shaped {
                    let mut dims = inputs[i].shape().to_vec();
                    dims.resize(crate::lm::precompiled::SHAPE_INTS, 0);
                    scalars.extend(dims);
                }
                let call = crate::lm::precompiled::Call {
                    output_shapes: &config.output_shapes,
                    output_ndims: &config.output_ndims,
                    output_dtypes: &config.output_dtypes,
                    scalars: &scalars,
                    grid: config.grid,
                    block: config.block,
                    shared_memory: self.spec.shared_memory,
                };
                ok =
                    crate::lm::precompiled::apply(compiled, ins, &call, &mut outs, stream.as_ptr());
            } else if ok {
                ok = mlx_sys::mlx_fast_cuda_kernel_apply(
                    &mut outs,
                    self.raw,
                    ins,
                    config.raw,
                    stream.as_ptr(),
                ) == 0;
            }
            let mut arrays = Vec::with_capacity(config.outputs);
            for i in 0..config.outputs {
                if !ok {
                    break;
                }
                let mut y = mlx_sys::mlx_array_new();
                ok = mlx_sys::mlx_vector_array_get(&mut y, outs, i) == 0;
                if ok {
                    arrays.push(Array::from_ptr(y));
                } else {
                    mlx_sys::mlx_array_free(y);
                }
            }
            mlx_sys::mlx_vector_array_free(ins);
            mlx_sys::mlx_vector_array_free(outs);
            if !ok {
                bail!("mlx: one of quest's kernels could not be applied");
            }
            Ok(arrays)
        }
    }
}

/// A call's outputs (shapes, dtypes), grid and compile-time constants. Made once per shape
/// and kept: a decode step calls each kernel many times with the same one, and every
/// call's host time counts (see the module docs of [`crate::lm::qkv`]).
pub struct Config {
    raw: mlx_sys::mlx_fast_cuda_kernel_config,
    outputs: usize,
    // The same description for a kernel quest compiled (crate::lm::precompiled).
    ints: Vec<(String, i32)>,
    output_shapes: Vec<i32>,
    output_ndims: Vec<usize>,
    output_dtypes: Vec<mlx_sys::mlx_dtype>,
    grid: (i32, i32, i32),
    block: (i32, i32, i32),
    /// The kernel's compiled variant for `ints`, once looked up (a config belongs to one
    /// kernel object).
    compiled: std::cell::OnceCell<Option<std::rc::Rc<crate::lm::precompiled::Compiled>>>,
}

impl Drop for Config {
    fn drop(&mut self) {
        unsafe { mlx_sys::mlx_fast_cuda_kernel_config_free(self.raw) };
    }
}

impl Config {
    /// `grid` counts threads per axis, as Metal's does; `ints` are compile-time constants
    /// of the source (each new value is another compiled kernel).
    pub fn new(
        outputs: &[Output],
        grid: (i32, i32, i32),
        block: (i32, i32, i32),
        ints: &[(&str, i32)],
    ) -> Result<Self> {
        let config = Config {
            raw: unsafe { mlx_sys::mlx_fast_cuda_kernel_config_new() },
            outputs: outputs.len(),
            ints: ints.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            output_shapes: outputs
                .iter()
                .flat_map(|o| o.shape.iter().copied())
                .collect(),
            output_ndims: outputs.iter().map(|o| o.shape.len()).collect(),
            output_dtypes: outputs
                .iter()
                .map(|o| dtype_code(o.dtype))
                .collect::<Result<_>>()?,
            grid,
            block,
            compiled: std::cell::OnceCell::new(),
        };
        let raw = config.raw;
        let mut ok = true;
        unsafe {
            for out in outputs {
                ok &= mlx_sys::mlx_fast_cuda_kernel_config_add_output_arg(
                    raw,
                    out.shape.as_ptr(),
                    out.shape.len(),
                    dtype_code(out.dtype)?,
                ) == 0;
            }
            ok &= mlx_sys::mlx_fast_cuda_kernel_config_set_grid(raw, grid.0, grid.1, grid.2) == 0;
            ok &= mlx_sys::mlx_fast_cuda_kernel_config_set_thread_group(
                raw, block.0, block.1, block.2,
            ) == 0;
            for (name, value) in ints {
                let name = CString::new(*name)?;
                ok &= mlx_sys::mlx_fast_cuda_kernel_config_add_template_arg_int(
                    raw,
                    name.as_ptr(),
                    *value,
                ) == 0;
            }
        }
        if !ok {
            bail!("mlx: could not describe a call of one of quest's kernels");
        }
        Ok(config)
    }
}

/// Kernel objects by what is compiled into them (`K`), each with its call descriptions by
/// shape (`S`); each made on first use. Keep one per thread (in a `thread_local!`).
pub struct Kernels<K, S>(HashMap<K, (CustomKernel, HashMap<S, Config>)>);

impl<K, S> Default for Kernels<K, S> {
    fn default() -> Self {
        Kernels(HashMap::new())
    }
}

impl<K: Hash + Eq + Clone, S: Hash + Eq + Clone> Kernels<K, S> {
    /// Applies the kernel for `key` (made by `make`) to `inputs`, described for `shape` by
    /// `config`.
    pub fn apply(
        &mut self,
        key: &K,
        make: impl FnOnce(&K) -> Result<CustomKernel>,
        shape: &S,
        config: impl FnOnce(&S) -> Result<Config>,
        inputs: &[&Array],
    ) -> Result<Vec<Array>> {
        let (kernel, configs) = match self.0.entry(key.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert((make(key)?, HashMap::new())),
        };
        let config = match configs.entry(shape.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(config(shape)?),
        };
        kernel.apply(inputs, config)
    }
}

fn dtype_code(dtype: Dtype) -> Result<mlx_sys::mlx_dtype> {
    Ok(match dtype {
        Dtype::Float16 => mlx_sys::mlx_dtype__MLX_FLOAT16,
        Dtype::Float32 => mlx_sys::mlx_dtype__MLX_FLOAT32,
        Dtype::Bfloat16 => mlx_sys::mlx_dtype__MLX_BFLOAT16,
        Dtype::Int32 => mlx_sys::mlx_dtype__MLX_INT32,
        Dtype::Uint32 => mlx_sys::mlx_dtype__MLX_UINT32,
        other => bail!("quest's kernels do not write {other:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_and_choices_parse_and_name_themselves() {
        for k in Kernel::ALL {
            assert_eq!(k.name().parse::<Kernel>(), Ok(k));
            assert!(k.env().starts_with("QUEST_"));
        }
        for c in [Impl::Mlx, Impl::Quest] {
            assert_eq!(c.as_str().parse::<Impl>(), Ok(c));
        }
        let err = "cublas".parse::<Impl>().unwrap_err();
        assert!(err.contains("mlx or quest"), "{err}");
        let err = "rope".parse::<Kernel>().unwrap_err();
        assert!(err.contains(Kernel::CHOICES), "{err}");
    }

    #[test]
    fn a_kernel_is_written_as_mlx_builds_it() {
        let spec = KernelSpec {
            name: "quest_demo",
            inputs: vec![("x", Dtype::Float16), ("cache", Dtype::Float16)],
            outputs: vec![("y", Dtype::Float32), ("n", Dtype::Int32)],
            source: "  y[0] = cache_shape[2];",
            header: "constexpr int D = 64;\n".into(),
            shared_memory: 0,
        };
        let text = spec.text(&[("N", 8)]).unwrap();
        let expected = "constexpr int D = 64;\nnamespace mlx::core::cu {\n\n\
                        namespace cg = cooperative_groups;\n\n\
                        __global__ void custom_kernel_quest_demo(\n    const __half* x,\n    \
                        const __half* cache,\n    const __grid_constant__ Shape cache_shape,\n    \
                        float* y,\n    int32_t* n) {\n  constexpr int N = 8;\n\n  \
                        y[0] = cache_shape[2];\n}\n\n} // namespace mlx::core::cu\n";
        assert!(
            text.starts_with("\n#include \"mlx/backend/cuda/device/utils.cuh\""),
            "{text}"
        );
        assert!(text.ends_with(expected), "{text}");
    }

    #[test]
    fn a_kernel_quest_compiles_takes_a_shape_as_ints_after_its_outputs() {
        let spec = KernelSpec {
            name: "demo",
            inputs: vec![("x", Dtype::Float16), ("cache", Dtype::Float16)],
            outputs: vec![("y", Dtype::Float32)],
            source: "  y[0] = cache_shape[2];",
            header: "constexpr int D = 64;\n".into(),
            shared_memory: 0,
        };
        let (symbol, text) = spec.precompiled_text(&[("N", 8), ("M", -1)]).unwrap();
        // A C symbol (MLX looks it up by name), one per variant.
        assert_eq!(symbol, "quest_demo_N8_M4294967295");
        assert!(
            text.contains(
                "constexpr int D = 64;\nextern \"C\" __global__ void quest_demo_N8_M4294967295(\n    \
                 const __half* x,\n    const __half* cache,\n    float* y,\n    int cache_shape_0,\n"
            ),
            "{text}"
        );
        assert!(text
            .contains("    int cache_shape_7) {\n  const int cache_shape[8] = {cache_shape_0, "));
        assert!(text.contains(
            "  constexpr int N = 8;\n  constexpr int M = -1;\n\n  y[0] = cache_shape[2];\n}\n"
        ));
        // Self-contained: none of MLX's device headers, which its wheel does not ship.
        assert!(!text.contains("mlx/"), "{text}");
        // What a precompiled kernel is not given is refused, not miscompiled.
        let strided = KernelSpec {
            source: "  y[0] = x_strides[0];",
            ..spec.clone()
        };
        assert!(strided.precompiled_text(&[]).is_err());
    }

    #[test]
    fn every_kernel_can_be_written_for_a_compiler() {
        let sources = crate::lm::kernel_sources().unwrap();
        let mut names: Vec<&str> = sources
            .iter()
            .map(|s| {
                let start = s.text.find("custom_kernel_").expect("a kernel function") + 14;
                let len = s.text[start..].find('(').unwrap();
                &s.text[start..start + len]
            })
            .collect();
        names.sort();
        names.dedup();
        // One compiled kernel per entry of the list: a new kernel brings its sources.
        assert_eq!(names.len(), Kernel::ALL.len(), "{names:?}");
        let mut files: Vec<&str> = sources.iter().map(|s| s.file.as_str()).collect();
        files.sort();
        files.dedup();
        assert_eq!(
            files.len(),
            sources.len(),
            "two sources under one file name"
        );
    }

    #[test]
    fn off_cuda_and_unwarmed_mlx_ops_run() {
        // No unit test calls warm_process, and the tests run on the CPU, where nothing is
        // kept compiled: MLX's ops by default (the module doc).
        for kernel in Kernel::ALL {
            assert_eq!(kernel.default_choice(), Impl::Mlx, "{}", kernel.name());
        }
        let warmed: Vec<&str> = Kernel::ALL
            .into_iter()
            .filter(|k| k.warmed_choice() == Impl::Quest)
            .map(Kernel::name)
            .collect();
        assert_eq!(warmed, ["matvec", "qkv", "attend"]);
    }

    #[test]
    fn each_kernel_has_its_own_switch() {
        set(Kernel::Matvec, Impl::Quest);
        set(Kernel::Qkv, Impl::Mlx);
        assert_eq!(current(Kernel::Matvec).unwrap(), Impl::Quest);
        assert_eq!(current(Kernel::Qkv).unwrap(), Impl::Mlx);
        set(Kernel::Matvec, Impl::Mlx);
        // This test build runs MLX on the CPU: no kernel of quest's is ever in use there.
        set(Kernel::Qkv, Impl::Quest);
        assert!(!in_use(Kernel::Qkv).unwrap() || Backend::detect() == Backend::Cuda);
        set(Kernel::Qkv, Impl::Mlx);
    }
}
