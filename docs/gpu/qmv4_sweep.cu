// quest's 4-bit matvec outside MLX, swept: how many rows a warp owns, threads a block, how
// many chunks a lane keeps in flight (a rolling prefetch: the next chunk is asked for as
// soon as one is used, against quest's batches of four, each used before the next is asked
// for), how the chunk sums of x are made, how the weights are loaded, and whether a row's k
// is split across blocks (more blocks for the layers' small matrices, each staging less of x).
// Every 4-bit matrix of one decode step of Qwen3-8B and of Qwen3-0.6B (random weights,
// group 32, as `random:` models have them), back to back as a step runs them, replayed as
// one CUDA graph; median of 20 after 3 warm-ups; a 2 GiB device-to-device copy for the ceiling. Each variant is checked
// against a float32 kernel that dequantizes every weight.
//
// Why: inside the step (ncu, docs/gpu/2026-12-03-host-handoff/) the layers' matrices stream
// at 1.0-1.7 TB/s and the 8B step is the GPU's; its target (50 % of the copy bandwidth)
// needs them faster. Which of the launch shape, the staging of x, the loads or too few
// blocks (128-192 on 132 SMs) holds them back is what this measures, before the kernel in
// src/kernels/matvec.rs changes.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/qmv4_sweep docs/gpu/qmv4_sweep.cu && /tmp/qmv4_sweep
//   (on the device: bash docs/gpu/measure.sh qmv-sweep)
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e = (x);                                                                      \
    if (e != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));       \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

constexpr int GROUP = 32;

__device__ __forceinline__ __half2 quest_pair(uint32_t word, int s) {
  uint32_t t = ((word >> (4 * s)) & 0x000F000Fu) | 0x64006400u;
  __half2 h;
  memcpy(&h, &t, 4);
  return __hsub2(h, __float2half2_rn(1032.f));
}

