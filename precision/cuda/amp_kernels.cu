// GradScaler's unscale + inf/NaN check on CUDA (precision/amp_kernels.h): one pass per gradient
// that multiplies by inv_scale in the CPU kernel's compute type and raises a device flag when it
// meets a non-finite value (every writer stores the same 1, so the race is harmless).
#include <cuda_runtime.h>

#include "precision/cuda/amp_launch.h"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"

namespace weft::precision::cuda_detail {
namespace {

using weft::cuda::detail::blocks_for;
using weft::cuda::detail::itemsize_of;
using weft::cuda::detail::kThreads;
using weft::cuda::detail::load_as;
using weft::cuda::detail::store_as;

template <class C>
__global__ void unscale_kernel(char* grad, DType dtype, int64_t n, float inv_scale, int* found_inf) {
  const int64_t size = itemsize_of(dtype);
  const C inv = static_cast<C>(inv_scale);
  WEFT_GRID_LOOP(i, n) {
    const C v = load_as<C>(grad + i * size, dtype);
    if (!isfinite(v)) *found_inf = 1;
    if (inv_scale != 1.0f) store_as(grad + i * size, dtype, v * inv);
  }
}

}  // namespace

void launch_unscale(char* grad, DType dtype, int64_t n, float inv_scale, int* found_inf, StreamHandle stream) {
  if (n == 0) return;
  if (dtype == kFloat64) unscale_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(grad, dtype, n, inv_scale, found_inf);
  else unscale_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(grad, dtype, n, inv_scale, found_inf);
  weft::cuda::detail::check_launch("GradScaler");
}

}  // namespace weft::precision::cuda_detail
