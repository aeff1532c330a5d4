//! A decode step's attention in one CUDA kernel, the cache write included.
//!
//! On the GPU a decode step of a model up to 4B is as fast as the host can record and launch
//! its graph, a few microseconds an op (docs/gpu/2026-12-06-step-timeline/). With MLX's ops,
//! attention after the fused q/k/v projection is seven nodes a layer: quest's q/k/v kernel
//! ([`super::heads`]), two cache writes (`slice_update`), two cache views, MLX's attention
//! and a reshape. This kernel is one: from the projection's row it makes the heads as
//! [`super::heads`] does (the same code), writes the new key and value into the cache's
//! buffers, and attends over every position, the new one included, to
//! `[B, 1, heads · head_dim]`.
//!
//! **The write is in place.** An MLX kernel cannot write into its inputs by contract (its
//! arrays are values), and MLX's `slice_update` can write in place only a buffer nothing else
//! holds, which a custom kernel that reads the cache would hold. So this kernel writes the one
//! new position through the buffers' pointers, and the cache ([`CacheWrite`], the model's KV cache) keeps that sound:
//! - only a cache that no clone shares is written this way ([`CacheWrite::buffers_to_write`]);
//!   the first step of a clone goes through MLX's ops, which copy;
//! - positions below the cache's offset are never written, and nothing reads a position at
//!   or past the offset (each step attends up to its own position, which it wrote, or keeps
//!   it in registers);
//! - one stream runs the steps in order, so a step reads what the steps before it wrote;
//! - evaluating the cache evaluates the kernel ([`CacheWrite::wrote_one`]).
//!
//! The attention: a block per query head and sequence, eight lanes per cached position,
//! sixteen lane groups with two positions each in flight, an online softmax in float32,
//! combined across the block at the end. Meant for short histories: from
//! [`MAX_POSITIONS`] on, MLX's attention runs instead (see there). Float16, the heads
//! [`super::heads`] takes; anything else, and every backend but CUDA, runs MLX's ops.
//!
//! On by default on CUDA, where it checked against MLX's ops on real weights and was
//! faster on every shape measured (docs/gpu/2026-12-01-attend/); `QUEST_ATTEND=mlx` turns
//! it off ([`super::Kernels`]).

use std::cell::RefCell;

use anyhow::{anyhow, Result};
use mlx_rs::{Array, Dtype};

use super::custom::{Config, CustomKernel, Objects, Output};
use super::heads::{HeadsSpec, Key};
use super::spec::{KernelSource, KernelSpec};
use super::CacheWrite;

/// The longest history this kernel attends over. One block per head walks the whole
/// history, so its time grows faster with it than MLX's attention, which splits a long one
/// across blocks: 512 is the longest context at which `quest slope` measured this kernel
/// ahead on both Qwen3-0.6B and Qwen3-8B (docs/gpu/2026-12-01-attend/).
pub const MAX_POSITIONS: i32 = 512;

/// Threads per block: the q, k and v heads take a warp each, then all attend.
const THREADS: i32 = 128;

// Lane `sub`'s E channels of position `t`: from the cache, or from shared memory for the
// step's own position `pos` (16-byte loads of 8 halves).
const LOAD: &str = r#"
constexpr int LANES = 8;
constexpr int E = D / LANES;
__device__ __forceinline__ void quest_row(const __half* cache, const float* fresh, int t, int pos,
                                          int sub, float (&x)[E]) {
  if (t == pos) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = fresh[sub * E + e];
    return;
  }
  const uint4* v = reinterpret_cast<const uint4*>(cache + (size_t)t * D + sub * E);
#pragma unroll
  for (int j = 0; j < E / 8; ++j) {
    const uint4 u = v[j];
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      x[8 * j + 2 * i] = f.x;
      x[8 * j + 2 * i + 1] = f.y;
    }
  }
}
"#;

