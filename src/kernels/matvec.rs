//! quest's own 4-bit matrix-vector product for MLX's CUDA backend.
//!
//! A decode step multiplies one activation row by every weight matrix: a stream of
//! bytes, which MLX 0.32's CUDA `qmv` reads well below a copy's rate
//! (docs/gpu/2026-12-01-silu-compile/). This kernel reads the same layout (uint32 words of
//! eight 4-bit values, float16 scales and biases per group) and runs inside MLX's graph as a
//! custom kernel (mlx-c's `mlx_fast_cuda_kernel_*`, which mlx-rs does not wrap), so nothing
//! is repacked and the rest of the step is unchanged. Its launch shape and loads are the
//! fastest of a sweep on Qwen3-8B's step matrices (docs/gpu/2026-12-06-qmv-sweep/; in the
//! step: docs/gpu/2026-12-06-qmv-applied/).
//!
//! How it differs from MLX's: `x` is staged once per block in shared memory, paired so that
//! one shift and one `lop3` turn a word into two float16 weights (the 0x6400 trick: the
//! bits of 1024 + q), each lane reads 16 bytes of a row per load and keeps four chunks of
//! each of its rows — words, scales and biases — asked for ahead of the one it multiplies,
//! a warp owns two rows, three blocks of 256 threads share an SM, and the bias term is
//! applied once per 32 weights through the sum of `x` over them. The weights are centred
//! (q − 8) before the float16 dot, so that no large common part is cancelled after it.
//!
//! Its levers ([`Levers`], `QUEST_QMV_LEVERS`), each a compiled variant so that each can be
//! measured against the kernel without it in a step's own trace: x read in one round of
//! 16-byte loads (`x1`), x laid out in shared memory so a warp's reads meet no bank twice
//! (`banks`), streamed weight loads (`stream`), a resident-sized grid for matrices of more
//! than one wave (`persist`), a deeper prefetch where a grid is at most two blocks an SM
//! (`deep`). Each lever's A/B in a step's own trace: docs/gpu/2026-12-07-qmv-levers/.
//!
//! A call can fold in the ops around the product ([`Fold`]): the sublayer's input RMS norm
//! (each block stages all of `x` anyway), SwiGLU of the fused `[gate | up]` output, and the
//! residual add. With [`super::attend`], a decode layer is five graph nodes, all quest's kernels
//! (docs/gpu/2026-12-01-attend).
//!
//! Used for one activation row (decode), 4 bits, float16, `k` a multiple of 32 and group
//! sizes that are multiples of 32; everything else, and every backend but CUDA, goes to
//! MLX's `quantized_matmul`. On by default on CUDA, where it keeps SmolLM2's greedy tokens
//! (docs/gpu/kernel_check.sh) and was ahead of MLX's on all six shapes
//! (docs/gpu/2026-12-01-attend/). `QUEST_QMV=mlx` turns it off ([`super::Kernels`]);
//! `quest kernel` compares both on the models at hand.

use std::cell::RefCell;

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use super::custom::{Config, CustomKernel, Objects, Output};
use super::spec::{KernelSource, KernelSpec};

// Rows per warp, threads per block and the blocks an SM must hold at once (at most 80
// registers a thread): the fastest of the variants swept on a decode step's matrices
// (docs/gpu/2026-12-06-qmv-sweep/, `R2x256 a4 roll csum1 mb3`).
const ROWS_PER_WARP: i32 = 2;
const THREADS: i32 = 256;
const MIN_BLOCKS: i32 = 3;

const HEADER: &str = r#"
// Two float16 weights, centred, from one shift and one lop3: the bits of (1024 + q),
// minus 1032, give q - 8 exactly.
__device__ __forceinline__ __half2 quest_pair(uint32_t word, int s) {
  uint32_t t = ((word >> (4 * s)) & 0x000F000Fu) | 0x64006400u;
  __half2 h;
  memcpy(&h, &t, 4);
  return __hsub2(h, __float2half2_rn(1032.f));
}
"#;

