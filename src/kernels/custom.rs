//! One of quest's kernels as an MLX custom kernel: the MLX object made from its spec
//! ([`super::spec`]), the call descriptions kept per shape, and the variant quest compiled
//! itself ([`super::precompiled`]) that runs instead where there is one.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::Hash;

use anyhow::{bail, Result};
use mlx_rs::{Array, Dtype, Stream};

use super::spec::{KernelSpec, SHAPE_INTS};

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

impl KernelSpec {
    /// The MLX object for this spec ([`CustomKernel::new`]).
    pub fn make(&self) -> Result<CustomKernel> {
        CustomKernel::new(self)
    }
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
                    dims.resize(SHAPE_INTS, 0);
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