// LOAD 0: __ldg. LOAD 1: non-coherent, no L1 allocation, L2 fetches 256 B at a time.
template <int LOAD>
__device__ __forceinline__ uint4 load16(const uint4* p) {
  if constexpr (LOAD == 0) {
    return __ldg(p);
  } else {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
}

// What a call folds in, as quest's kernel does (src/kernels/matvec.rs, `Fold`): the
// sublayer's input RMS norm, SwiGLU of [gate | up], the residual add. In a step: q/k/v and
// gate/up fold the norm, o the residual, down SwiGLU and the residual.
constexpr int NORM = 1, SWIGLU = 2, RESIDUAL = 4;
constexpr float EPS = 1e-6f;

// The kernel of src/kernels/matvec.rs with its choices as parameters:
//   R, THREADS  rows a warp owns, threads a block (quest: 4, 256)
//   AHEAD       chunks of each row a lane keeps asked for (quest: 4)
//   ROLL        0: quest's batches (AHEAD chunks asked for, all used, then the next
//               AHEAD); 1: rolling (a chunk's slot is asked for again as soon as it is used)
//   CSUM        0: quest's chunk sums of x (a second pass, a thread a chunk);
//               1: in the staging pass, four threads a chunk, two shuffles
//   LOAD        see load16
//   MINB        __launch_bounds__'s minimum blocks per SM (1: the compiler's choice)
//   SPLIT       blocks a row's k is split across (quest: 1). Above 1 a block stages and
//               multiplies only its slice of x (blockIdx.y), writes its rows' partial sums,
//               and the block that finishes a row group last adds them in slice order
//               (the same sum every run), folds the residual and writes y: the layers'
//               small matrices get SPLIT times the blocks of 32 rows they have (128-192 on
//               132 SMs), and each stages 1/SPLIT of x. `part` holds SPLIT x N floats,
//               `count` a zero per row group (the last block sets it back to zero).
//   CLUSTER     1 (with SPLIT above 1): a row group's SPLIT blocks are one thread-block
//               cluster (sm_90), and its first block adds the others' sums from their
//               shared memory: no `part`, no `count`, nothing for MLX to allocate or zero.
template <int K, int R, int THREADS, int AHEAD, int ROLL, int CSUM, int LOAD, int FOLD,
          int SPLIT, int CLUSTER>
__device__ __forceinline__ void qmv4_body(const uint32_t* __restrict__ w, const __half* __restrict__ scales,
         const __half* __restrict__ biases, const __half* __restrict__ x,
         const __half* __restrict__ nw, const __half* __restrict__ res, __half* __restrict__ y,
         int N, float* __restrict__ part, unsigned* __restrict__ count) {
  static_assert(CLUSTER == 0 || SPLIT > 1, "a cluster gathers a split");
  static_assert(K % (32 * SPLIT) == 0, "a slice is whole chunks");
  // This block's slice of k: elements [k0, k0 + KS), chunks [c0, c0 + CHUNKS).
  constexpr int KS = K / SPLIT;
  const int k0 = SPLIT == 1 ? 0 : blockIdx.y * KS;
  const int c0 = k0 / 32;
  extern __shared__ __align__(16) unsigned char quest_smem[];
  __half2* xs = reinterpret_cast<__half2*>(quest_smem);
  float* csum = reinterpret_cast<float*>(quest_smem + KS * 2);
  constexpr int CHUNKS = KS / 32;
  constexpr int ROW_CHUNKS = K / 32;
  constexpr int GROUPS = K / GROUP;
  constexpr int ITERS = (CHUNKS + 31) / 32;
  constexpr int A = ITERS < AHEAD ? ITERS : AHEAD;
  const uint4* wq = reinterpret_cast<const uint4*>(w);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int row0 = (blockIdx.x * (THREADS / 32) + (tid >> 5)) * R;

  uint4 q[A][R];
  __half2 sb[A][R];
  auto load = [&](int i, int slot) {
    const int c = lane + 32 * i;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool in = i < ITERS && c < CHUNKS && row0 + r < N;
      const size_t row = in ? row0 + r : 0;
      const int g = in ? ((c0 + c) * 32) / GROUP : 0;
      q[slot][r] = in ? load16<LOAD>(&wq[row * ROW_CHUNKS + c0 + c]) : make_uint4(0, 0, 0, 0);
      sb[slot][r] = in ? __halves2half2(__ldg(&scales[row * GROUPS + g]), __ldg(&biases[row * GROUPS + g]))
                       : __float2half2_rn(0.f);
    }
  };
  // The first chunks are asked for before x is staged: the loads overlap the staging.
#pragma unroll
  for (int i = 0; i < A; ++i) load(i, i);

  float rn = 1.f;
  if constexpr ((FOLD & NORM) != 0) {
    __shared__ float quest_red[32];
    float ss = 0.f;
    for (int i = tid; i < K; i += THREADS) {
      const float f = __half2float(x[i]);
      ss += f * f;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) quest_red[tid >> 5] = ss;
    __syncthreads();
    if (tid < 32) {
      float t = lane < THREADS / 32 ? quest_red[lane] : 0.f;
      for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
      if (lane == 0) quest_red[0] = t;
    }
    __syncthreads();
    rn = rsqrtf(quest_red[0] / K + EPS);
  }
  const __half2 sixteenth = __float2half2_rn(0.0625f);
  // CSUM 1 sums in this pass: every thread of a warp runs the same iterations (the bound is
  // rounded up to a warp), so the shuffles see all four threads of a chunk.
  constexpr int STAGE_END = CSUM == 1 ? (KS / 8 + 31) / 32 * 32 : KS / 8;
  for (int i = tid; i < STAGE_END; i += THREADS) {
    float s = 0.f;
    if (i < KS / 8) {
      uint4 v = reinterpret_cast<const uint4*>(x + k0)[i];
      __half* h = reinterpret_cast<__half*>(&v);
      if constexpr ((FOLD & SWIGLU) != 0) {
        uint4 uv = reinterpret_cast<const uint4*>(x + K + k0)[i];
        const __half* u = reinterpret_cast<const __half*>(&uv);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float g = __half2float(h[j]);
          const __half sig = __float2half(1.f / (1.f + expf(-g)));
          h[j] = __hmul(__hmul(h[j], sig), u[j]);
        }
      }
      if constexpr ((FOLD & NORM) != 0) {
        uint4 wv = reinterpret_cast<const uint4*>(nw + k0)[i];
        const __half* wn = reinterpret_cast<const __half*>(&wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) h[j] = __hmul(wn[j], __float2half(__half2float(h[j]) * rn));
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const __half2 p = __hmul2(__halves2half2(h[t], h[t + 4]), sixteenth);
        xs[i * 4 + t] = p;
        s += __low2float(p) + __high2float(p);
      }
    }
    if constexpr (CSUM == 1) {
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (i < KS / 8 && (i & 3) == 0) csum[i >> 2] = s * 16.f;
    }
  }
  if constexpr (CSUM == 0) {
    // quest's: the sums of what was staged where a fold changed x, else of x itself.
    if constexpr ((FOLD & (NORM | SWIGLU)) != 0) {
      __syncthreads();
      for (int c = tid; c < CHUNKS; c += THREADS) {
        float s = 0.f;
        for (int j = 0; j < 16; ++j) s += __low2float(xs[c * 16 + j]) + __high2float(xs[c * 16 + j]);
        csum[c] = s * 16.f;
      }
    } else {
      for (int c = tid; c < CHUNKS; c += THREADS) {
        float s = 0.f;
        for (int j = 0; j < 32; ++j) s += __half2float(x[k0 + c * 32 + j]);
        csum[c] = s;
      }
    }
  }
  __syncthreads();
  // Split, every thread of the block reaches the hand-over below.
  if (SPLIT == 1 && row0 >= N) return;

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  auto use = [&](int i, int slot) {
    const int c = lane + 32 * i;
    if (c >= CHUNKS) return;
    __half2 xv[16];
#pragma unroll
    for (int t = 0; t < 16; ++t) xv[t] = xs[c * 16 + t];
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
      acc[r] += sc * 16.f * (__low2float(d) + __high2float(d)) + (bi + 8.f * sc) * cs;
    }
  };
  if constexpr (ROLL == 1) {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      use(i, i % A);
      if (i + A < ITERS) load(i + A, i % A);
    }
  } else {
    for (int b = 0; b < ITERS; b += A) {
      if (b > 0) {
#pragma unroll
        for (int p = 0; p < A; ++p) load(b + p, p);
      }
#pragma unroll
      for (int p = 0; p < A; ++p)
        if (b + p < ITERS) use(b + p, p);
    }
  }
  constexpr int ROWS = (THREADS / 32) * R;
  __shared__ float quest_rows[CLUSTER == 1 ? ROWS : 1];
  auto finish = [&](int row, float v) {
    if constexpr ((FOLD & RESIDUAL) != 0)
      y[row] = __hadd(res[row], __float2half(v));
    else
      y[row] = __float2half(v);
  };
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && row0 + r < N) {
      if constexpr (SPLIT == 1)
        finish(row0 + r, v);
      else if constexpr (CLUSTER == 0)
        part[(size_t)blockIdx.y * N + row0 + r] = v;
    }
    if constexpr (CLUSTER == 1) {
      if (lane == 0) quest_rows[(tid >> 5) * R + r] = v;
    }
  }
  if constexpr (CLUSTER == 1) {
    // The cluster's first block (slice 0) adds the slices' sums in order; the second
    // barrier keeps every block's shared memory until it has read it.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (cluster.block_rank() == 0) {
      for (int i = tid; i < ROWS; i += THREADS) {
        const int row = blockIdx.x * ROWS + i;
        if (row >= N) break;
        float v = 0.f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) v += cluster.map_shared_rank(quest_rows, s)[i];
        finish(row, v);
      }
    }
    cluster.sync();
  } else if constexpr (SPLIT > 1) {
    // The last of a row group's SPLIT blocks to arrive adds the partial sums.
    __shared__ bool quest_last;
    __syncthreads();
    if (tid == 0) {
      __threadfence();
      quest_last = atomicAdd(&count[blockIdx.x], 1u) == SPLIT - 1;
    }
    __syncthreads();
    if (!quest_last) return;
    __threadfence();
    for (int i = tid; i < ROWS; i += THREADS) {
      const int row = blockIdx.x * ROWS + i;
      if (row >= N) break;
      float v = 0.f;
#pragma unroll
      // volatile: read from L2, where the other blocks' writes are, not from this SM's L1.
      for (int s = 0; s < SPLIT; ++s) v += *(volatile const float*)&part[(size_t)s * N + row];
      finish(row, v);
    }
    if (tid == 0) count[blockIdx.x] = 0;
  }
}

