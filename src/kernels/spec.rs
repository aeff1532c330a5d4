//! What quest writes for one of its kernels: the spec (names, dtypes, source, header) and
//! the texts made from it — the source MLX compiles ([`KernelSpec::text`]) and the one
//! quest compiles itself ([`KernelSpec::precompiled_text`], for [`super::precompiled`]).
//! Text only: the MLX object made from a spec is [`super::custom`]'s.

use anyhow::{bail, Result};
use mlx_rs::Dtype;

/// How many of an input's dimensions a precompiled kernel receives (MLX's arrays here have
/// at most four).
pub const SHAPE_INTS: usize = 8;

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
    /// The inputs whose shape the source reads (`{name}_shape`).
    pub(super) fn reads_shape(&self, input: &str) -> bool {
        self.source.contains(&format!("{input}_shape"))
    }

    /// The kernel for `ints` as quest compiles it itself ([`super::precompiled`]): its
    /// `extern "C"` symbol and a self-contained source with the same body as
    /// [`KernelSpec::text`]'s, taking the inputs, the outputs, then for each input whose
    /// shape it reads that shape as [`SHAPE_INTS`] ints (MLX passes a precompiled kernel
    /// no shapes; it passes int scalars after the outputs).
    /// Only the CUDA headers are included (no cooperative groups, which none of quest's
    /// kernels use: their header needs libcu++ from MLX's wheel).
    pub fn precompiled_text(&self, ints: &[(&str, i32)]) -> Result<(String, String)> {
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