// The body MLX wraps in `(const __half* qkv, const int32_t* offset[, const __half* qw,
// const __half* kw], const __half* keys, Shape keys_shape, const __half* values,
// __half* out)`.
const SOURCE: &str = r#"
  constexpr int H = QH + 2 * KH;
  constexpr int G = QH / KH;
  constexpr int T = D / 32;
  constexpr int GROUPS = ATTEND_THREADS / LANES;
  __shared__ float q_s[D], k_s[D], v_s[D], m_s[GROUPS], l_s[GROUPS], acc_s[GROUPS * D];
  const int qh = blockIdx.x, row = blockIdx.y, kh = qh / G;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int pos = offset[0];
  const size_t base = ((size_t)row * KH + kh) * keys_shape[2] * D;
  // This position's key and value go into the cache's buffers, once per kv head (this kernel).
  __half* k_cache = const_cast<__half*>(keys) + base;
  __half* v_cache = const_cast<__half*>(values) + base;
  const bool writer = qh % G == 0;
  if (warp < 2) {
#if QUEST_QK_NORM
    const __half* w = warp == 0 ? qw : kw;
#else
    const __half* w = nullptr;
#endif
    __half y[T];
    quest_head(qkv + ((size_t)row * H + (warp == 0 ? qh : QH + kh)) * D, w, pos, lane, y);
    float* dst = warp == 0 ? q_s : k_s;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      dst[lane + 32 * t] = __half2float(y[t]);
      if (warp == 1 && writer) k_cache[(size_t)pos * D + lane + 32 * t] = y[t];
    }
  } else if (warp == 2) {
    const __half* src = qkv + ((size_t)row * H + QH + KH + kh) * D;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const __half y = src[lane + 32 * t];
      v_s[lane + 32 * t] = __half2float(y);
      if (writer) v_cache[(size_t)pos * D + lane + 32 * t] = y;
    }
  }
  __syncthreads();
  // Lane group `group` takes positions group, group + GROUPS, …; its lane `sub` holds E
  // channels of each. The new position comes from shared memory, the rest from the cache.
  const int group = threadIdx.x / LANES, sub = threadIdx.x % LANES;
  const unsigned mask = 0xffu << (lane & ~(LANES - 1));
  float q[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    q[e] = q_s[sub * E + e] * SCALE;
    acc[e] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  // Two positions an iteration, their loads issued together: the loop waits on memory.
  for (int t = group; t <= pos; t += 2 * GROUPS) {
    const bool two = t + GROUPS <= pos;
    float k[E], v[E], k2[E], v2[E];
    quest_row(k_cache, k_s, t, pos, sub, k);
    quest_row(v_cache, v_s, t, pos, sub, v);
    if (two) {
      quest_row(k_cache, k_s, t + GROUPS, pos, sub, k2);
      quest_row(v_cache, v_s, t + GROUPS, pos, sub, v2);
    }
    float s = 0.f, s2 = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      s += q[e] * k[e];
      s2 += two ? q[e] * k2[e] : 0.f;
    }
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) {
      s += __shfl_xor_sync(mask, s, o);
      s2 += __shfl_xor_sync(mask, s2, o);
    }
    const float m2 = two ? fmaxf(m, fmaxf(s, s2)) : fmaxf(m, s);
    const float c = __expf(m - m2), p = __expf(s - m2), p2 = two ? __expf(s2 - m2) : 0.f;
    l = l * c + p + p2;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = acc[e] * c + p * v[e] + (two ? p2 * v2[e] : 0.f);
    m = m2;
  }
  if (sub == 0) {
    m_s[group] = m;
    l_s[group] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) acc_s[group * D + sub * E + e] = acc[e];
  __syncthreads();
  // Group 0 always has position 0, so the largest score is finite; empty groups weigh 0.
  float top = -INFINITY;
  for (int g = 0; g < GROUPS; ++g) top = fmaxf(top, m_s[g]);
  float sum = 0.f;
  for (int g = 0; g < GROUPS; ++g) sum += l_s[g] * __expf(m_s[g] - top);
  for (int d = threadIdx.x; d < D; d += ATTEND_THREADS) {
    float o = 0.f;
    for (int g = 0; g < GROUPS; ++g) o += acc_s[g * D + d] * __expf(m_s[g] - top);
    out[((size_t)row * QH + qh) * D + d] = __float2half(o / sum);
  }