#define QMV4_PARAMS                                                                         \
  const uint32_t *__restrict__ w, const __half *__restrict__ scales,                        \
      const __half *__restrict__ biases, const __half *__restrict__ x,                      \
      const __half *__restrict__ nw, const __half *__restrict__ res, __half *__restrict__ y, \
      int N, float *__restrict__ part, unsigned *__restrict__ count
#define QMV4_ARGS w, scales, biases, x, nw, res, y, N, part, count

template <int K, int R, int THREADS, int AHEAD, int ROLL, int CSUM, int LOAD, int MINB, int FOLD,
          int SPLIT>
__global__ void __launch_bounds__(THREADS, MINB) qmv4(QMV4_PARAMS) {
  qmv4_body<K, R, THREADS, AHEAD, ROLL, CSUM, LOAD, FOLD, SPLIT, 0>(QMV4_ARGS);
}

// A row group's SPLIT blocks as one cluster: the cluster's shape is the kernel's own
// (compiled in, as a launch through MLX would need), gridDim.y == SPLIT.
template <int K, int R, int THREADS, int AHEAD, int ROLL, int CSUM, int LOAD, int MINB, int FOLD,
          int SPLIT>
__global__ void __cluster_dims__(1, SPLIT, 1) __launch_bounds__(THREADS, MINB)
    qmv4_cluster(QMV4_PARAMS) {
  qmv4_body<K, R, THREADS, AHEAD, ROLL, CSUM, LOAD, FOLD, SPLIT, 1>(QMV4_ARGS);
}

