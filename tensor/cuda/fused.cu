// CUDA kernels of the tensor floor's fused features (tensor/fused_kernels.h): cross-entropy,
// layer norm and dropout, each the CPU kernel's formula (tensor/cpu/fused.cpp) in the same compute
// type with sums in double; a block per row where the CPU walks a row. Dropout draws its mask from
// the shared Philox (tensor/philox.h), so CPU and GPU masks are the same bits.
#include <cuda_runtime.h>

#include "tensor/cuda/block_reduce.cuh"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/fused_launch.h"
#include "tensor/cuda/runtime.h"
#include "tensor/philox.h"

namespace weft::cuda::detail {
namespace {

// C: compute type; the statistics (lse, mean, rstd) are stored as C.
template <class C>
__global__ void cross_entropy_forward_kernel(CrossEntropyArgs a) {
  __shared__ double scratch[kRowThreads];
  const int64_t size = itemsize_of(a.dtype);
  const C smooth = static_cast<C>(a.label_smoothing / static_cast<double>(a.classes));
  const C hit = static_cast<C>(1.0 - a.label_smoothing);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const char* row = a.logits + r * a.classes * size;
    double m = -INFINITY;
    for (int64_t c = threadIdx.x; c < a.classes; c += kRowThreads) m = fmax(m, static_cast<double>(load_as<C>(row + c * size, a.dtype)));
    C row_max = static_cast<C>(block_max(m, scratch));
    if (isinf(row_max) && row_max < 0) row_max = 0;
    double total = 0, row_sum = 0;
    for (int64_t c = threadIdx.x; c < a.classes; c += kRowThreads) {
      const C v = load_as<C>(row + c * size, a.dtype);
      total += exp(v - row_max);
      row_sum += v;
    }
    total = block_sum(total, scratch);
    row_sum = block_sum(row_sum, scratch);
    if (threadIdx.x == 0) {
      const C lse = row_max + static_cast<C>(::log(total));
      reinterpret_cast<C*>(a.lse)[r] = lse;
      const int64_t t = a.target[r];
      C loss = 0;
      if (t != a.ignore_index) {
        if (t < 0 || t >= a.classes) {
          if (atomicCAS(&a.error->code, 0, static_cast<int32_t>(DeviceErrorCode::CrossEntropyTarget)) == 0) {
            a.error->value = t;
            a.error->bound = a.classes;
          }
        } else {
          loss = lse - hit * load_as<C>(row + t * size, a.dtype) - (smooth != C(0) ? smooth * static_cast<C>(row_sum) : C(0));
        }
      }
      store_as(a.losses + r * size, a.dtype, loss);
    }
  }
}

template <class C>
__global__ void cross_entropy_backward_kernel(CrossEntropyArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  const C smooth = static_cast<C>(a.label_smoothing / static_cast<double>(a.classes));
  const C hit = static_cast<C>(1.0 - a.label_smoothing);
  WEFT_GRID_LOOP(e, a.rows * a.classes) {
    const int64_t r = e / a.classes, c = e % a.classes;
    const int64_t t = a.target[r];
    C out = 0;
    if (t != a.ignore_index) {
      const C grad = load_as<C>(a.grad_losses + r * size, a.dtype);
      const C l = reinterpret_cast<const C*>(a.lse)[r];
      out = grad * (exp(load_as<C>(a.logits + e * size, a.dtype) - l) - smooth - (c == t ? hit : C(0)));
    }
    store_as(a.grad_logits + e * size, a.dtype, out);
  }
}

template <class C>
__global__ void layer_norm_forward_kernel(LayerNormArgs a) {
  __shared__ double scratch[kRowThreads];
  const int64_t size = itemsize_of(a.dtype);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const char* row = a.x + r * a.cols * size;
    double sum = 0;
    for (int64_t c = threadIdx.x; c < a.cols; c += kRowThreads) sum += load_as<C>(row + c * size, a.dtype);
    const C mean = static_cast<C>(block_sum(sum, scratch) / static_cast<double>(a.cols));
    double squares = 0;
    for (int64_t c = threadIdx.x; c < a.cols; c += kRowThreads) {
      const double d = static_cast<double>(load_as<C>(row + c * size, a.dtype) - mean);
      squares += d * d;
    }
    const C var = static_cast<C>(block_sum(squares, scratch) / static_cast<double>(a.cols));
    const C rstd = C(1) / sqrt(var + static_cast<C>(a.eps));
    for (int64_t c = threadIdx.x; c < a.cols; c += kRowThreads) {
      C v = (load_as<C>(row + c * size, a.dtype) - mean) * rstd;
      if (a.weight) v = v * load_as<C>(a.weight + c * size, a.dtype);
      if (a.bias) v = v + load_as<C>(a.bias + c * size, a.dtype);
      store_as(a.y + (r * a.cols + c) * size, a.dtype, v);
    }
    if (threadIdx.x == 0) {
      reinterpret_cast<C*>(a.mean)[r] = mean;
      reinterpret_cast<C*>(a.rstd)[r] = rstd;
    }
  }
}