"#;

fn header(key: &Key) -> String {
    // The scale as MLX's attention gets it from quest (head_dim^-0.5 in float32), written
    // so that it reads back to the same float.
    let scale = (key.head_dim() as f32).powf(-0.5);
    format!(
        "{}constexpr float SCALE = {scale:?}f;\nconstexpr int ATTEND_THREADS = {THREADS};\n{LOAD}",
        key.header()
    )
}

fn spec(key: &Key) -> KernelSpec {
    let mut inputs = key.input_args();
    inputs.extend([("keys", Dtype::Float16), ("values", Dtype::Float16)]);
    KernelSpec {
        name: "quest_attend",
        inputs,
        outputs: vec![("out", Dtype::Float16)],
        source: SOURCE,
        header: header(key),
        shared_memory: 0,
    }
}

fn make(key: &Key) -> Result<CustomKernel> {
    spec(key).make()
}

/// This kernel's full source for the example layers, to compile off the GPU (`quest dev
/// kernels`).
pub fn sources() -> Result<Vec<KernelSource>> {
    Key::examples()
        .iter()
        .map(|key| spec(key).source(format!("attend-{}.cu", key.label()), &[]))
        .collect()
}

/// `[out]` for a batch of `b` with `heads` query heads of `d` channels: a block per head
/// and sequence.
fn config(&(b, heads, d): &(i32, i32, i32)) -> Result<Config> {
    let shape = [b, 1, heads * d];
    let out = Output {
        shape: &shape,
        dtype: Dtype::Float16,
    };
    Config::new(&[out], (heads * THREADS, b, 1), (THREADS, 1, 1), &[])
}

thread_local! {
    // A kernel object per layer shape, and its call description per batch.
    static KERNELS: RefCell<Objects<Key, (i32, i32, i32)>> = RefCell::default();
}

/// Attention's output `[B, 1, heads · head_dim]` for the fused projection's output `qkv`
/// (`[B, 1, (heads + 2 · kv_heads) · head_dim]`), the step's key and value written into
/// `cache` (its offset moves on by one), when quest's kernel is in use and applies (see the
/// module docs); `None` leaves all of it to the caller, `cache` untouched.
pub(super) fn attend(
    qkv: &Array,
    spec: &HeadsSpec,
    cache: &mut dyn CacheWrite,
    hand_compiled: bool,
) -> Result<Option<Array>> {
    if cache.offset() >= MAX_POSITIONS {
        return Ok(None);
    }
    let Some(key) = Key::fitting(qkv, spec) else {
        return Ok(None);
    };
    let (b, d) = (qkv.shape()[0], spec.head_dim);
    let Some((keys, values)) = cache.buffers_to_write([b, spec.kv_heads, d], Dtype::Float16)?
    else {
        return Ok(None);
    };
    let offset = super::position(cache.offset());
    let mut inputs = key.inputs(qkv, &offset, spec);
    inputs.extend([&keys, &values]);
    let out = KERNELS.with(|kernels| {
        kernels.borrow_mut().apply(
            &key,
            make,
            &(b, spec.heads, d),
            config,
            &inputs,
            hand_compiled,
        )
    })?;
    let [out]: [Array; 1] = out
        .try_into()
        .map_err(|_| anyhow!("mlx: quest's attention kernel returned the wrong outputs"))?;
    cache.wrote_one(&out);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_gives_the_scale_and_the_block() {
        let spec = HeadsSpec::without_norms(16, 8, 128, 1_000_000.0);
        let qkv = super::super::zeros_f16(&[1, 1, 32 * 128]);
        let key = Key::fitting(&qkv, &spec).unwrap();
        let header = header(&key);
        for name in [
            "SCALE = 0.088388346f",
            "ATTEND_THREADS = 128",
            "quest_head",
            "quest_row",
        ] {
            assert!(header.contains(name), "{name} missing from\n{header}");
        }
    }
}