// The kernel's `__launch_bounds__`, which go on its declaration: MLX writes that after
// this header (and so does quest's own compile), so the header makes the one `__global__`
// that follows it carry them (`__location__(global)` is what CUDA's own headers define
// `__global__` as).
fn launch_bounds(min_blocks: i32) -> String {
    format!(
        "#undef __global__\n#define __global__ __location__(global) \
         __launch_bounds__({THREADS}, {min_blocks})\n"
    )
}

// The body MLX wraps in `(const uint32_t* w, const __half* scales, const __half* biases,
// const __half* x[, const __half* nw][, const __half* res], __half* y)` with `N`, `K`,
// `GROUP`, `R` as compile-time constants and the folds (`QUEST_NORM`, `QUEST_SWIGLU`,
// `QUEST_RESIDUAL`, `EPS`) from the header.
// The weights are centred (q - 8, in -8..7) before the float16 dot: with q itself (mean
// 7.5) the dot carries 7.5 · Σx, which the bias term then cancels, and float16's error on
// that large part survived the cancellation (SmolLM2's real activations: logits off by
// 2x, measured on the H200 in docs/gpu/2026-12-01-qmv-uncentred). `x` is stored divided by 16
// so that the products stay far from float16's range even for large activations; the
// float sum is multiplied back.
const SOURCE: &str = r#"
  extern __shared__ __align__(16) unsigned char quest_smem[];
  __half2* xs = reinterpret_cast<__half2*>(quest_smem);        // K/2 pairs, permuted
  uint4* xs4 = reinterpret_cast<uint4*>(quest_smem);
  float* csum = reinterpret_cast<float*>(quest_smem + K * 2 + 64);  // K/32 sums of x
  constexpr int CHUNKS = K / 32;
  // With QUEST_BANKS, x's pairs lie word-major: the 16 bytes a lane reads for word `wi`
  // of chunk `c` at (wi * (CHUNKS + 1) + c), so that a warp's lanes (consecutive chunks)
  // read consecutive 16 bytes, no two on a bank; the padding of one keeps the staging's
  // writes apart too. Without it, chunk-major: lanes 64 bytes apart, four to a bank.
  constexpr int XS_ROW = CHUNKS + 1;
  constexpr int GROUPS = K / GROUP;
  const uint4* wq = reinterpret_cast<const uint4*>(w);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  int row0 = (blockIdx.x * (blockDim.x / 32) + (tid >> 5)) * R;

  // A lane takes chunks lane, lane + 32, … of its rows: ITERS of them. It keeps AHEAD
  // chunks of each row asked for — words, scale and bias — and asks for the next one into
  // a chunk's slot as soon as it has multiplied it (a rolling prefetch), so that AHEAD · R
  // loads of 16 bytes are in flight at every multiply, not only at the start of a batch.
  constexpr int ITERS = (CHUNKS + 31) / 32;
  // With QUEST_PERSIST a warp goes on to the rows a grid's width further (the grid is
  // what the GPU holds at once) and asks for their first chunks while it multiplies the
  // last of these: a chunk's slot must then be the same in every row, so AHEAD divides ITERS.
  // With QUEST_DEEP (a grid of at most two blocks an SM, so twice the registers a thread)
  // up to eight chunks of each row are asked for ahead.
  constexpr int AMAX = QUEST_DEEP ? 8 : 4;
  constexpr int AHEAD = ITERS < AMAX ? ITERS
                        : !QUEST_PERSIST || ITERS % 4 == 0 ? AMAX
                        : ITERS % 3 == 0 ? 3
                        : ITERS % 2 == 0 ? 2 : 1;
  uint4 q[AHEAD][R];
  __half2 sb[AHEAD][R];  // (scale, bias) of each chunk's group
  auto load = [&](int i, int slot) {
    const int c = lane + 32 * i;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool in = c < CHUNKS && row0 + r < N;
      const size_t row = in ? row0 + r : 0;
      const int g = in ? (c * 32) / GROUP : 0;
#if QUEST_STREAM
      // Read once: streamed (evict first), so the weights do not push x and the step's
      // other small tensors out of the caches.
      q[slot][r] = in ? __ldcs(&wq[row * CHUNKS + c]) : make_uint4(0, 0, 0, 0);
      sb[slot][r] = in ? __halves2half2(__ldcs(&scales[row * GROUPS + g]), __ldcs(&biases[row * GROUPS + g]))
                       : __float2half2_rn(0.f);
#else
      q[slot][r] = in ? __ldg(&wq[row * CHUNKS + c]) : make_uint4(0, 0, 0, 0);
      sb[slot][r] = in ? __halves2half2(__ldg(&scales[row * GROUPS + g]), __ldg(&biases[row * GROUPS + g]))
                       : __float2half2_rn(0.f);
#endif
    }
  };
  const uint4* x4 = reinterpret_cast<const uint4*>(x);