// What the folds make of x, in float32 (the reference's input): RMS norm, SwiGLU.
__global__ void fold_ref(const __half* x, const __half* nw, float* xr, int k, int fold) {
  __shared__ float rn;
  if (threadIdx.x == 0) {
    float ss = 0.f;
    for (int i = 0; i < k; ++i) ss += __half2float(x[i]) * __half2float(x[i]);
    rn = rsqrtf(ss / k + EPS);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    float v = __half2float(x[i]);
    if (fold & SWIGLU) {
      const float u = __half2float(x[k + i]);
      v = v / (1.f + expf(-v)) * u;
    }
    if (fold & NORM) v = v * rn * __half2float(nw[i]);
    xr[i] = v;
  }
}

__global__ void qmv_ref(const uint32_t* w, const __half* scales, const __half* biases,
                        const float* x, const __half* res, float* y, int n, int k, int fold) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) {
    uint32_t word = w[(size_t)row * (k / 8) + j / 8];
    float q = (float)((word >> (4 * (j % 8))) & 0xF);
    float s = __half2float(scales[(size_t)row * (k / GROUP) + j / GROUP]);
    float b = __half2float(biases[(size_t)row * (k / GROUP) + j / GROUP]);
    acc += (s * q + b) * x[j];
  }
  y[row] = acc + ((fold & RESIDUAL) ? __half2float(res[row]) : 0.f);
}

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t v = (uint32_t)i * 2654435761u ^ seed;
    v ^= v >> 13; v *= 0x5bd1e995u; v ^= v >> 15;
    p[i] = v;
  }
}
__global__ void fill_scale_bias(__half* s, __half* b, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t v = (uint32_t)i * 2246822519u ^ seed;
    v ^= v >> 15; v *= 0x2c1b3c6du; v ^= v >> 12;
    float u = (v & 0xFFFF) / 65536.f;
    float sc = 0.004f + 0.002f * u;
    s[i] = __float2half(sc);
    b[i] = __float2half(-7.5f * sc);
  }
}
__global__ void fill_x(__half* x, int k, uint32_t seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < k) {
    uint32_t v = (uint32_t)i * 2654435761u ^ seed;
    v ^= v >> 13; v *= 0x5bd1e995u; v ^= v >> 15;
    x[i] = __float2half(((v & 0xFFFF) / 65536.f - 0.25f) * 4.f + ((i % 97) == 0 ? 60.f : 0.f));
  }
}

