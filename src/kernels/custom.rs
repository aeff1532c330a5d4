//! One of quest's kernels as an MLX custom kernel: its spec (names, dtypes, source), the
//! MLX object made from it, the call descriptions kept per shape, and the variant quest
//! compiled itself ([`super::precompiled`]) that runs instead where there is one.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::Hash;

use anyhow::{bail, Result};
use mlx_rs::{Array, Dtype, Stream};

/// One of quest's kernels for MLX: MLX's custom-kernel object (its name, argument names,
/// source and shared memory fixed when it is made) and the variants quest compiled of it
/// ([`super::precompiled`]), which run instead where there are. MLX objects belong to
/// the thread that made them, as the model's arrays do, so callers keep these in
/// thread-locals.
pub struct CustomKernel {
    raw: mlx_sys::mlx_fast_cuda_kernel,
    spec: KernelSpec,
    /// The inputs whose shape the source reads, by position: a compiled variant gets them
    /// as ints (found once here, not at every call).
    shaped: Vec<usize>,
    compiled: std::cell::RefCell<super::precompiled::Variants>,
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

    /// The kernel for `ints` as quest compiles it itself ([`super::precompiled`]): its
    /// `extern "C"` symbol and a self-contained source with the same body as
    /// [`KernelSpec::text`]'s, taking the inputs, the outputs, then for each input whose
    /// shape it reads that shape as [`super::precompiled::SHAPE_INTS`] ints (MLX passes
    /// a precompiled kernel no shapes; it passes int scalars after the outputs).
    /// Only the CUDA headers are included (no cooperative groups, which none of quest's
    /// kernels use: their header needs libcu++ from MLX's wheel).
    pub fn precompiled_text(&self, ints: &[(&str, i32)]) -> Result<(String, String)> {
        use super::precompiled::SHAPE_INTS;
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
    /// `hand_compiled`: run the variant quest compiled, where there is one, instead of
    /// letting MLX compile the source.
    pub fn apply(
        &self,
        inputs: &[&Array],
        config: &Config,
        hand_compiled: bool,
    ) -> Result<Vec<Array>> {
        unsafe {
            let ins = mlx_sys::mlx_vector_array_new();
            let mut ok = true;
            for a in inputs {
                ok &= mlx_sys::mlx_vector_array_append_value(ins, a.as_ptr()) == 0;
            }
            let mut outs = mlx_sys::mlx_vector_array_new();
            let stream = Stream::new();
            let compiled = if hand_compiled {
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
                    dims.resize(super::precompiled::SHAPE_INTS, 0);
                    scalars.extend(dims);
                }
                let call = super::precompiled::Call {
                    output_shapes: &config.output_shapes,
                    output_ndims: &config.output_ndims,
                    output_dtypes: &config.output_dtypes,
                    scalars: &scalars,
                    grid: config.grid,
                    block: config.block,
                    shared_memory: self.spec.shared_memory,
                };
                ok = super::precompiled::apply(compiled, ins, &call, &mut outs, stream.as_ptr());
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
/// call's host time counts (see the module docs of [`super::heads`]).
pub struct Config {
    raw: mlx_sys::mlx_fast_cuda_kernel_config,
    outputs: usize,
    // The same description for a kernel quest compiled (super::precompiled).
    ints: Vec<(String, i32)>,
    output_shapes: Vec<i32>,
    output_ndims: Vec<usize>,
    output_dtypes: Vec<mlx_sys::mlx_dtype>,
    grid: (i32, i32, i32),
    block: (i32, i32, i32),
    /// The kernel's compiled variant for `ints`, once looked up (a config belongs to one
    /// kernel object).
    compiled: std::cell::OnceCell<Option<std::rc::Rc<super::precompiled::Compiled>>>,
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
pub struct Objects<K, S>(HashMap<K, (CustomKernel, HashMap<S, Config>)>);

impl<K, S> Default for Objects<K, S> {
    fn default() -> Self {
        Objects(HashMap::new())
    }
}

impl<K: Hash + Eq + Clone, S: Hash + Eq + Clone> Objects<K, S> {
    /// Applies the kernel for `key` (made by `make`) to `inputs`, described for `shape` by
    /// `config`.
    pub fn apply(
        &mut self,
        key: &K,
        make: impl FnOnce(&K) -> Result<CustomKernel>,
        shape: &S,
        config: impl FnOnce(&S) -> Result<Config>,
        inputs: &[&Array],
        hand_compiled: bool,
    ) -> Result<Vec<Array>> {
        let (kernel, configs) = match self.0.entry(key.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert((make(key)?, HashMap::new())),
        };
        let config = match configs.entry(shape.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(config(shape)?),
        };
        kernel.apply(inputs, config, hand_compiled)
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
}
