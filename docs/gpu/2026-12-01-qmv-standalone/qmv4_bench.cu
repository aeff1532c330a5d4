// A 4-bit affine matrix-vector product in MLX's layout, measured against the copy
// bandwidth on the Qwen3-8B decode shape: the kernel of quest's 4-bit matvec, outside MLX.
//
// MLX's layout: w as uint32 [n, k/8] (element j of a word in bits 4j..4j+3), scales and
// biases as float16 [n, k/group]; w_dq = scale * q + bias. One decode step reads every
// row once, so the kernel is a stream: time = bytes / bandwidth if nothing else limits it.
//
// The kernel: x staged once per block in shared memory, paired so that one shift and one
// lop3 turn a word into two float16 weights (the 0x6400 magic: 1024 + q), a float16 dot
// over each 32-element chunk, then scale and bias in float32 (the bias term uses the
// chunk's sum of x, so it costs one multiply per chunk, not per weight). Each warp owns R
// rows and reads them with 16-byte loads.
//
// Build and run (on the device: nvcc, no MLX needed):
//   nvcc -O3 -arch=sm_90 -o /tmp/qmv4 docs/gpu/2026-12-01-qmv-standalone/qmv4_bench.cu && /tmp/qmv4
#include <cuda_fp16.h>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e = (x);                                                          \
    if (e != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

// Two float16 weights from one shift and one lop3: (1024 + q) as float16, minus 1024.
__device__ __forceinline__ __half2 pair(uint32_t word, int s) {
  uint32_t t = ((word >> (4 * s)) & 0x000F000Fu) | 0x64006400u;
  __half2 h;
  memcpy(&h, &t, 4);
  return __hsub2(h, __float2half2_rn(1032.f));  // q - 8: centred
}

template <int R>
__global__ void __launch_bounds__(256) qmv4(const uint4* __restrict__ w, const __half* __restrict__ scales,
                     const __half* __restrict__ biases, const __half* __restrict__ x,
                     __half* __restrict__ y, int n, int k, int group) {
  extern __shared__ __align__(16) unsigned char smem[];
  __half2* xs = reinterpret_cast<__half2*>(smem);          // k/2 pairs, permuted
  float* csum = reinterpret_cast<float*>(smem + k * 2);    // k/32 chunk sums of x
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int row0 = (blockIdx.x * (blockDim.x / 32) + (tid >> 5)) * R;
  const int chunks = k / 32;
  const int groups = k / group;

  // The first weights are asked for before x is staged: the load latency overlaps it.
  uint4 q[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    q[r] = (row0 + r < n && lane < chunks) ? __ldg(&w[(size_t)(row0 + r) * chunks + lane])
                                           : make_uint4(0, 0, 0, 0);

  for (int i = tid; i < k / 8; i += blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(x)[i];
    const __half* h = reinterpret_cast<const __half*>(&v);
#pragma unroll
    for (int s = 0; s < 4; ++s) xs[i * 4 + s] = __halves2half2(h[s], h[s + 4]);
  }
  for (int c = tid; c < k / 32; c += blockDim.x) {
    float s = 0.f;
    for (int j = 0; j < 32; ++j) s += __half2float(x[c * 32 + j]);
    csum[c] = s;
  }
  __syncthreads();
  if (row0 >= n) return;

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;

  for (int c = lane; c < chunks; c += 32) {
    // Software pipeline: the next chunk's weights are in flight while this one is used.
    uint4 next[R];
    const int cn = c + 32;
#pragma unroll
    for (int r = 0; r < R; ++r)
      next[r] = (cn < chunks && row0 + r < n) ? __ldg(&w[(size_t)(row0 + r) * chunks + cn])
                                              : make_uint4(0, 0, 0, 0);
    __half2 xv[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) xv[i] = xs[c * 16 + i];
    const float cs = csum[c];
    const int g = (c * 32) / group;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = min(row0 + r, n - 1);
      const float sc = __half2float(scales[(size_t)row * groups + g]);
      const float bi = __half2float(biases[(size_t)row * groups + g]);
      __half2 d = __float2half2_rn(0.f);
      const uint32_t words[4] = {q[r].x, q[r].y, q[r].z, q[r].w};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
        for (int s = 0; s < 4; ++s) d = __hfma2(pair(words[wi], s), xv[wi * 4 + s], d);
      }
      acc[r] += sc * (__low2float(d) + __high2float(d)) + (bi + 8.f * sc) * cs;
      q[r] = next[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && row0 + r < n) y[row0 + r] = __float2half(v);
  }
}

// The reference: one thread per row, every weight dequantized in float32.
__global__ void qmv_ref(const uint32_t* w, const __half* scales, const __half* biases,
                        const __half* x, float* y, int n, int k, int group) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) {
    uint32_t word = w[(size_t)row * (k / 8) + j / 8];
    float q = (float)((word >> (4 * (j % 8))) & 0xF);
    float s = __half2float(scales[(size_t)row * (k / group) + j / group]);
    float b = __half2float(biases[(size_t)row * (k / group) + j / group]);
    acc += (s * q + b) * __half2float(x[j]);
  }
  y[row] = acc;
}

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t v = (uint32_t)i * 2654435761u ^ seed;
    v ^= v >> 13; v *= 0x5bd1e995u; v ^= v >> 15;
    p[i] = v;
  }
}
// Scales like a 4-bit quantization of N(0, 0.02) weights: ~0.005, biases ~ -8 * scale.
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
    x[i] = __float2half(((v & 0xFFFF) / 65536.f - 0.25f) * 4.f + ((i % 97) == 0 ? 60.f : 0.f));  // a positive mean and outliers, as real activations have
  }
}