struct Mat {
  int n, k, fold;
  uint32_t* w;
  __half *s, *b;
  size_t bytes() const { return (size_t)n * k / 2 + (size_t)n * (k / GROUP) * 4; }
};

// Shared inputs of every call: x (2 · 12288 wide, for SwiGLU's [gate | up]), the norm's
// weight, the residual.
struct Io {
  const __half *x, *nw, *res;
  __half* y;
  float* part;      // SPLIT x rows partial sums
  unsigned* count;  // a zero per row group
};

// One launch of a variant, any of the step's widths and folds.
typedef void (*Launch)(const Mat&, const Io&, cudaStream_t);

template <int K, int R, int T, int AH, int RL, int CS, int LD, int MB, int F, int SP, int CL>
void launch_kf(const Mat& m, const Io& io, cudaStream_t st) {
  void (*f)(QMV4_PARAMS);
  if constexpr (CL == 1)
    f = qmv4_cluster<K, R, T, AH, RL, CS, LD, MB, F, SP>;
  else
    f = qmv4<K, R, T, AH, RL, CS, LD, MB, F, SP>;
  const size_t smem = (size_t)(K / SP) * 2 + (size_t)(K / SP / 32) * 4;
  static bool set = false;
  if (!set) {
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    set = true;
  }
  const int rows = (T / 32) * R;
  const dim3 grid((m.n + rows - 1) / rows, SP);
  f<<<grid, T, smem, st>>>(m.w, m.s, m.b, io.x, io.nw, io.res, io.y, m.n, io.part, io.count);
}
// Only the widths and folds a step of the two models has (each pair one compiled kernel).
template <int R, int T, int AH, int RL, int CS, int LD, int MB, int SP = 1, int CL = 0>
void launch(const Mat& m, const Io& io, cudaStream_t st) {
#define QUEST_CASE(K, F) \
  if (m.k == K && m.fold == (F)) return launch_kf<K, R, T, AH, RL, CS, LD, MB, (F), SP, CL>(m, io, st);
  QUEST_CASE(4096, NORM)                 // Qwen3-8B q/k/v, gate/up
  QUEST_CASE(4096, RESIDUAL)             // Qwen3-8B o
  QUEST_CASE(12288, SWIGLU | RESIDUAL)   // Qwen3-8B down
  QUEST_CASE(4096, 0)                    // Qwen3-8B head
  QUEST_CASE(1024, NORM)                 // Qwen3-0.6B q/k/v, gate/up
  QUEST_CASE(2048, RESIDUAL)             // Qwen3-0.6B o
  QUEST_CASE(3072, SWIGLU | RESIDUAL)    // Qwen3-0.6B down
  QUEST_CASE(1024, 0)                    // Qwen3-0.6B head
#undef QUEST_CASE
  fprintf(stderr, "no kernel for k %d, fold %d\n", m.k, m.fold);
  exit(1);
}

struct Variant {
  const char* name;
  Launch f;
};

struct Model {
  const char* name;
  int hidden, q_rows, kv_rows, ffn, layers, vocab;
};

