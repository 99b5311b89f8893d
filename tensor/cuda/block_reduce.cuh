// Block-wide reductions shared by the row kernels (tensor/cuda/reduce.cu, tensor/cuda/fused.cu):
// one block of kRowThreads threads per row, each thread folding a strided slice of it, then a
// tree in shared memory. The tree's order is fixed by the block size, so a row's result repeats
// from run to run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace weft::cuda::detail {

inline constexpr int kRowThreads = 256;

// Blocks for a grid-stride loop over `rows` (at least one, at most the grid's y-free limit).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 ? 65535 : rows);
}

// Sums `value` over the block; every thread gets the total. `scratch` holds kRowThreads values.
template <class T>
__device__ T block_sum(T value, T* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const T total = scratch[0];
  __syncthreads();  // scratch is reused by the caller's next reduction
  return total;
}

// The largest `value` of the block by fmax (which passes over NaN); every thread gets it.
__device__ inline double block_max(double value, double* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] = fmax(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    __syncthreads();
  }
  const double largest = scratch[0];
  __syncthreads();
  return largest;
}

}  // namespace weft::cuda::detail
