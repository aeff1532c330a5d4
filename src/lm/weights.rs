//! A model's named tensors, and the layers built from them. Every lookup names the
//! file it came from, so a missing or misshapen tensor is a clear error, not a panic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{dequantize, quantize};

use super::Layout;
use mlx_rs::{Array, Dtype};

/// MLX's affine quantization parameters, as in `config.json`'s `quantization`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
pub struct Quantization {
    pub group_size: i32,
    pub bits: i32,
}

impl Quantization {
    /// A config's `quantization`: at its top level, or inside `text_config` (where a
    /// model nests its text config, as Qwen3.5's does); `None` for a float model.
    pub fn of_config(config: &serde_json::Value) -> Result<Option<Self>> {
        let quantization = config
            .get("quantization")
            .or_else(|| config.get("text_config")?.get("quantization"));
        match quantization {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(q) => Ok(Some(
                serde_json::from_value(q.clone()).context("`quantization`")?,
            )),
        }
    }
}

/// `dense-f32`, `dense-f16`, `dense-bf16`: matrices held in that float dtype.
pub fn dense_name(dtype: Dtype) -> String {
    let dtype = match dtype {
        Dtype::Float32 => "f32",
        Dtype::Float16 => "f16",
        Dtype::Bfloat16 => "bf16",
        _ => "float",
    };
    format!("dense-{dtype}")
}

/// The bytes a model's tensors take once it is built from them, from their names, shapes
/// and dtypes alone (nothing is read): float tensors in `float_dtype`; a quantized matrix
/// (`p.weight` beside `p.scales`, groups of `group_size` columns) dense in `float_dtype`
/// where `dense`, else its words, scales and biases as stored; the rest as stored. `None`
/// where a matrix is quantized and the group size is not known.
pub fn held_bytes<'a>(
    tensors: impl IntoIterator<Item = (&'a str, &'a [i32], Dtype)>,
    dense: bool,
    float_dtype: Dtype,
    group_size: Option<i32>,
) -> Option<u64> {
    let tensors: HashMap<&str, (&[i32], Dtype)> = tensors
        .into_iter()
        .map(|(name, shape, dtype)| (name, (shape, dtype)))
        .collect();
    let float_size = |dtype: Dtype| match dtype {
        Dtype::Float16 | Dtype::Bfloat16 => 2,
        _ => 4,
    };
    let elements = |shape: &[i32]| shape.iter().map(|&d| d.max(0) as u64).product::<u64>();
    let quantized = |name: &str| {
        let prefix = name.strip_suffix(".weight")?;
        tensors.get(format!("{prefix}.scales").as_str())
    };
    // The scales and biases of a matrix made dense go with its words.
    let made_dense = |name: &str| {
        dense
            && [".scales", ".biases"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|prefix| tensors.contains_key(format!("{prefix}.weight").as_str()))
            })
    };
    let mut bytes = 0u64;
    for (name, &(shape, dtype)) in &tensors {
        if made_dense(name) {
            continue;
        }
        bytes += match quantized(name) {
            Some((scales, _)) if dense => {
                // [rows, groups] scales: rows × groups × group_size weights.
                elements(scales) * group_size? as u64 * float_size(float_dtype)
            }
            _ if dtype.is_float() => elements(shape) * float_size(float_dtype),
            _ => {
                elements(shape)
                    * match dtype {
                        Dtype::Uint8 | Dtype::Int8 | Dtype::Bool => 1,
                        Dtype::Uint16 | Dtype::Int16 => 2,
                        Dtype::Uint64 | Dtype::Int64 => 8,
                        _ => 4,
                    }
            }
        };
    }
    Some(bytes)
}

/// Tensors by name, taken out one by one as the model is built.
pub struct Weights {
    tensors: HashMap<String, Array>,
    source: PathBuf,
    /// The dtype float tensors are cast to (f32 on CPU: bf16 is slow there and sums in bf16).
    pub float_dtype: Dtype,
    /// Dequantize quantized matrices to `float_dtype` as they are taken (see
    /// [`crate::lm::Hold`]).
    pub dense: bool,
    /// Leave every weight a lazy array: nothing is read, cast, dequantized or stacked
    /// at load; the first forward pass that needs a weight computes it, once (see
    /// [`crate::lm::load_lazy`]).
    pub lazy: bool,
    /// Everything handed out, to evaluate in one go when loading is done.
    taken: Vec<Array>,
}