#if QUEST_X1
  // x in 16-byte loads, as many a thread as known at compile time, all asked for at once
  // and first (they are in L2, the weights are not); kept in registers for the norm's sum
  // and the staging unless x is [gate | up] or long.
  constexpr int XJ = (K / 8 + QUEST_THREADS - 1) / QUEST_THREADS;
  constexpr bool PRELOAD = !QUEST_SWIGLU && XJ <= 4;
  uint4 xr[PRELOAD ? XJ : 1];
  auto x_at = [&](int j) {
    const int i = tid + j * QUEST_THREADS;
    return PRELOAD ? xr[PRELOAD ? j : 0] : (i < K / 8 ? __ldg(x4 + i) : make_uint4(0, 0, 0, 0));
  };
  if (PRELOAD) {
#pragma unroll
    for (int j = 0; j < (PRELOAD ? XJ : 1); ++j) {
      const int i = tid + j * QUEST_THREADS;
      xr[j] = i < K / 8 ? __ldg(x4 + i) : make_uint4(0, 0, 0, 0);
    }
  }
#endif
  // The first chunks are asked for before x is staged: the loads overlap the staging.
#pragma unroll
  for (int i = 0; i < AHEAD; ++i) load(i, i);

#if QUEST_NORM
  // The layer's RMS norm of x, folded in: every block reads all of x anyway.
  __shared__ float quest_red[32];
  float ss = 0.f;
#if QUEST_X1
#pragma unroll
  for (int j = 0; j < XJ; ++j) {
    if (tid + j * QUEST_THREADS < K / 8) {
      const uint4 v = x_at(j);
      const __half2* h2 = reinterpret_cast<const __half2*>(&v);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float2 f = __half22float2(h2[t]);
        ss += f.x * f.x + f.y * f.y;
      }
    }
  }
#else
  for (int i = tid; i < K; i += blockDim.x) {
    const float f = __half2float(x[i]);
    ss += f * f;
  }