template <class C>
__global__ void layer_norm_grad_x_kernel(LayerNormArgs a) {
  __shared__ double scratch[kRowThreads];
  const int64_t size = itemsize_of(a.dtype);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const char* xr = a.x + r * a.cols * size;
    const char* dyr = a.grad_y + r * a.cols * size;
    const C mu = reinterpret_cast<const C*>(a.mean)[r], inv = reinterpret_cast<const C*>(a.rstd)[r];
    auto g_at = [&](int64_t c) {
      const C dy = load_as<C>(dyr + c * size, a.dtype);
      return a.weight ? dy * load_as<C>(a.weight + c * size, a.dtype) : dy;
    };
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = threadIdx.x; c < a.cols; c += kRowThreads) {
      const C g = g_at(c);
      sum_g += g;
      sum_gx += static_cast<double>(g) * static_cast<double>((load_as<C>(xr + c * size, a.dtype) - mu) * inv);
    }
    const C mean_g = static_cast<C>(block_sum(sum_g, scratch) / static_cast<double>(a.cols));
    const C mean_gx = static_cast<C>(block_sum(sum_gx, scratch) / static_cast<double>(a.cols));
    for (int64_t c = threadIdx.x; c < a.cols; c += kRowThreads) {
      const C x = load_as<C>(xr + c * size, a.dtype);
      store_as(a.grad_x + (r * a.cols + c) * size, a.dtype, inv * (g_at(c) - mean_g - (x - mu) * inv * mean_gx));
    }
  }
}

// One thread per column, down the rows, as the CPU's column sums.
template <class C>
__global__ void layer_norm_grad_params_kernel(LayerNormArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  WEFT_GRID_LOOP(c, a.cols) {
    double dw = 0, db = 0;
    for (int64_t r = 0; r < a.rows; ++r) {
      const C mu = reinterpret_cast<const C*>(a.mean)[r], inv = reinterpret_cast<const C*>(a.rstd)[r];
      const C dy = load_as<C>(a.grad_y + (r * a.cols + c) * size, a.dtype);
      dw += static_cast<double>(dy * ((load_as<C>(a.x + (r * a.cols + c) * size, a.dtype) - mu) * inv));
      db += static_cast<double>(dy);
    }
    if (a.grad_weight) store_as(a.grad_weight + c * size, a.dtype, static_cast<C>(dw));
    if (a.grad_bias) store_as(a.grad_bias + c * size, a.dtype, static_cast<C>(db));
  }
}

template <class C>
__global__ void dropout_kernel(const char* x, char* out, DType dtype, int64_t n, float keep, C scale, uint64_t key) {
  const int64_t size = itemsize_of(dtype);
  WEFT_GRID_LOOP(i, n) {
    const bool kept = weft::detail::philox_uniform_at(key, static_cast<uint64_t>(i)) < keep;
    store_as(out + i * size, dtype, kept ? load_as<C>(x + i * size, dtype) * scale : C(0));
  }
}

}  // namespace

void launch_cross_entropy_forward(const CrossEntropyArgs& a, StreamHandle stream) {
  if (a.rows == 0) return;
  if (a.dtype == kFloat64) cross_entropy_forward_kernel<double><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
  else cross_entropy_forward_kernel<float><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
  check_launch("cross_entropy");
}

void launch_cross_entropy_backward(const CrossEntropyArgs& a, StreamHandle stream) {
  const int64_t n = a.rows * a.classes;
  if (n == 0) return;
  if (a.dtype == kFloat64) cross_entropy_backward_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(a);
  else cross_entropy_backward_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(a);
  check_launch("cross_entropy backward");
}

void launch_layer_norm_forward(const LayerNormArgs& a, StreamHandle stream) {
  if (a.rows == 0) return;
  if (a.dtype == kFloat64) layer_norm_forward_kernel<double><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
  else layer_norm_forward_kernel<float><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
  check_launch("layer_norm");
}

void launch_layer_norm_backward(const LayerNormArgs& a, StreamHandle stream) {
  if (a.grad_x && a.rows > 0) {
    if (a.dtype == kFloat64) layer_norm_grad_x_kernel<double><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
    else layer_norm_grad_x_kernel<float><<<row_blocks(a.rows), kRowThreads, 0, stream>>>(a);
    check_launch("layer_norm backward");
  }
  if ((a.grad_weight || a.grad_bias) && a.cols > 0) {
    if (a.dtype == kFloat64) layer_norm_grad_params_kernel<double><<<blocks_for(a.cols), kThreads, 0, stream>>>(a);
    else layer_norm_grad_params_kernel<float><<<blocks_for(a.cols), kThreads, 0, stream>>>(a);
    check_launch("layer_norm backward");
  }
}

void launch_dropout(const void* x, void* out, DType dtype, int64_t n, double keep_probability, uint64_t key,
                    StreamHandle stream) {
  if (n == 0) return;
  const auto* xp = static_cast<const char*>(x);
  auto* o = static_cast<char*>(out);
  const float keep = static_cast<float>(keep_probability);
  if (dtype == kFloat64)
    dropout_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(xp, o, dtype, n, keep, 1.0 / keep_probability, key);
  else
    dropout_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(xp, o, dtype, n, keep,
                                                                    1.0f / static_cast<float>(keep_probability), key);
  check_launch("dropout");
}

}  // namespace weft::cuda::detail
