//! A decode step's query, key and value heads in one CUDA kernel.
//!
//! On the GPU, models up to 4B decode at a pace the host sets: every op of the graph costs
//! MLX a few microseconds to record and launch, kernel or not
//! (docs/gpu/2026-12-06-step-timeline/). After the fused q/k/v projection, MLX's ops need a
//! split, three reshapes, Qwen3's two per-head norms and two RoPEs (four kernels); this one
//! kernel reads the projection's row and writes q and k normed and rotated, and v, as
//! `[B, heads, 1, head_dim]`.
//!
//! The arithmetic is MLX's, in MLX's order: the norm in float32 then `w * half(x · r)` in
//! float16 (`rms_norm`), the rotation of `x[i]` with `x[i + D/2]` by
//! `offset · 2^(-(i / (D/2)) · log2 θ)` in float32 (`rope`, not traditional). One warp owns
//! one head; lane `j` holds elements `j, j + 32, …`, so each lane holds both halves of its
//! pairs and the norm is one warp reduction.
//!
//! Used for one position per sequence (decode), float16, head dims that are a multiple of
//! 64 (up to 256), RoPE over the whole head; everything else, and every backend but CUDA,
//! runs MLX's ops. On by default on CUDA, where its logits are MLX's to the bit on
//! SmolLM2's real weights (docs/gpu/2026-12-01-qkv/); `QUEST_QKV=mlx` turns it off (read
//! once; [`super::Kernels`]).

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use super::custom::{Config, CustomKernel, Objects, Output};
use super::spec::{KernelSource, KernelSpec};

/// What the kernel needs to know of one attention layer.
pub struct HeadsSpec<'a> {
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub rope_dims: i32,
    pub rope_theta: f32,
    pub rope_traditional: bool,
    /// Qwen3's per-head norms of q and k (weights `[head_dim]`) and their epsilon.
    pub qk_norm: Option<(&'a Array, &'a Array, f32)>,
}

impl HeadsSpec<'_> {
    /// A layer without per-head norms, RoPE over whole heads in the usual (not traditional)
    /// order: what the tests build.
    pub fn without_norms(heads: i32, kv_heads: i32, head_dim: i32, rope_theta: f32) -> Self {
        HeadsSpec {
            heads,
            kv_heads,
            head_dim,
            rope_dims: head_dim,
            rope_theta,
            rope_traditional: false,
            qk_norm: None,
        }
    }
}

// Lane `lane`'s part (elements `lane + 32 t`) of one head of the fused projection's row
// `src`: normed by `w` where the layer has per-head norms, then rotated to position `pos`,
// each rounded to half where MLX's `rms_norm` and `rope` write theirs. Shared by the kernels
// that start from the projection's row (this one and [`super::attend`]), in their headers.
const HEAD: &str = r#"
__device__ __forceinline__ void quest_head(const __half* src, const __half* w, int pos, int lane,
                                           __half (&y)[D / 32]) {
  constexpr int T = D / 32;
  float x[T];
#pragma unroll
  for (int t = 0; t < T; ++t) x[t] = __half2float(src[lane + 32 * t]);
#if QUEST_QK_NORM
  float ss = 0.f;
#pragma unroll
  for (int t = 0; t < T; ++t) ss += x[t] * x[t];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float r = rsqrtf(ss / D + EPS);
#pragma unroll
  for (int t = 0; t < T; ++t) x[t] = __half2float(__hmul(w[lane + 32 * t], __float2half(x[t] * r)));
#endif
  const float p = static_cast<float>(pos);
#pragma unroll
  for (int t = 0; t < T / 2; ++t) {
    const int i = lane + 32 * t;
    const float theta = p * exp2f(-(static_cast<float>(i) / (D / 2)) * LOG2_BASE);
    const float c = cosf(theta), s = sinf(theta);
    const float a = x[t], b = x[t + T / 2];
    y[t] = __float2half(a * c - b * s);
    y[t + T / 2] = __float2half(a * s + b * c);
  }
}
"#;

