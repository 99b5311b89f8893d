// The FP8 scale updates on CUDA (precision/fp8/fp8_scaling_kernels.h), through the rules the CPU
// uses (precision/fp8/fp8_scaling_rules.h), so a GPU layer's scales have the CPU's bits.
//
// A DelayedScaling update is one block: the column's amax by a tree in shared memory (the
// maximum does not depend on the order, a NaN anywhere wins as on the CPU), then the roll of the
// history blockDim rows at a time, then the scale by one thread. A current scale is one thread.
#include <cuda_runtime.h>

#include "precision/cuda/fp8_launch.h"
#include "precision/fp8/fp8_scaling_rules.h"
#include "tensor/cuda/runtime.h"

namespace weft::precision::cuda_detail {
namespace {

using weft::cuda::detail::kThreads;

// The NaN-keeping maximum of `value` over the block; every thread gets it. blockDim.x == kThreads.
__device__ float block_nan_max(float value) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] = detail::fp8_nan_max(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  return partial[0];
}

__global__ void delayed_update_kernel(Fp8DelayedUpdateArgs a) {
  auto row = [&](int64_t r) -> float& { return a.column[r * a.stride]; };
  const float current = row(0);
  float amax = current;
  if (!a.most_recent)
    for (int64_t r = 1 + threadIdx.x; r < a.len; r += blockDim.x) amax = detail::fp8_nan_max(amax, row(r));
  // Its barriers also put every read above before the writes below.
  amax = block_nan_max(amax);
  // The roll, row r ← row r + 1 for 1 ≤ r < len − 1: each thread reads its next row before any
  // thread writes, a block of rows at a time (a block's last read is the next block's first write).
  for (int64_t base = 1; base + 1 < a.len; base += blockDim.x) {
    const int64_t r = base + threadIdx.x;
    const bool mine = r + 1 < a.len;
    const float next = mine ? row(r + 1) : 0.0f;
    __syncthreads();
    if (mine) row(r) = next;
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (a.len > 1) row(a.len - 1) = current;
  row(0) = 0.0f;
  const float scale = detail::fp8_delayed_scale(amax, *a.scale, a.fp8_max, a.margin);
  *a.scale = scale;
  *a.scale_inv = __fdiv_rn(1.0f, scale);
}

__global__ void current_scale_kernel(Fp8CurrentScaleArgs a) {
  const float scale = detail::fp8_current_scale(*a.amax, a.fp8_max, a.amax_epsilon, a.power_2_scale);
  *a.scale = scale;
  *a.scale_inv = __fdiv_rn(1.0f, scale);
}

}  // namespace

void launch_fp8_delayed_update(const Fp8DelayedUpdateArgs& a, StreamHandle stream) {
  delayed_update_kernel<<<1, kThreads, 0, stream>>>(a);
  weft::cuda::detail::check_launch("DelayedScaling");
}

void launch_fp8_current_scale(const Fp8CurrentScaleArgs& a, StreamHandle stream) {
  current_scale_kernel<<<1, 1, 0, stream>>>(a);
  weft::cuda::detail::check_launch("Float8CurrentScaling");
}

}  // namespace weft::precision::cuda_detail