int main() {
  //                        R  THREADS AHEAD ROLL CSUM LOAD MINB
  const Variant variants[] = {
      {"quest R4x256 a4 batched", launch<4, 256, 4, 0, 0, 0, 1>},
      {"R4x256 a4 roll", launch<4, 256, 4, 1, 0, 0, 1>},
      {"R4x256 a4 roll csum1", launch<4, 256, 4, 1, 1, 0, 1>},
      {"R2x256 a4 roll csum1", launch<2, 256, 4, 1, 1, 0, 1>},
      {"R1x256 a4 roll csum1", launch<1, 256, 4, 1, 1, 0, 1>},
      {"R2x128 a4 roll csum1", launch<2, 128, 4, 1, 1, 0, 1>},
      {"R4x128 a4 roll csum1", launch<4, 128, 4, 1, 1, 0, 1>},
      {"R2x256 a8 roll csum1", launch<2, 256, 8, 1, 1, 0, 1>},
      {"R2x256 a2 roll csum1", launch<2, 256, 2, 1, 1, 0, 1>},
      {"R2x256 a4 roll csum1 L2", launch<2, 256, 4, 1, 1, 1, 1>},
      {"R4x256 a4 roll csum1 L2", launch<4, 256, 4, 1, 1, 1, 1>},
      {"R1x256 a4 roll csum1 L2", launch<1, 256, 4, 1, 1, 1, 1>},
      {"R2x256 a4 roll csum1 mb3", launch<2, 256, 4, 1, 1, 0, 3>},
      {"R4x256 a4 roll csum1 mb2", launch<4, 256, 4, 1, 1, 0, 2>},
      {"R2x128 a4 roll csum1 mb6", launch<2, 128, 4, 1, 1, 0, 6>},
      {"R2x128 a8 roll csum1 L2", launch<2, 128, 8, 1, 1, 1, 1>},
      //                                     R  THREADS AHEAD ROLL CSUM LOAD MINB SPLIT
      {"R4x256 a4 roll csum1 split2", launch<4, 256, 4, 1, 1, 0, 1, 2>},
      {"R4x256 a4 roll csum1 split4", launch<4, 256, 4, 1, 1, 0, 1, 4>},
      {"R2x256 a4 roll csum1 split2", launch<2, 256, 4, 1, 1, 0, 1, 2>},
      {"R2x256 a4 roll csum1 split4", launch<2, 256, 4, 1, 1, 0, 1, 4>},
      {"R4x128 a4 roll csum1 split4", launch<4, 128, 4, 1, 1, 0, 1, 4>},
      {"R4x256 a4 roll csum1 L2 split4", launch<4, 256, 4, 1, 1, 1, 1, 4>},
      //                                       R  THREADS AHEAD ROLL CSUM LOAD MINB SPLIT CLUSTER
      {"R4x256 a4 roll csum1 split2 cluster", launch<4, 256, 4, 1, 1, 0, 1, 2, 1>},
      {"R4x256 a4 roll csum1 split4 cluster", launch<4, 256, 4, 1, 1, 0, 1, 4, 1>},
      {"R2x256 a4 roll csum1 split4 cluster", launch<2, 256, 4, 1, 1, 0, 1, 4, 1>},
      {"R4x128 a4 roll csum1 split8 cluster", launch<4, 128, 4, 1, 1, 0, 1, 8, 1>},
  };
  const Model models[] = {
      {"Qwen3-8B", 4096, 4096, 1024, 12288, 36, 151936},
      {"Qwen3-0.6B", 1024, 2048, 1024, 3072, 28, 151936},
  };
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  double copy_gb_s = 0;
  {
    size_t sz = (size_t)2 << 30;
    void *a, *b;
    CHECK(cudaMalloc(&a, sz));
    CHECK(cudaMalloc(&b, sz));
    CHECK(cudaMemset(a, 1, sz));
    std::vector<float> t;
    for (int i = 0; i < 11; ++i) {
      CHECK(cudaEventRecord(e0, st));
      CHECK(cudaMemcpyAsync(b, a, sz, cudaMemcpyDeviceToDevice, st));
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    copy_gb_s = 2.0 * sz / (t[t.size() / 2] * 1e-3) / 1e9;
    printf("copy: %.0f GB/s (2 GiB, read+write, median of 10)\n", copy_gb_s);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  const int XMAX = 2 * 12288, YMAX = 151936;
  __half *x, *nw, *res, *y;
  float *xr, *yref;
  CHECK(cudaMalloc(&x, (size_t)XMAX * sizeof(__half)));
  CHECK(cudaMalloc(&nw, (size_t)XMAX * sizeof(__half)));
  CHECK(cudaMalloc(&res, (size_t)YMAX * sizeof(__half)));
  CHECK(cudaMalloc(&y, (size_t)YMAX * sizeof(__half)));
  CHECK(cudaMalloc(&xr, (size_t)XMAX * sizeof(float)));
  CHECK(cudaMalloc(&yref, (size_t)YMAX * sizeof(float)));
  fill_x<<<(XMAX + 255) / 256, 256>>>(x, XMAX, 7);
  fill_x<<<(XMAX + 255) / 256, 256>>>(nw, XMAX, 11);
  fill_x<<<(YMAX + 255) / 256, 256>>>(res, YMAX, 13);
  // Split variants' partial sums (up to 8 slices) and row groups' counters (a group is at
  // least 4 rows), zero once: each group's last block sets its counter back to zero.
  float* part;
  unsigned* counters;
  CHECK(cudaMalloc(&part, (size_t)8 * YMAX * sizeof(float)));
  CHECK(cudaMalloc(&counters, (size_t)YMAX * sizeof(unsigned)));
  CHECK(cudaMemset(counters, 0, (size_t)YMAX * sizeof(unsigned)));
  const Io io{x, nw, res, y, part, counters};

  for (const Model& md : models) {
    // q/k/v fused (the norm folded in), o (the residual), gate/up fused (the norm), down
    // (SwiGLU and the residual); every layer; then the head (the final norm is MLX's op).
    const int shapes[4][3] = {{md.q_rows + 2 * md.kv_rows, md.hidden, NORM},
                              {md.hidden, md.q_rows, RESIDUAL},
                              {2 * md.ffn, md.hidden, NORM},
                              {md.hidden, md.ffn, SWIGLU | RESIDUAL}};
    std::vector<Mat> mats;
    size_t total = 0;
    for (int l = 0; l < md.layers; ++l)
      for (auto& sh : shapes) mats.push_back({sh[0], sh[1], sh[2], nullptr, nullptr, nullptr});
    mats.push_back({md.vocab, md.hidden, 0, nullptr, nullptr, nullptr});
    uint32_t seed = 1;
    for (auto& m : mats) {
      size_t words = (size_t)m.n * m.k / 8, sc = (size_t)m.n * (m.k / GROUP);
      CHECK(cudaMalloc(&m.w, words * 4));
      CHECK(cudaMalloc(&m.s, sc * 2));
      CHECK(cudaMalloc(&m.b, sc * 2));
      fill_u32<<<1024, 256>>>(m.w, words, seed++);
      fill_scale_bias<<<1024, 256>>>(m.s, m.b, sc, seed++);
      total += m.bytes();
    }
    CHECK(cudaDeviceSynchronize());
    printf("\n%s: %.3f GB per token (group %d); at the copy's rate %.3f ms\n", md.name, total / 1e9,
           GROUP, total / (copy_gb_s * 1e9) * 1e3);
    const char* kinds[5] = {"qkv", "o", "gate_up", "down", "head"};
    struct Result {
      const char* name;
      float step_ms, kind_us[5], err;
    };
    std::vector<Result> results;
    for (const Variant& v : variants) {
      // Correctness: the first layer's four matrices and the head against float32.
      float worst = 0.f;
      for (int i = 0; i < 5; ++i) {
        const Mat& m = i < 4 ? mats[i] : mats.back();
        v.f(m, io, st);
        fold_ref<<<1, 256, 0, st>>>(x, nw, xr, m.k, m.fold);
        qmv_ref<<<(m.n + 127) / 128, 128, 0, st>>>(m.w, m.s, m.b, xr, res, yref, m.n, m.k, m.fold);
        CHECK(cudaStreamSynchronize(st));
        CHECK(cudaGetLastError());
        std::vector<__half> hy(m.n);
        std::vector<float> hr(m.n);
        CHECK(cudaMemcpy(hy.data(), y, m.n * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hr.data(), yref, m.n * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int r = 0; r < m.n; ++r) {
          double d = (double)__half2float(hy[r]) - hr[r];
          num += d * d;
          den += (double)hr[r] * hr[r];
        }
        worst = std::max(worst, (float)std::sqrt(num / std::max(den, 1e-30)));
      }
      // The whole step's matvecs, then each kind's launches in a row, each captured once
      // as a CUDA graph and replayed (as MLX's CUDA backend runs a step): the launches of
      // the small shapes' short kernels are then not the host's to pace.
      float kind_us[5];
      float step_ms = 0.f;
      for (int kind = -1; kind < 5; ++kind) {
        int count = 0;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (size_t i = 0; i < mats.size(); ++i) {
          const bool head = i + 1 == mats.size();
          if (kind == -1 || (kind == 4 && head) || (kind < 4 && !head && (int)(i % 4) == kind)) {
            v.f(mats[i], io, st);
            ++count;
          }
        }
        CHECK(cudaStreamEndCapture(st, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        std::vector<float> t;
        for (int it = 0; it < 23; ++it) {
          CHECK(cudaEventRecord(e0, st));
          CHECK(cudaGraphLaunch(exec, st));
          CHECK(cudaEventRecord(e1, st));
          CHECK(cudaEventSynchronize(e1));
          float ms;
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (it >= 3) t.push_back(ms);
        }
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        std::sort(t.begin(), t.end());
        const float med = t[t.size() / 2];
        if (kind < 0)
          step_ms = med;
        else
          kind_us[kind] = med * 1e3f / count;
      }
      printf("  %-36s step %.3f ms %5.0f GB/s (%4.1f %% of copy) | us/launch:", v.name, step_ms,
             total / (step_ms * 1e-3) / 1e9, 100.0 * total / (step_ms * 1e-3) / 1e9 / copy_gb_s);
      for (int kind = 0; kind < 5; ++kind) printf(" %s %.1f", kinds[kind], kind_us[kind]);
      printf(" | err %.1e\n", worst);
      fflush(stdout);
      Result res{v.name, step_ms, {}, worst};
      std::copy(kind_us, kind_us + 5, res.kind_us);
      results.push_back(res);
    }
    // The fastest of the variants as accurate as quest's (error at most twice its own, the
    // float16 output's rounding aside), per kind and for the whole step, against quest's.
    const Result& quest = results[0];
    auto accurate = [&](const Result& r) { return r.err <= 2.f * quest.err + 1e-4f; };
    printf("  fastest as accurate as quest's (error <= 2 x %.1e):\n", quest.err);
    for (int kind = 0; kind < 5; ++kind) {
      const Result* best = &quest;
      for (const Result& r : results)
        if (accurate(r) && r.kind_us[kind] < best->kind_us[kind]) best = &r;
      printf("    %-8s %-36s %7.1f us a launch (quest's %.1f, x%.2f)\n", kinds[kind], best->name,
             best->kind_us[kind], quest.kind_us[kind], quest.kind_us[kind] / best->kind_us[kind]);
    }
    const Result* best = &quest;
    for (const Result& r : results)
      if (accurate(r) && r.step_ms < best->step_ms) best = &r;
    printf("    %-8s %-36s %7.3f ms (quest's %.3f, x%.2f), %.1f %% of copy\n", "step", best->name,
           best->step_ms, quest.step_ms, quest.step_ms / best->step_ms,
           100.0 * total / (best->step_ms * 1e-3) / 1e9 / copy_gb_s);
    fflush(stdout);
    for (auto& m : mats) {
      CHECK(cudaFree(m.w));
      CHECK(cudaFree(m.s));
      CHECK(cudaFree(m.b));
    }
  }
  return 0;
}