// The body MLX wraps in `(const __half* qkv, const int32_t* offset[, const __half* qw,
// const __half* kw], __half* q, __half* k, __half* v)`; the header gives the constants.
const SOURCE: &str = r#"
  constexpr int H = QH + 2 * KH;
  constexpr int T = D / 32;
  const int head = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.y;
  if (head >= H) return;
  const __half* src = qkv + ((size_t)row * H + head) * D;
  if (head >= QH + KH) {
    __half* dst = v + ((size_t)row * KH + (head - QH - KH)) * D;
#pragma unroll
    for (int t = 0; t < T; ++t) dst[lane + 32 * t] = src[lane + 32 * t];
    return;
  }
  const bool is_q = head < QH;
  __half* dst = is_q ? q + ((size_t)row * QH + head) * D : k + ((size_t)row * KH + head - QH) * D;
#if QUEST_QK_NORM
  const __half* w = is_q ? qw : kw;
#else
  const __half* w = nullptr;
#endif
  __half y[T];
  quest_head(src, w, offset[0], lane, y);
#pragma unroll
  for (int t = 0; t < T; ++t) dst[lane + 32 * t] = y[t];
"#;

/// What makes one compiled kernel: the shape constants and the norm are in its source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    heads: i32,
    kv_heads: i32,
    head_dim: i32,
    /// The norm's epsilon as bits, when there is a norm.
    eps: Option<u32>,
    theta: u32,
}

impl Key {
    /// The key of the layer `spec` describes, when a kernel that starts from the fused
    /// projection's row `qkv` applies to it (see the module docs).
    pub(crate) fn fitting(qkv: &Array, spec: &HeadsSpec) -> Option<Key> {
        let d = spec.head_dim;
        let width = (spec.heads + 2 * spec.kv_heads) * d;
        let shape = qkv.shape();
        let norms_fit = spec.qk_norm.is_none_or(|(qw, kw, _)| {
            [qw, kw]
                .iter()
                .all(|w| w.dtype() == Dtype::Float16 && w.shape() == [d])
        });
        let applies = shape.len() == 3
            && shape[1] == 1
            && shape[2] == width
            && qkv.dtype() == Dtype::Float16
            && d % 64 == 0
            && d <= 256
            && spec.rope_dims == d
            && !spec.rope_traditional
            && spec.rope_theta > 1.0
            && norms_fit;
        applies.then(|| Key {
            heads: spec.heads,
            kv_heads: spec.kv_heads,
            head_dim: d,
            eps: spec.qk_norm.map(|(_, _, eps)| eps.to_bits()),
            theta: spec.rope_theta.to_bits(),
        })
    }

    pub(crate) fn head_dim(&self) -> i32 {
        self.head_dim
    }

    /// The constants, and `quest_head`, for a kernel's header.
    pub(crate) fn header(&self) -> String {
        format!(
            "constexpr int QH = {};\nconstexpr int KH = {};\nconstexpr int D = {};\n\
             constexpr float EPS = {:e}f;\nconstexpr float LOG2_BASE = {:e}f;\n\
             #define QUEST_QK_NORM {}\n{HEAD}",
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.eps.map_or(0.0, f32::from_bits),
            f32::from_bits(self.theta).log2(),
            u8::from(self.eps.is_some()),
        )
    }

    /// A layer's key as the kernels are compiled for it, for [`sources`]: Qwen3's per-head
    /// norms (epsilon 1e-6) or none, RoPE over whole heads.
    pub(crate) fn example(heads: i32, kv_heads: i32, head_dim: i32, norm: bool, theta: f32) -> Key {
        Key {
            heads,
            kv_heads,
            head_dim,
            eps: norm.then(|| 1e-6f32.to_bits()),
            theta: theta.to_bits(),
        }
    }

    /// Two layers: Qwen3-8B's (norms, 128 channels a head) and SmolLM2-135M's (none, 64).
    pub(crate) fn examples() -> [Key; 2] {
        [
            Key::example(32, 8, 128, true, 1_000_000.0),
            Key::example(9, 3, 64, false, 100_000.0),
        ]
    }

    /// A name for the files of this key's kernels.
    pub(crate) fn label(&self) -> String {
        format!(
            "{}q{}kv{}d{}",
            self.heads,
            self.kv_heads,
            self.head_dim,
            if self.eps.is_some() { "-norm" } else { "" }
        )
    }