#endif
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) quest_red[tid >> 5] = ss;
  __syncthreads();
  if (tid < 32) {
    float t = lane < (int)(blockDim.x / 32) ? quest_red[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (lane == 0) quest_red[0] = t;
  }
  __syncthreads();
  const float rn = rsqrtf(quest_red[0] / K + EPS);
#endif
  // A thread stages eight values of x, four threads a chunk of 32, and the chunk's sum of
  // what was staged (x / 16, exactly; multiplied back) is added across those four by two
  // shuffles in the same pass. Every thread of a warp runs the same iterations (the bound
  // is rounded up to a warp), so the shuffles see all four threads of a chunk.
  const __half2 sixteenth = __float2half2_rn(0.0625f);
  constexpr int STAGE_END = (K / 8 + 31) / 32 * 32;
  auto stage = [&](int i, uint4 v) {  // v: x's eight values i (where i < K / 8)
    float s = 0.f;
    if (i < K / 8) {
      __half* h = reinterpret_cast<__half*>(&v);
#if QUEST_SWIGLU
      // x is [gate | up]: the feed-forward's silu(gate) * up, folded in (MLX's ops, in float16).
      uint4 uv = reinterpret_cast<const uint4*>(x + K)[i];
      const __half* u = reinterpret_cast<const __half*>(&uv);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float g = __half2float(h[j]);
        const __half sig = __float2half(1.f / (1.f + expf(-g)));
        h[j] = __hmul(__hmul(h[j], sig), u[j]);
      }
#endif
#if QUEST_NORM
      uint4 wv = reinterpret_cast<const uint4*>(nw)[i];
      const __half* wn = reinterpret_cast<const __half*>(&wv);
#pragma unroll
      for (int j = 0; j < 8; ++j) h[j] = __hmul(wn[j], __float2half(__half2float(h[j]) * rn));
#endif
      __half2 p[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        p[t] = __hmul2(__halves2half2(h[t], h[t + 4]), sixteenth);
        s += __low2float(p[t]) + __high2float(p[t]);
      }
#if QUEST_BANKS
      uint4 pv;
      memcpy(&pv, p, 16);
      xs4[(i & 3) * XS_ROW + (i >> 2)] = pv;
#else
#pragma unroll
      for (int t = 0; t < 4; ++t) xs[i * 4 + t] = p[t];
#endif
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (i < K / 8 && (i & 3) == 0) csum[i >> 2] = s * 16.f;
  };
#if QUEST_X1
  // As many iterations as x's loads (STAGE_END rounds K / 8 up to a warp, never past a
  // block's multiple); a warp's 32 threads agree on the bound.
#pragma unroll
  for (int j = 0; j < XJ; ++j) {
    if (tid + j * QUEST_THREADS < STAGE_END) stage(tid + j * QUEST_THREADS, x_at(j));
  }
#else
  for (int i = tid; i < STAGE_END; i += blockDim.x) stage(i, i < K / 8 ? x4[i] : make_uint4(0, 0, 0, 0));
#endif
  __syncthreads();
#if QUEST_PERSIST
  const int stride = gridDim.x * (blockDim.x / 32) * R;
  for (; row0 < N; row0 += stride) {
#else
  if (row0 >= N) return;
#endif

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  auto use = [&](int i, int slot) {
    const int c = lane + 32 * i;
    if (c >= CHUNKS) return;
    __half2 xv[16];
#if QUEST_BANKS
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
      const uint4 v = xs4[wi * XS_ROW + c];
      memcpy(&xv[wi * 4], &v, 16);
    }
#else
#pragma unroll
    for (int t = 0; t < 16; ++t) xv[t] = xs[c * 16 + t];
#endif
    const float cs = csum[c];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float sc = __low2float(sb[slot][r]);
      const float bi = __high2float(sb[slot][r]);
      __half2 d = __float2half2_rn(0.f);
      const uint32_t words[4] = {q[slot][r].x, q[slot][r].y, q[slot][r].z, q[slot][r].w};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
        for (int t = 0; t < 4; ++t) d = __hfma2(quest_pair(words[wi], t), xv[wi * 4 + t], d);
      }
      // w = sc * q + bi = sc * (q - 8) + (bi + 8 sc)
      acc[r] += sc * 16.f * (__low2float(d) + __high2float(d)) + (bi + 8.f * sc) * cs;
    }
  };
  // Unrolled whole, so that each chunk's slot is known at compile time (registers).
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    use(i, i % AHEAD);
    if (i + AHEAD < ITERS) load(i + AHEAD, i % AHEAD);
