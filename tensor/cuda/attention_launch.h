// The CUDA attention kernels' plain arguments and launch plan (tensor/cuda/attention.cu), shared
// by nvcc and g++: no Tensor, no CUDA header. The plan is computed here, on the host, so that a
// build without a GPU tests it (tests/tensor/test_attention.cpp).
//
// Forward: one block per (batch·head, tile of `rows` queries); the block keeps its queries, a
// tile of `keys` keys and values, the score tile and the output accumulator in shared memory and
// runs the online softmax over the key tiles (FlashAttention-2's loop, float32 throughout).
// Backward: one block per (batch·key/value head, tile of `keys` keys), accumulating that tile's
// dK and dV in shared memory over the query heads that share it and every query tile; dQ is
// summed across key tiles with float32 atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/cuda/launch.h"

namespace weft::cuda::detail {

// q: (N·Hq, L, E), k: (N·Hk, S, E), v: (N·Hk, S, Ev), out and grad_out: (N·Hq, L, Ev), all
// contiguous in `dtype`; mask: (N·Hq, L, S) contiguous in mask_dtype (bool keeps, floats add) or
// null; lse, d: (N·Hq, L) float32; grad_q: (N·Hq, L, E) float32, zeroed before the backward;
// grad_k, grad_v like k and v. Dropout as Note [Attention dropout stream]
// (tensor/attention_kernels.h), keep = 1 − p.
struct AttentionArgs {
  const char* q;
  const char* k;
  const char* v;
  const char* mask;
  char* out;
  float* lse;
  const char* grad_out;
  float* d;
  float* grad_q;
  char* grad_k;
  char* grad_v;
  DType dtype, mask_dtype;
  int64_t batch, heads_q, heads_k, L, S, E, Ev;
  float scale;
  bool causal;
  float keep;
  uint64_t key;
};

struct AttentionPlan {
  int rows, keys;          // queries and keys per block's tiles
  int threads;             // per block
  int64_t blocks;          // a 1-D grid: heads × tiles
  size_t shared_bytes;     // dynamic shared memory per block
};

// What a block may take without opting in to more (every architecture since 2.0 has 48 KiB).
inline constexpr size_t kAttentionSharedLimit = 48 * 1024;
inline constexpr int kAttentionThreads = 128;

// Shared floats of a forward block: Q (rows×E), K (keys×E), V (keys×Ev), scores (rows×keys),
// the output accumulator (rows×Ev), and m, l, alpha per row.
inline size_t attention_forward_shared(int rows, int keys, int64_t E, int64_t Ev) {
  return sizeof(float) * static_cast<size_t>(rows * E + keys * E + keys * Ev + int64_t{rows} * keys + rows * Ev +
                                             3 * int64_t{rows});
}

// Shared floats of a backward block: K, V, dK, dV (keys × (2E + 2Ev)), Q (rows×E), dO (rows×Ev),
// P and dS (2 × rows×keys), lse and D per row.
inline size_t attention_backward_shared(int rows, int keys, int64_t E, int64_t Ev) {
  return sizeof(float) * static_cast<size_t>(keys * (2 * E + 2 * Ev) + rows * E + rows * Ev +
                                             2 * int64_t{rows} * keys + 2 * int64_t{rows});
}

// Tiles of 64 × 64, halved (the larger first) until the block's shared memory fits the limit.
// shared_bytes above the limit means even 1 × 1 tiles do not fit (huge E): the caller refuses.
inline AttentionPlan attention_plan(bool backward, int64_t heads, int64_t tiled_length, int64_t E, int64_t Ev) {
  auto shared = [&](int rows, int keys) {
    return backward ? attention_backward_shared(rows, keys, E, Ev) : attention_forward_shared(rows, keys, E, Ev);
  };
  int rows = 64, keys = 64;
  while (shared(rows, keys) > kAttentionSharedLimit && (rows > 1 || keys > 1)) {
    if (rows >= keys) rows /= 2;
    else keys /= 2;
  }
  const int tile = backward ? keys : rows;
  const int64_t tiles = (tiled_length + tile - 1) / tile;
  return {rows, keys, kAttentionThreads, heads * tiles, shared(rows, keys)};
}

// The plans for q: (N·Hq, L, E) and k, v: (N·Hk, S, E / Ev).
inline AttentionPlan attention_forward_plan(int64_t heads_q, int64_t L, int64_t E, int64_t Ev) {
  return attention_plan(false, heads_q, L, E, Ev);
}
inline AttentionPlan attention_backward_plan(int64_t heads_k, int64_t S, int64_t E, int64_t Ev) {
  return attention_plan(true, heads_k, S, E, Ev);
}

void launch_attention_forward(const AttentionArgs& a, StreamHandle stream);
void launch_attention_backward(const AttentionArgs& a, StreamHandle stream);

}  // namespace weft::cuda::detail