    /// The kernel's inputs before its own: the projection's row, the position and the
    /// per-head norms' weights where the layer has them.
    pub(crate) fn inputs<'a>(
        &self,
        qkv: &'a Array,
        offset: &'a Array,
        spec: &HeadsSpec<'a>,
    ) -> Vec<&'a Array> {
        let mut inputs = vec![qkv, offset];
        if let Some((qw, kw, _)) = spec.qk_norm {
            inputs.extend([qw, kw]);
        }
        inputs
    }

    /// Their names and dtypes, as the kernel's source reads them.
    pub(crate) fn input_args(&self) -> Vec<(&'static str, Dtype)> {
        let mut args = vec![("qkv", Dtype::Float16), ("offset", Dtype::Int32)];
        if self.eps.is_some() {
            args.extend([("qw", Dtype::Float16), ("kw", Dtype::Float16)]);
        }
        args
    }

    /// `[q, k, v]` for a batch of `b`: a warp per head, a grid row per sequence.
    fn config(&self, b: i32) -> Result<Config> {
        let (d, total) = (self.head_dim, self.heads + 2 * self.kv_heads);
        let q_shape = [b, self.heads, 1, d];
        let kv_shape = [b, self.kv_heads, 1, d];
        let outputs = [&q_shape[..], &kv_shape, &kv_shape].map(|shape| Output {
            shape,
            dtype: Dtype::Float16,
        });
        Config::new(&outputs, (total * 32, b, 1), (THREADS, 1, 1), &[])
    }

    fn spec(&self) -> KernelSpec {
        KernelSpec {
            name: "quest_qkv",
            inputs: self.input_args(),
            outputs: ["q", "k", "v"].map(|n| (n, Dtype::Float16)).to_vec(),
            source: SOURCE,
            header: self.header(),
            shared_memory: 0,
        }
    }

    fn make(&self) -> Result<CustomKernel> {
        self.spec().make()
    }
}

thread_local! {
    // A kernel object per layer shape, and its call description per batch.
    static KERNELS: RefCell<Objects<Key, i32>> = RefCell::default();
}

/// Threads per block: four heads.
const THREADS: i32 = 128;

/// `[q, k, v]`, each `[B, heads, 1, head_dim]`, q and k normed (when the layer has the
/// norms) and rotated to position `offset`, from the fused projection's output `qkv`
/// (`[B, 1, (heads + 2 · kv_heads) · head_dim]`), when quest's kernel is in use and
/// applies (see the module docs); `None` leaves it to MLX's ops.
pub(super) fn heads(
    qkv: &Array,
    spec: &HeadsSpec,
    offset: i32,
    hand_compiled: bool,
) -> Result<Option<[Array; 3]>> {
    let Some(key) = Key::fitting(qkv, spec) else {
        return Ok(None);
    };
    let b = qkv.shape()[0];
    let offset = super::position(offset);
    let inputs = key.inputs(qkv, &offset, spec);
    let arrays = KERNELS.with(|kernels| {
        kernels.borrow_mut().apply(
            &key,
            Key::make,
            &b,
            |b| key.config(*b),
            &inputs,
            hand_compiled,
        )
    })?;
    let [q, k, v]: [Array; 3] = arrays
        .try_into()
        .map_err(|_| anyhow::anyhow!("mlx: quest's qkv kernel returned the wrong outputs"))?;
    Ok(Some([q, k, v]))
}

/// This kernel's full source for the example layers ([`Key::examples`]), to compile off the
/// GPU (`quest dev kernels`).
pub fn sources() -> Result<Vec<KernelSource>> {
    Key::examples()
        .iter()
        .map(|key| key.spec().source(format!("qkv-{}.cu", key.label()), &[]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_every_constant_the_source_uses() {
        let key = Key {
            heads: 16,
            kv_heads: 8,
            head_dim: 128,
            eps: Some(1e-6f32.to_bits()),
            theta: 1_000_000f32.to_bits(),
        };
        let header = key.header();
        for name in [
            "QH = 16",
            "KH = 8",
            "D = 128",
            "EPS = 1e-6f",
            "QUEST_QK_NORM 1",
        ] {
            assert!(header.contains(name), "{name} missing from\n{header}");
        }
        // log2(1e6) = 19.93…
        assert!(header.contains("LOG2_BASE = 1.993"), "{header}");
        let no_norm = Key { eps: None, ..key }.header();
        assert!(no_norm.contains("QUEST_QK_NORM 0"), "{no_norm}");
    }
}