#if QUEST_PERSIST
    else {
      row0 += stride;  // the next rows' first chunks (none past N: `load` checks)
      load(i + AHEAD - ITERS, i % AHEAD);
      row0 -= stride;
    }
#endif
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
#if QUEST_RESIDUAL
    // The residual stream's add, folded in (MLX's: the product in float16, then the sum).
    if (lane == 0 && row0 + r < N) y[row0 + r] = __hadd(res[row0 + r], __float2half(v));
#else
    if (lane == 0 && row0 + r < N) y[row0 + r] = __float2half(v);
#endif
  }
#if QUEST_PERSIST
  }
#endif
"#;

/// What a call folds in around the product, each a compiled variant of the kernel: the
/// ops MLX would run before or after it, so that a decode layer's graph has fewer ops
/// (each costs the host time every step, kernel or not).
#[derive(Clone, Copy, Default)]
pub struct Fold<'a> {
    /// RMS-norm `x` first (its weight `[k]` and epsilon): the sublayer's input norm.
    pub norm: Option<(&'a Array, f32)>,
    /// `x` is `[gate | up]`, twice the matrix's width: multiply `silu(gate) * up`.
    pub swiglu: bool,
    /// Add this (`n` values) to the product: the residual stream.
    pub residual: Option<&'a Array>,
}

impl Fold<'_> {
    pub fn is_empty(&self) -> bool {
        self.norm.is_none() && !self.swiglu && self.residual.is_none()
    }
}

/// The kernel's levers, each a compiled variant, on or off by `QUEST_QMV_LEVERS` so that
/// each can be measured against the kernel without it in the step's own trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Levers {
    /// x staged in one round of 16-byte loads, their count per thread known when compiled
    /// (else a loop of 2-byte loads for the norm's sum and one bounded by the block's size).
    pub x1: bool,
    /// x's pairs in shared memory word-major, so a warp's 16-byte reads meet no bank twice.
    pub banks: bool,
    /// The weights, scales and biases read as streamed (evict first) loads.
    pub stream: bool,
    /// Where a matrix has more rows than the GPU holds blocks of at once, a grid of only
    /// that many blocks, each going on to further rows (x staged once a block, the next
    /// rows' loads asked for while the last are multiplied).
    pub persist: bool,
    /// Where a matrix's grid is at most two blocks an SM, a kernel compiled for two (so
    /// twice the registers a thread), asking for eight chunks of a row ahead, not four.
    /// Off by default: the matrix it was built for ran slower with it
    /// (docs/gpu/2026-12-07-deep-lever/).
    pub deep: bool,
}

impl Levers {
    pub const NAMES: [&'static str; 5] = ["x1", "banks", "stream", "persist", "deep"];
    pub const ALL: Levers = Levers {
        x1: true,
        banks: true,
        stream: true,
        persist: true,
        deep: true,
    };
    pub const NONE: Levers = Levers {
        x1: false,
        banks: false,
        stream: false,
        persist: false,
        deep: false,
    };

    /// The process's, from `QUEST_QMV_LEVERS` (read once).
    pub fn for_process() -> Result<Levers> {
        static LEVERS: std::sync::OnceLock<Result<Levers, String>> = std::sync::OnceLock::new();
        LEVERS
            .get_or_init(|| {
                crate::settings::QMV_LEVERS
                    .parse::<Levers>()
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|e| anyhow::anyhow!(e))
    }
}

impl std::str::FromStr for Levers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut levers = Levers::NONE;
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => levers = Levers::ALL,
                "none" => {}
                "x1" => levers.x1 = true,
                "banks" => levers.banks = true,
                "stream" => levers.stream = true,
                "persist" => levers.persist = true,
                "deep" => levers.deep = true,
                other => {
                    return Err(format!(
                        "unknown lever `{other}`; use all, none or a list of {}",
                        Levers::NAMES.join(", ")
                    ))
                }
            }
        }
        Ok(levers)
    }
}

