// CUDA kernels of the fused attention (plan and arguments: tensor/cuda/attention_launch.h): the
// CPU kernel's algorithm (tensor/cpu/attention/attention.cpp) written plainly, one block per
// tile, the tiles in shared memory, every sum in float32. Dropout draws the same Philox counters
// as the CPU (Note [Attention dropout stream]), so both devices drop the same weights.
#include <cuda_runtime.h>

#include "tensor/cuda/attention_launch.h"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"
#include "tensor/philox.h"

namespace weft::cuda::detail {
namespace {

__device__ inline int64_t lesser(int64_t a, int64_t b) { return a < b ? a : b; }

// The dropout multiplier of query i and key j in head bh: 1/keep where kept, else 0.
__device__ inline float dropout_multiplier(const AttentionArgs& a, int64_t bh, int64_t i, int64_t j) {
  if (a.keep >= 1.0f) return 1.0f;
  const auto index = static_cast<uint64_t>((bh * a.S + j) * a.L + i);
  return weft::detail::philox_uniform_at(a.key, index) < a.keep ? 1.0f / a.keep : 0.0f;
}

// The scaled score q·k (the query row already scaled) with the causal mask and the mask applied.
__device__ inline float masked_score(const AttentionArgs& a, float dot, int64_t bh, int64_t i, int64_t j) {
  if (a.causal && j > i) return -INFINITY;
  if (a.mask == nullptr) return dot;
  const char* m = a.mask + ((bh * a.L + i) * a.S + j) * itemsize_of(a.mask_dtype);
  if (a.mask_dtype == DType::Bool) return *reinterpret_cast<const bool*>(m) ? dot : -INFINITY;
  return dot + load_as<float>(m, a.mask_dtype);
}

// Rows r < count of a (.., width) tensor starting at row `first`, widened into shared `dst`
// (times `factor`), zero past `count` up to `rows`.
__device__ inline void load_tile(const char* src, DType dtype, int64_t first, int count, int rows, int64_t width,
                                 float factor, float* dst) {
  const int64_t size = itemsize_of(dtype);
  for (int64_t x = threadIdx.x; x < rows * width; x += blockDim.x) {
    const int64_t r = x / width;
    dst[x] = r < count ? load_as<float>(src + ((first + r) * width + x % width) * size, dtype) * factor : 0.0f;
  }
}

__global__ void attention_forward_kernel(AttentionArgs a, int rows, int keys) {
  extern __shared__ float shared[];
  const int64_t E = a.E, Ev = a.Ev;
  float* q = shared;
  float* k = q + rows * E;
  float* v = k + keys * E;
  float* p = v + keys * Ev;
  float* o = p + rows * keys;
  float* m = o + rows * Ev;
  float* l = m + rows;
  float* alpha = l + rows;
  const int64_t tiles = (a.L + rows - 1) / rows;
  const int64_t bh = blockIdx.x / tiles, i0 = blockIdx.x % tiles * rows;
  const int64_t n = bh / a.heads_q, h = bh % a.heads_q;
  const int64_t bhk = n * a.heads_k + h / (a.heads_q / a.heads_k);
  const int br = static_cast<int>(lesser(rows, a.L - i0));

  load_tile(a.q, a.dtype, bh * a.L + i0, br, rows, E, a.scale, q);
  for (int64_t x = threadIdx.x; x < rows * Ev; x += blockDim.x) o[x] = 0.0f;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const int64_t end = a.causal ? lesser(a.S, i0 + br) : a.S;
  for (int64_t j0 = 0; j0 < end; j0 += keys) {
    const int bc = static_cast<int>(lesser(keys, end - j0));
    __syncthreads();
    load_tile(a.k, a.dtype, bhk * a.S + j0, bc, keys, E, 1.0f, k);
    load_tile(a.v, a.dtype, bhk * a.S + j0, bc, keys, Ev, 1.0f, v);
    __syncthreads();
    for (int x = threadIdx.x; x < br * bc; x += blockDim.x) {
      const int r = x / bc, j = x % bc;
      float dot = 0.0f;
      for (int64_t e = 0; e < E; ++e) dot += q[r * E + e] * k[j * E + e];
      p[r * keys + j] = masked_score(a, dot, bh, i0 + r, j0 + j);
    }
    __syncthreads();
    for (int r = threadIdx.x; r < br; r += blockDim.x) {
      float most = m[r];
      for (int j = 0; j < bc; ++j) most = fmaxf(most, p[r * keys + j]);
      const float base = most == -INFINITY ? 0.0f : most;
      float sum = 0.0f;
      for (int j = 0; j < bc; ++j) {
        const float e = expf(p[r * keys + j] - base);
        sum += e;
        p[r * keys + j] = e * dropout_multiplier(a, bh, i0 + r, j0 + j);
      }
      alpha[r] = expf(m[r] - base);
      l[r] = alpha[r] * l[r] + sum;
      m[r] = most;
    }
    __syncthreads();
    for (int64_t x = threadIdx.x; x < br * Ev; x += blockDim.x) {
      const int64_t r = x / Ev, d = x % Ev;
      float acc = o[x] * alpha[r];
      for (int j = 0; j < bc; ++j) acc += p[r * keys + j] * v[j * Ev + d];
      o[x] = acc;
    }
  }
  __syncthreads();
  const int64_t size = itemsize_of(a.dtype);
  for (int64_t x = threadIdx.x; x < br * Ev; x += blockDim.x) {
    const int64_t r = x / Ev;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    store_as(a.out + ((bh * a.L + i0) * Ev + x) * size, a.dtype, o[x] * inv);
  }
  for (int r = threadIdx.x; r < br; r += blockDim.x)
    a.lse[bh * a.L + i0 + r] = l[r] > 0.0f ? m[r] + logf(l[r]) : INFINITY;
}

// D = rowsum(dO ∘ O), one thread per query row.
__global__ void attention_rowdot_kernel(AttentionArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  WEFT_GRID_LOOP(row, a.batch * a.heads_q * a.L) {
    float sum = 0.0f;
    for (int64_t d = 0; d < a.Ev; ++d) {
      const int64_t at = (row * a.Ev + d) * size;
      sum += load_as<float>(a.grad_out + at, a.dtype) * load_as<float>(a.out + at, a.dtype);
    }
    a.d[row] = sum;
  }
}

__global__ void attention_backward_kernel(AttentionArgs a, int rows, int keys) {
  extern __shared__ float shared[];
  const int64_t E = a.E, Ev = a.Ev;
  float* k = shared;
  float* v = k + keys * E;
  float* dk = v + keys * Ev;
  float* dv = dk + keys * E;
  float* q = dv + keys * Ev;
  float* dout = q + rows * E;
  float* p = dout + rows * Ev;
  float* ds = p + rows * keys;
  float* lse = ds + rows * keys;
  float* dsum = lse + rows;
  const int64_t tiles = (a.S + keys - 1) / keys;
  const int64_t bhk = blockIdx.x / tiles, j0 = blockIdx.x % tiles * keys;
  const int64_t n = bhk / a.heads_k, hk = bhk % a.heads_k, group = a.heads_q / a.heads_k;
  const int bc = static_cast<int>(lesser(keys, a.S - j0));

  load_tile(a.k, a.dtype, bhk * a.S + j0, bc, keys, E, 1.0f, k);
  load_tile(a.v, a.dtype, bhk * a.S + j0, bc, keys, Ev, 1.0f, v);
  for (int64_t x = threadIdx.x; x < keys * E; x += blockDim.x) dk[x] = 0.0f;
  for (int64_t x = threadIdx.x; x < keys * Ev; x += blockDim.x) dv[x] = 0.0f;
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const int64_t bh = n * a.heads_q + h;
    for (int64_t i0 = a.causal ? j0 / rows * rows : 0; i0 < a.L; i0 += rows) {
      const int br = static_cast<int>(lesser(rows, a.L - i0));
      __syncthreads();
      load_tile(a.q, a.dtype, bh * a.L + i0, br, rows, E, a.scale, q);
      load_tile(a.grad_out, a.dtype, bh * a.L + i0, br, rows, Ev, 1.0f, dout);
      for (int r = threadIdx.x; r < br; r += blockDim.x) {
        lse[r] = a.lse[bh * a.L + i0 + r];
        dsum[r] = a.d[bh * a.L + i0 + r];
      }
      __syncthreads();
      // P = exp(S − lse), dP = dO·Vᵀ; with dropout Z: dS = P∘(Z∘dP − D), and P keeps Z∘P for dV.
      for (int x = threadIdx.x; x < br * bc; x += blockDim.x) {
        const int r = x / bc, j = x % bc;
        float dot = 0.0f, dp = 0.0f;
        for (int64_t e = 0; e < E; ++e) dot += q[r * E + e] * k[j * E + e];
        for (int64_t d = 0; d < Ev; ++d) dp += dout[r * Ev + d] * v[j * Ev + d];
        const float prob = expf(masked_score(a, dot, bh, i0 + r, j0 + j) - lse[r]);
        const float z = dropout_multiplier(a, bh, i0 + r, j0 + j);
        ds[r * keys + j] = prob * (z * dp - dsum[r]);
        p[r * keys + j] = prob * z;
      }
      __syncthreads();
      for (int64_t x = threadIdx.x; x < bc * Ev; x += blockDim.x) {
        const int64_t j = x / Ev, d = x % Ev;
        float acc = 0.0f;
        for (int r = 0; r < br; ++r) acc += p[r * keys + j] * dout[r * Ev + d];
        dv[x] += acc;
      }
      for (int64_t x = threadIdx.x; x < bc * E; x += blockDim.x) {
        const int64_t j = x / E, e = x % E;
        float acc = 0.0f;
        for (int r = 0; r < br; ++r) acc += ds[r * keys + j] * q[r * E + e];
        dk[x] += acc;  // q holds scale·q, so this is scale·dSᵀQ
      }
      for (int64_t x = threadIdx.x; x < br * E; x += blockDim.x) {
        const int64_t r = x / E, e = x % E;
        float acc = 0.0f;
        for (int j = 0; j < bc; ++j) acc += ds[r * keys + j] * k[j * E + e];
        atomicAdd(a.grad_q + (bh * a.L + i0 + r) * E + e, acc * a.scale);
      }
    }
  }
  __syncthreads();
  const int64_t size = itemsize_of(a.dtype);
  for (int64_t x = threadIdx.x; x < bc * E; x += blockDim.x)
    store_as(a.grad_k + ((bhk * a.S + j0) * E + x) * size, a.dtype, dk[x]);
  for (int64_t x = threadIdx.x; x < bc * Ev; x += blockDim.x)
    store_as(a.grad_v + ((bhk * a.S + j0) * Ev + x) * size, a.dtype, dv[x]);
}

}  // namespace

void launch_attention_forward(const AttentionArgs& a, StreamHandle stream) {
  const AttentionPlan plan = attention_forward_plan(a.batch * a.heads_q, a.L, a.E, a.Ev);
  if (plan.blocks == 0) return;
  attention_forward_kernel<<<static_cast<unsigned>(plan.blocks), plan.threads, plan.shared_bytes, stream>>>(
      a, plan.rows, plan.keys);
  check_launch("scaled_dot_product_attention");
}

void launch_attention_backward(const AttentionArgs& a, StreamHandle stream) {
  const int64_t rows = a.batch * a.heads_q * a.L;
  if (rows > 0) {
    attention_rowdot_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(a);
    check_launch("scaled_dot_product_attention backward");
  }
  const AttentionPlan plan = attention_backward_plan(a.batch * a.heads_k, a.S, a.E, a.Ev);
  if (plan.blocks == 0) return;
  attention_backward_kernel<<<static_cast<unsigned>(plan.blocks), plan.threads, plan.shared_bytes, stream>>>(
      a, plan.rows, plan.keys);
  check_launch("scaled_dot_product_attention backward");
}

}  // namespace weft::cuda::detail