impl Weights {
    pub fn new(tensors: HashMap<String, Array>, source: &Path, float_dtype: Dtype) -> Self {
        Self {
            tensors,
            source: source.to_path_buf(),
            float_dtype,
            dense: false,
            lazy: false,
            taken: Vec::new(),
        }
    }

    /// The bytes the model built from these weights will hold (see [`held_bytes`]), with
    /// quantized matrices dense (`dense`) or as stored; `group_size`: the config's.
    pub fn held_bytes(&self, dense: bool, group_size: Option<i32>) -> Option<u64> {
        let tensors = self
            .tensors
            .iter()
            .map(|(name, t)| (name.as_str(), t.shape(), t.dtype()));
        held_bytes(tensors, dense, self.float_dtype, group_size)
    }

    /// What the model built from these weights will hold: quantized as stored when some
    /// matrix stays quantized, else dense in the float dtype.
    pub fn layout(&self) -> Layout {
        let quantized = self.tensors.keys().any(|k| k.ends_with(".scales"));
        if quantized && !self.dense {
            return Layout::AsStored;
        }
        Layout::Dense
    }

    pub fn source(&self) -> &Path {
        &self.source
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.tensors.keys()
    }

    pub fn rename(&mut self, from: &str, to: String) {
        if let Some(t) = self.tensors.remove(from) {
            self.tensors.insert(to, t);
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<Array> {
        self.tensors.remove(name)
    }

    pub fn insert(&mut self, name: String, tensor: Array) {
        self.tensors.insert(name, tensor);
    }

    /// A tensor that must exist, cast to the float dtype when it is floating point.
    pub fn take(&mut self, name: &str) -> Result<Array> {
        let t = self.take_as_stored(name)?;
        let t = self.to_float(t)?;
        self.taken.push(t.clone());
        Ok(t)
    }

    /// A tensor that must exist, in float32 whatever the float dtype (for parameters that
    /// feed an `exp`, as Qwen3.5's `A_log`, which mlx-lm never casts either).
    pub fn take_f32(&mut self, name: &str) -> Result<Array> {
        let t = self.take_as_stored(name)?.as_dtype(Dtype::Float32)?;
        self.taken.push(t.clone());
        Ok(t)
    }

    fn take_as_stored(&mut self, name: &str) -> Result<Array> {
        self.tensors.remove(name).with_context(|| {
            format!(
                "the model file {} has no tensor `{name}`; it is incomplete or not of this architecture",
                self.source.display()
            )
        })
    }

    fn to_float(&self, t: Array) -> Result<Array> {
        if t.dtype().is_float() && t.dtype() != self.float_dtype {
            Ok(t.as_dtype(self.float_dtype)?)
        } else {
            Ok(t)
        }
    }

    /// A linear layer `prefix.weight` (+ `.scales`/`.biases` when quantized, + `.bias`).
    pub fn linear(&mut self, prefix: &str, quant: Option<Quantization>) -> Result<Linear> {
        let weight = self.take_as_stored(&format!("{prefix}.weight"))?;
        let weight = self.to_float(weight)?;
        let bias_name = format!("{prefix}.bias");
        let bias = if self.contains(&bias_name) {
            Some(self.take(&bias_name)?)
        } else {
            None
        };
        let scales_name = format!("{prefix}.scales");
        if !self.contains(&scales_name) {
            self.taken.push(weight.clone());
            // Store the transpose once so a forward pass is a plain matmul.
            return Ok(Linear::Dense {
                weight_t: weight.t(),
                bias,
            });
        }
        let q = quant.with_context(|| {
            format!(
                "{prefix} in {} is quantized but the config has no `quantization` (group_size, bits)",
                self.source.display()
            )
        })?;
        let scales = self.take_as_stored(&scales_name)?;
        let scales = self.to_float(scales)?;
        let biases = self.take_as_stored(&format!("{prefix}.biases"))?;
        let biases = self.to_float(biases)?;
        // Layers may differ in bits (GGUF: a Q8_0 embedding beside Q4_1 matrices), so
        // read them off the shapes: packed u32 columns * 32 = groups * group_size * bits.
        let packed_bits = weight.shape()[1] * 32;
        let group_bits = scales.shape()[1] * q.group_size;
        anyhow::ensure!(
            group_bits > 0 && packed_bits % group_bits == 0,
            "{prefix} in {} has quantized shapes that do not fit group size {}",
            self.source.display(),
            q.group_size
        );
        let bits = packed_bits / group_bits;
        if self.dense {
            // The float matrix the quantized matmul computes with, made once at load: on
            // the CPU a BLAS matmul over it is far faster than MLX's quantized kernels.
            let weight = dequantize(&weight, &scales, &biases, q.group_size, bits)
                .and_then(|w| w.as_dtype(self.float_dtype))
                .with_context(|| format!("dequantizing {prefix} in {}", self.source.display()))?;
            // Evaluated now, so the packed arrays are freed as loading goes on (unless
            // lazy: then the first forward pass dequantizes it, and the packed arrays
            // stay in memory until then).
            if !self.lazy {
                mlx_rs::transforms::eval([&weight]).with_context(|| {
                    format!("could not read the weights of {}", self.source.display())
                })?;
            }
            return Ok(Linear::Dense {
                weight_t: weight.t(),
                bias,
            });
        }
        self.taken
            .extend([weight.clone(), scales.clone(), biases.clone()]);
        Ok(Linear::Quantized {
            weight,
            scales,
            biases,
            bias,
            group_size: q.group_size,
            bits,
        })
    }

    /// An embedding table; when quantized, rows are dequantized as they are looked up.
    pub fn embedding(&mut self, prefix: &str, quant: Option<Quantization>) -> Result<Embedding> {
        Ok(Embedding(self.linear(prefix, quant)?))
    }

    /// Reads every weight in (as mlx-lm's `load` does, so the first forward pass times the
    /// model, not the disk and the dtype casts); when lazy, reads nothing. Anything left
    /// over means the loader and the file disagree about the architecture.
    pub fn finish(self) -> Result<()> {
        let mut left: Vec<_> = self.tensors.into_keys().collect();
        if left.is_empty() && self.lazy {
            return Ok(());
        }
        if left.is_empty() {
            mlx_rs::transforms::eval(self.taken.iter()).with_context(|| {
                format!("could not read the weights of {}", self.source.display())
            })?;
            return Ok(());
        }
        left.sort();
        bail!(
            "{} has {} tensor(s) this model does not use (first: {}); is the architecture right?",
            self.source.display(),
            left.len(),
            left[0]
        )
    }
}

/// An RMS norm's parameters (mlx-lm's `nn.RMSNorm`), applied by
/// [`crate::lm::fast::Fast::rms_norm`].
pub struct RmsNorm {
    pub weight: Array,
    pub eps: f32,
}

impl RmsNorm {
    pub fn load(w: &mut Weights, name: &str, eps: f32) -> Result<Self> {
        Ok(Self {
            weight: w.take(&format!("{name}.weight"))?,
            eps,
        })
    }
}

/// A matrix of `y = x Wᵀ (+ b)`, dense or 4/8-bit affine quantized: its parameters, which
/// [`crate::lm::fast::Fast::linear`] multiplies by.
pub enum Linear {
    Dense {
        weight_t: Array,
        bias: Option<Array>,
    },
    Quantized {
        weight: Array,
        scales: Array,
        biases: Array,
        bias: Option<Array>,
        group_size: i32,
        bits: i32,
    },
}

impl Linear {
    /// The `[out, in]` matrix this layer multiplies by, in `dtype` (dequantized when
    /// quantized: what the quantized matmul computes with).
    fn float_matrix(&self, dtype: Dtype) -> Result<Array> {
        let matrix = match self {
            Linear::Dense { weight_t, .. } => weight_t.t(),
            Linear::Quantized {
                weight,
                scales,
                biases,
                group_size,
                bits,
                ..
            } => dequantize(weight, scales, biases, *group_size, *bits)?,
        };
        Ok(matrix.as_dtype(dtype)?)
    }

    /// This layer in `layout`: its float matrix (dequantized first when it is quantized),
    /// kept in `dtype` or quantized with MLX's `quantize`; the bias stays as it is.
    /// Evaluated now, so the old arrays can be freed as the model is converted.
    pub fn requantize(&self, layout: Layout, dtype: Dtype) -> Result<Linear> {
        let bias = self.bias().cloned();
        let linear = match layout {
            Layout::AsStored => bail!("a model is put back as stored by loading it again"),
            Layout::Dense => {
                if let Linear::Dense { weight_t, .. } = self {
                    if weight_t.dtype() == dtype {
                        return Ok(Linear::Dense {
                            weight_t: weight_t.clone(),
                            bias,
                        });
                    }
                }
                Linear::Dense {
                    weight_t: self.float_matrix(dtype)?.t(),
                    bias,
                }
            }
            Layout::Affine { bits, group_size } => {
                let matrix = self.float_matrix(dtype)?;
                let columns = matrix.shape()[1];
                anyhow::ensure!(
                    columns % group_size == 0,
                    "a matrix with {columns} input columns cannot be cut into groups of \
                     {group_size}; choose a group size that divides every width of the model"
                );
                let (weight, scales, biases) = quantize(&matrix, group_size, bits)?;
                Linear::Quantized {
                    weight,
                    scales,
                    biases,
                    bias,
                    group_size,
                    bits,
                }
            }
        };
        mlx_rs::transforms::eval(linear.arrays())?;
        Ok(linear)
    }

    /// Bytes this layer's parameters occupy (what a decode step streams from memory).
    pub fn nbytes(&self) -> usize {
        match self {
            Linear::Dense { weight_t, bias } => {
                weight_t.nbytes() + bias.as_ref().map_or(0, Array::nbytes)
            }
            Linear::Quantized {
                weight,
                scales,
                biases,
                bias,
                ..
            } => {
                weight.nbytes()
                    + scales.nbytes()
                    + biases.nbytes()
                    + bias.as_ref().map_or(0, Array::nbytes)
            }
        }
    }
}

/// Token embeddings; also usable as the output projection when the two are tied.
pub struct Embedding(Linear);

impl Embedding {
    pub fn forward(&self, ids: &Array) -> Result<Array> {
        match &self.0 {
            Linear::Dense { weight_t, .. } => Ok(weight_t.t().take_axis(ids, 0)?),
            Linear::Quantized {
                weight,
                scales,
                biases,
                group_size,
                bits,
                ..
            } => {
                let rows = |a: &Array| a.take_axis(ids, 0);
                let biases = rows(biases)?;
                Ok(dequantize(
                    rows(weight)?,
                    rows(scales)?,
                    &biases,
                    *group_size,
                    *bits,
                )?)
            }
        }
    }

    /// The table in `layout` (see [`Linear::requantize`]).
    pub fn requantize(&self, layout: Layout, dtype: Dtype) -> Result<Embedding> {
        Ok(Embedding(self.0.requantize(layout, dtype)?))
    }

    /// The table as a matrix: `x Eᵀ` is the tied language-model head.
    pub fn as_linear(&self) -> &Linear {
        &self.0
    }

    pub fn nbytes(&self) -> usize {
        self.0.nbytes()
    }

    /// The embedding width (the model's hidden size).
    pub fn dims(&self) -> i32 {
        match &self.0 {
            Linear::Dense { weight_t, .. } => weight_t.shape()[0],
            Linear::Quantized { weight, bits, .. } => weight.shape()[1] * 32 / bits,
        }
    }
}

/// Reads the last position's row of `[B, L, V]` logits.
pub fn last_position(logits: &Array) -> Array {
    let len = logits.shape()[1];
    logits.index((.., len - 1, ..))
}

/// Linear layers that read the same input (q/k/v, gate/up), computed as one: their output
/// rows stacked, so one matmul — one kernel launch — replaces several, then split. In a
/// decode step, where each kernel is small, launches are much of the fixed term.
pub enum Fused {
    One {
        linear: Linear,
        splits: Vec<i32>,
    },
    /// Parts that cannot share one matmul (different bits, group sizes or biases).
    Separate(Vec<Linear>),
}

impl Fused {
    pub fn new(parts: Vec<Linear>) -> Result<Self> {
        Self::build(parts, true)
    }

    /// [`Fused::new`]; with `eval` false the stacked matrix stays lazy, for the first
    /// forward pass to compute (`Fused::build(parts, !weights.lazy)`).
    pub fn build(parts: Vec<Linear>, eval: bool) -> Result<Self> {
        let Some(stacked) = Self::stack(&parts)? else {
            return Ok(Fused::Separate(parts));
        };
        let outputs: Vec<i32> = parts.iter().map(Linear::out_features).collect();
        let splits = outputs
            .iter()
            .scan(0, |end, n| {
                *end += n;
                Some(*end)
            })
            .take(parts.len() - 1)
            .collect();
        // Materialize now: the parts' memory is freed, and the first step does not pay.
        if eval {
            mlx_rs::transforms::eval(stacked.arrays())?;
        }
        Ok(Fused::One {
            linear: stacked,
            splits,
        })
    }

    fn stack(parts: &[Linear]) -> Result<Option<Linear>> {
        use mlx_rs::ops::concatenate;
        let biases: Vec<&Array> = parts.iter().filter_map(Linear::bias).collect();
        let bias = match biases.len() {
            0 => None,
            n if n == parts.len() => Some(concatenate(&biases, 0)?),
            _ => return Ok(None),
        };
        match &parts[0] {
            Linear::Dense { .. } => {
                let mut weights = Vec::new();
                for part in parts {
                    let Linear::Dense { weight_t, .. } = part else {
                        return Ok(None);
                    };
                    weights.push(weight_t);
                }
                Ok(Some(Linear::Dense {
                    weight_t: concatenate(&weights, 1)?,
                    bias,
                }))
            }
            Linear::Quantized {
                weight,
                group_size,
                bits,
                ..
            } => {
                let (group_size, bits, packed) = (*group_size, *bits, weight.shape()[1]);
                let (mut ws, mut ss, mut bs) = (Vec::new(), Vec::new(), Vec::new());
                for part in parts {
                    match part {
                        Linear::Quantized {
                            weight,
                            scales,
                            biases,
                            group_size: g,
                            bits: b,
                            ..
                        } if *g == group_size && *b == bits && weight.shape()[1] == packed => {
                            ws.push(weight);
                            ss.push(scales);
                            bs.push(biases);
                        }
                        _ => return Ok(None),
                    }
                }
                Ok(Some(Linear::Quantized {
                    weight: concatenate(&ws, 0)?,
                    scales: concatenate(&ss, 0)?,
                    biases: concatenate(&bs, 0)?,
                    bias,
                    group_size,
                    bits,
                }))
            }
        }
    }

    /// Splits the stacked matmul's output (`Fused::One`) into the parts' outputs.
    pub fn split(&self, joined: &Array) -> Result<Vec<Array>> {
        match self {
            Fused::One { splits, .. } => Ok(joined.split_at_indices(splits, -1)?),
            Fused::Separate(_) => anyhow::bail!("separate parts have no joined output to split"),
        }
    }

    /// The same parts in `layout`. Groups run along the input columns, which the parts
    /// share, so quantizing the stacked matrix is quantizing each part and stacking them.
    pub fn requantize(&self, layout: Layout, dtype: Dtype) -> Result<Fused> {
        Ok(match self {
            Fused::One { linear, splits } => Fused::One {
                linear: linear.requantize(layout, dtype)?,
                splits: splits.clone(),
            },
            Fused::Separate(parts) => Fused::Separate(
                parts
                    .iter()
                    .map(|part| part.requantize(layout, dtype))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    pub fn nbytes(&self) -> usize {
        match self {
            Fused::One { linear, .. } => linear.nbytes(),
            Fused::Separate(parts) => parts.iter().map(Linear::nbytes).sum(),
        }
    }
}

impl Linear {
    fn bias(&self) -> Option<&Array> {
        match self {
            Linear::Dense { bias, .. } | Linear::Quantized { bias, .. } => bias.as_ref(),
        }
    }

    /// Output features (rows of the weight).
    pub fn out_features(&self) -> i32 {
        match self {
            Linear::Dense { weight_t, .. } => weight_t.shape()[1],
            Linear::Quantized { weight, .. } => weight.shape()[0],
        }
    }

    fn arrays(&self) -> Vec<&Array> {
        match self {
            Linear::Dense { weight_t, bias } => std::iter::once(weight_t).chain(bias).collect(),
            Linear::Quantized {
                weight,
                scales,
                biases,
                bias,
                ..
            } => [weight, scales, biases].into_iter().chain(bias).collect(),
        }
    }
}