/// A compiled variant: `k` fixes the shared memory, the flags and epsilon the source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Variant {
    k: i32,
    norm_eps: Option<u32>,
    swiglu: bool,
    residual: bool,
    levers: Levers,
}

impl Variant {
    fn spec(&self) -> KernelSpec {
        let mut inputs = vec![
            ("w", Dtype::Uint32),
            ("scales", Dtype::Float16),
            ("biases", Dtype::Float16),
            ("x", Dtype::Float16),
        ];
        if self.norm_eps.is_some() {
            inputs.push(("nw", Dtype::Float16));
        }
        if self.residual {
            inputs.push(("res", Dtype::Float16));
        }
        let Levers {
            x1,
            banks,
            stream,
            persist,
            deep,
        } = self.levers;
        let header = format!(
            "{HEADER}#define QUEST_NORM {}\n#define QUEST_SWIGLU {}\n#define QUEST_RESIDUAL {}\n\
             #define QUEST_X1 {}\n#define QUEST_BANKS {}\n#define QUEST_STREAM {}\n#define QUEST_PERSIST {}\n#define QUEST_DEEP {}\n\
             #define QUEST_THREADS {THREADS}\nconstexpr float EPS = {:e}f;\n{}",
            u8::from(self.norm_eps.is_some()),
            u8::from(self.swiglu),
            u8::from(self.residual),
            u8::from(x1),
            u8::from(banks),
            u8::from(stream),
            u8::from(persist),
            u8::from(deep),
            self.norm_eps.map_or(0.0, f32::from_bits),
            launch_bounds(if deep { 2 } else { MIN_BLOCKS }),
        );
        KernelSpec {
            name: "quest_qmv4",
            inputs,
            outputs: vec![("y", Dtype::Float16)],
            source: SOURCE,
            header,
            shared_memory: self.k * 2 + 64 + (self.k / 32) * 4,
        }
    }

    fn make(&self) -> Result<CustomKernel> {
        self.spec().make()
    }
}

/// The compile-time constants of a call: `n` rows of `k` in groups of `group`.
fn constants(n: i32, k: i32, group: i32) -> [(&'static str, i32); 4] {
    [("N", n), ("K", k), ("GROUP", group), ("R", ROWS_PER_WARP)]
}

/// This kernel's full source, every fold on Qwen3-8B's 4096 × 4096 in groups of 64 and the
/// plain product on SmolLM2-135M's 576 × 576 in groups of 32, each with every lever on and
/// with none, to compile off the GPU (`quest dev kernels`).
pub fn sources() -> Result<Vec<KernelSource>> {
    let mut sources = Vec::new();
    for (levers, tag) in [(Levers::ALL, "levers"), (Levers::NONE, "plain")] {
        for bits in 0..8u8 {
            let variant = Variant {
                k: 4096,
                norm_eps: (bits & 1 != 0).then(|| 1e-6f32.to_bits()),
                swiglu: bits & 2 != 0,
                residual: bits & 4 != 0,
                levers,
            };
            sources.push(variant.spec().source(
                format!("qmv4-4096-fold{bits}-{tag}.cu"),
                &constants(4096, 4096, 64),
            )?);
        }
        let plain = Variant {
            k: 576,
            norm_eps: None,
            swiglu: false,
            residual: false,
            levers,
        };
        sources.push(
            plain
                .spec()
                .source(format!("qmv4-576-{tag}.cu"), &constants(576, 576, 32))?,
        );
    }
    Ok(sources)
}

thread_local! {
    // One kernel object per variant, and a call description per output shape and group size.
    static KERNELS: RefCell<Objects<Variant, (Vec<i32>, i32)>> = RefCell::default();
}

/// A quantized matrix as MLX holds it: packed `uint32` words, a scale and a bias per
/// group of `group_size` weights, each `bits` wide.
pub struct Quantized<'a> {
    pub weight: &'a Array,
    pub scales: &'a Array,
    pub biases: &'a Array,
    pub group_size: i32,
    pub bits: i32,
}