struct Mat {
  int n, k;
  uint32_t* w;
  __half *s, *b;
  size_t bytes(int group) const { return (size_t)n * k / 2 + (size_t)n * (k / group) * 4; }
};

typedef void (*Launch)(const Mat&, const __half*, __half*, int, cudaStream_t);

template <int R, int THREADS>
void launch(const Mat& m, const __half* x, __half* y, int group, cudaStream_t st) {
  const int rows_per_block = (THREADS / 32) * R;
  const int blocks = (m.n + rows_per_block - 1) / rows_per_block;
  const size_t smem = (size_t)m.k * 2 + (size_t)(m.k / 32) * 4;
  qmv4<R><<<blocks, THREADS, smem, st>>>(reinterpret_cast<const uint4*>(m.w), m.s, m.b, x, y, m.n, m.k, group);
}

int main() {
  // The Qwen3-8B shape as quest runs it: q/k/v fused, gate/up fused, 36 layers, untied head.
  const int hidden = 4096, ffn = 12288, layers = 36, vocab = 151936;
  const int shapes[4][2] = {{4096 + 2 * 1024, hidden}, {hidden, 4096}, {2 * ffn, hidden}, {hidden, ffn}};
  struct Config { const char* name; Launch f; };
  const Config configs[] = {
      {"R1x128", launch<1, 128>}, {"R2x128", launch<2, 128>}, {"R4x128", launch<4, 128>},
      {"R1x256", launch<1, 256>}, {"R2x256", launch<2, 256>}, {"R4x256", launch<4, 256>},
  };
  CHECK(cudaFuncSetAttribute(qmv4<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  CHECK(cudaFuncSetAttribute(qmv4<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  CHECK(cudaFuncSetAttribute(qmv4<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  // Copy ceiling: a 2 GiB device-to-device copy (read + write counted), median of 10.
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
    printf("copy: %.0f GB/s (2 GiB, read+write, median of 10)\n", 2.0 * sz / (t[t.size() / 2] * 1e-3) / 1e9);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }

  __half *x, *y;
  float* yref;
  CHECK(cudaMalloc(&x, (size_t)ffn * 2 * sizeof(__half)));
  CHECK(cudaMalloc(&y, (size_t)vocab * sizeof(__half)));
  CHECK(cudaMalloc(&yref, (size_t)vocab * sizeof(float)));
  fill_x<<<(ffn * 2 + 255) / 256, 256>>>(x, ffn * 2, 7);

  for (int group : {32, 64, 128}) {
    // Every layer's matrices and the head, as one token reads them (far beyond L2).
    std::vector<Mat> mats;
    size_t total = 0;
    for (int l = 0; l < layers; ++l)
      for (auto& sh : shapes) mats.push_back({sh[0], sh[1], nullptr, nullptr, nullptr});
    mats.push_back({vocab, hidden, nullptr, nullptr, nullptr});
    uint32_t seed = 1;
    for (auto& m : mats) {
      size_t words = (size_t)m.n * m.k / 8, sc = (size_t)m.n * (m.k / group);
      CHECK(cudaMalloc(&m.w, words * 4));
      CHECK(cudaMalloc(&m.s, sc * 2));
      CHECK(cudaMalloc(&m.b, sc * 2));
      fill_u32<<<1024, 256>>>(m.w, words, seed++);
      fill_scale_bias<<<1024, 256>>>(m.s, m.b, sc, seed++);
      total += m.bytes(group);
    }
    CHECK(cudaDeviceSynchronize());

    // Correctness against the float32 reference, on the first layer's four matrices and the head.
    float worst = 0.f;
    for (int i = 0; i < 5; ++i) {
      const Mat& m = i < 4 ? mats[i] : mats.back();
      for (auto& c : configs) {
        c.f(m, x, y, group, st);
        qmv_ref<<<(m.n + 127) / 128, 128, 0, st>>>(m.w, m.s, m.b, x, yref, m.n, m.k, group);
        CHECK(cudaStreamSynchronize(st));
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
    }
    printf("group %d: %.2f GB per token; worst relative L2 error vs float32 reference %.2e\n", group,
           total / 1e9, worst);

    // One token's matvecs back to back, median of 20 after 3 warm-ups, per config.
    for (auto& c : configs) {
      std::vector<float> t;
      for (int it = 0; it < 23; ++it) {
        CHECK(cudaEventRecord(e0, st));
        for (auto& m : mats) c.f(m, x, y, group, st);
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 3) t.push_back(ms);
      }
      CHECK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      float med = t[t.size() / 2];
      printf("  %-7s %.3f ms per token (min %.3f)  %.0f GB/s\n", c.name, med, t[0], total / (med * 1e-3) / 1e9);
    }
    // Where the time goes, per matrix kind (R2x256): each kind's 36 launches (the head: one) in a row.
    const char* kinds[5] = {"qkv", "o", "gate_up", "down", "head"};
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> t;
      size_t bytes = 0;
      for (int it = 0; it < 23; ++it) {
        CHECK(cudaEventRecord(e0, st));
        for (size_t i = 0; i < mats.size(); ++i)
          if ((kind == 4 && i + 1 == mats.size()) || (kind < 4 && i + 1 < mats.size() && (int)(i % 4) == kind)) {
            launch<2, 256>(mats[i], x, y, group, st);
            if (it == 0) bytes += mats[i].bytes(group);
          }
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 3) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      float med = t[t.size() / 2];
      int count = kind == 4 ? 1 : layers;
      printf("    %-8s n=%6d k=%5d  %.1f us per launch  %.0f GB/s\n", kinds[kind], mats[kind == 4 ? mats.size() - 1 : kind].n,
             mats[kind == 4 ? mats.size() - 1 : kind].k, med * 1e3 / count, bytes / (med * 1e-3) / 1e9);
    }
    for (auto& m : mats) {
      CHECK(cudaFree(m.w));
      CHECK(cudaFree(m.s));
      CHECK(cudaFree(m.b));
    }
  }
  return 0;
}