/// `x · Wᵀ` for a 4-bit matrix through quest's kernel, with `fold`'s ops around it, when
/// it applies (see the module docs); `None` leaves all of it to MLX's ops.
pub(super) fn matvec(
    x: &Array,
    matrix: &Quantized,
    fold: &Fold,
    hand_compiled: bool,
) -> Result<Option<Array>> {
    let Quantized {
        weight,
        scales,
        biases,
        group_size,
        bits,
    } = *matrix;
    if bits != 4 {
        return Ok(None);
    }
    // The matrix's input width; x is twice that when it holds [gate | up].
    let k = weight.shape().get(1).copied().unwrap_or(0) * 8;
    let n = weight.shape().first().copied().unwrap_or(0);
    let x_width = if fold.swiglu { 2 * k } else { k };
    let half = |a: &Array| a.dtype() == Dtype::Float16;
    let applies = weight.ndim() == 2
        && x.shape().last() == Some(&x_width)
        && x.size() == x_width as usize
        && k > 0
        && k % 32 == 0
        && group_size % 32 == 0
        && k % group_size == 0
        && weight.dtype() == Dtype::Uint32
        && half(x)
        && half(scales)
        && half(biases)
        && fold.norm.is_none_or(|(w, _)| half(w) && w.shape() == [k])
        && fold
            .residual
            .is_none_or(|r| half(r) && r.size() == n as usize);
    if !applies {
        return Ok(None);
    }
    let mut out_shape: Vec<i32> = x.shape().to_vec();
    *out_shape.last_mut().expect("x has a last axis") = n;
    let rows_per_block = (THREADS / 32) * ROWS_PER_WARP;
    let mut blocks = (n + rows_per_block - 1) / rows_per_block;
    let mut levers = Levers::for_process()?;
    // What the GPU holds at once: past it, a persistent grid of that many (else none).
    let sms = super::precompiled::sm_count();
    match sms.map(|sms| sms * MIN_BLOCKS) {
        Some(resident) if levers.persist && blocks > resident => blocks = resident,
        _ => levers.persist = false,
    }
    levers.deep &= sms.is_some_and(|sms| blocks <= 2 * sms);
    let config = |(shape, group): &(Vec<i32>, i32)| {
        Config::new(
            &[Output {
                shape,
                dtype: Dtype::Float16,
            }],
            (blocks * THREADS, 1, 1),
            (THREADS, 1, 1),
            &constants(n, k, *group),
        )
    };
    let variant = Variant {
        k,
        norm_eps: fold.norm.map(|(_, eps)| eps.to_bits()),
        swiglu: fold.swiglu,
        residual: fold.residual.is_some(),
        levers,
    };
    let mut inputs = vec![weight, scales, biases, x];
    inputs.extend(fold.norm.map(|(w, _)| w));
    inputs.extend(fold.residual);
    let y = KERNELS.with(|kernels| {
        kernels.borrow_mut().apply(
            &variant,
            Variant::make,
            &(out_shape, group_size),
            config,
            &inputs,
            hand_compiled,
        )
    })?;
    Ok(y.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::Levers;

    #[test]
    fn levers_parse_by_name_and_refuse_an_unknown_one() {
        assert_eq!("all".parse::<Levers>(), Ok(Levers::ALL));
        assert_eq!("none".parse::<Levers>(), Ok(Levers::NONE));
        assert_eq!("".parse::<Levers>(), Ok(Levers::NONE));
        let two: Levers = "x1, persist".parse().unwrap();
        assert_eq!(
            two,
            Levers {
                x1: true,
                persist: true,
                ..Levers::NONE
            }
        );
        let err = "x1,wide".parse::<Levers>().unwrap_err();
        assert!(err.contains("`wide`") && err.contains("persist"), "{err}");
    }
}
