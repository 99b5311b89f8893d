// Row kernels on CUDA: sum / max / min / argmax / argmin of each row, column sums, softmax and
// log_softmax with their backward. One block per row (grid-stride over rows), each thread
// accumulating a strided slice, then a tree in shared memory: the order of the additions is fixed
// by the shape, so results repeat run to run. Sums accumulate as the CPU's do (double for floating
// rows, int64 for integer and bool rows); max/min propagate NaN and keep the first index on ties.
#include <cuda_runtime.h>

#include "tensor/cuda/block_reduce.cuh"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"

namespace weft::cuda::detail {
namespace {

// The better of two (value, index) candidates: NaN first, then the larger (smaller), then the
// lower index.
template <class C>
__device__ bool better(C v, int64_t i, C w, int64_t j, bool want_max) {
  const bool v_nan = v != v, w_nan = w != w;
  if (v_nan || w_nan) return v_nan && (!w_nan || i < j);
  if (v == w) return i < j;
  return want_max ? v > w : v < w;
}

template <class Acc>
__global__ void sum_rows_kernel(const char* x, DType x_dtype, char* out, DType out_dtype, int64_t rows, int64_t n) {
  __shared__ Acc scratch[kRowThreads];
  const int64_t size = itemsize_of(x_dtype);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    Acc acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) acc += load_as<Acc>(x + (r * n + i) * size, x_dtype);
    const Acc total = block_sum(acc, scratch);
    if (threadIdx.x == 0) store_as(out + r * itemsize_of(out_dtype), out_dtype, total);
  }
}

template <class C>
__global__ void extreme_rows_kernel(const char* x, DType dtype, char* out, int64_t rows, int64_t n, bool want_max,
                                    bool want_index) {
  __shared__ C values[kRowThreads];
  __shared__ int64_t indices[kRowThreads];
  const int64_t size = itemsize_of(dtype);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const char* row = x + r * n * size;
    C best = C{};
    int64_t best_index = -1;
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
      const C v = load_as<C>(row + i * size, dtype);
      if (best_index < 0 || better(v, i, best, best_index, want_max)) {
        best = v;
        best_index = i;
      }
    }
    values[threadIdx.x] = best;
    indices[threadIdx.x] = best_index;
    __syncthreads();
    for (int half = kRowThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        const int other = threadIdx.x + half;
        if (indices[other] >= 0 &&
            (indices[threadIdx.x] < 0 ||
             better(values[other], indices[other], values[threadIdx.x], indices[threadIdx.x], want_max))) {
          values[threadIdx.x] = values[other];
          indices[threadIdx.x] = indices[other];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (want_index) {
        reinterpret_cast<int64_t*>(out)[r] = indices[0];
      } else {
        const char* from = row + indices[0] * size;
        for (int64_t byte = 0; byte < size; ++byte) out[r * size + byte] = from[byte];
      }
    }
    __syncthreads();
  }
}

// One thread per column, walking down the rows.
template <class Acc>
__global__ void sum_columns_kernel(const char* x, DType x_dtype, char* out, DType out_dtype, int64_t n, int64_t cols) {
  const int64_t size = itemsize_of(x_dtype);
  WEFT_GRID_LOOP(c, cols) {
    Acc acc = 0;
    for (int64_t r = 0; r < n; ++r) acc += load_as<Acc>(x + (r * cols + c) * size, x_dtype);
    store_as(out + c * itemsize_of(out_dtype), out_dtype, acc);
  }
}

// As the CPU kernel: the row's max (0 for an all -inf row), Σ exp(x − max) in double, then
// exp(x − max)/Σ or x − (max + log Σ), in the compute type T.
template <class T>
__global__ void softmax_kernel(const char* x, char* out, DType dtype, int64_t rows, int64_t n, bool log) {
  __shared__ double scratch[kRowThreads];
  const int64_t size = itemsize_of(dtype);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const char* row = x + r * n * size;
    char* o = out + r * n * size;
    double m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) m = fmax(m, static_cast<double>(load_as<T>(row + i * size, dtype)));
    T row_max = static_cast<T>(block_max(m, scratch));
    if (isinf(row_max) && row_max < 0) row_max = 0;
    double part = 0;
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) part += exp(load_as<T>(row + i * size, dtype) - row_max);
    const double total = block_sum(part, scratch);
    const T lse = row_max + static_cast<T>(::log(total));
    const T inv = static_cast<T>(1.0 / total);
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
      const T v = load_as<T>(row + i * size, dtype);
      store_as(o + i * size, dtype, log ? v - lse : exp(v - row_max) * inv);
    }
  }
}

// grad_in = y·(g − Σ g·y) for softmax, g − exp(y)·Σ g for log_softmax.
template <class T>
__global__ void softmax_backward_kernel(const char* grad, const char* y, char* grad_in, DType dtype, int64_t rows,
                                        int64_t n, bool log) {
  __shared__ double scratch[kRowThreads];
  const int64_t size = itemsize_of(dtype);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * n * size;
    double part = 0;
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
      const T g = load_as<T>(grad + base + i * size, dtype);
      part += log ? g : g * load_as<T>(y + base + i * size, dtype);
    }
    const T total = static_cast<T>(block_sum(part, scratch));
    for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
      const T g = load_as<T>(grad + base + i * size, dtype);
      const T v = load_as<T>(y + base + i * size, dtype);
      store_as(grad_in + base + i * size, dtype, log ? g - exp(v) * total : v * (g - total));
    }
  }
}

}  // namespace

void launch_reduce(ReduceOp op, const void* x, DType x_dtype, void* out, DType out_dtype, int64_t rows, int64_t n,
                   StreamHandle stream) {
  if (rows == 0) return;
  const auto* xp = static_cast<const char*>(x);
  auto* op_out = static_cast<char*>(out);
  if (op == ReduceOp::Sum) {
    if (is_floating(x_dtype)) sum_rows_kernel<double><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, x_dtype, op_out, out_dtype, rows, n);
    else sum_rows_kernel<int64_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, x_dtype, op_out, out_dtype, rows, n);
  } else {
    const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
    const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
    if (x_dtype == kFloat64)
      extreme_rows_kernel<double><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, x_dtype, op_out, rows, n, want_max, want_index);
    else if (is_floating(x_dtype))
      extreme_rows_kernel<float><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, x_dtype, op_out, rows, n, want_max, want_index);
    else
      extreme_rows_kernel<int64_t><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, x_dtype, op_out, rows, n, want_max, want_index);
  }
  check_launch("reduce");
}

void launch_sum_columns(const void* x, DType x_dtype, void* out, DType out_dtype, int64_t n, int64_t cols,
                        StreamHandle stream) {
  if (cols == 0) return;
  const auto* xp = static_cast<const char*>(x);
  auto* o = static_cast<char*>(out);
  if (is_floating(x_dtype)) sum_columns_kernel<double><<<blocks_for(cols), kThreads, 0, stream>>>(xp, x_dtype, o, out_dtype, n, cols);
  else sum_columns_kernel<int64_t><<<blocks_for(cols), kThreads, 0, stream>>>(xp, x_dtype, o, out_dtype, n, cols);
  check_launch("sum_columns");
}

void launch_softmax(const void* x, void* out, DType dtype, int64_t rows, int64_t n, bool log, StreamHandle stream) {
  if (rows == 0 || n == 0) return;
  const auto* xp = static_cast<const char*>(x);
  auto* o = static_cast<char*>(out);
  if (dtype == kFloat64) softmax_kernel<double><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, o, dtype, rows, n, log);
  else softmax_kernel<float><<<row_blocks(rows), kRowThreads, 0, stream>>>(xp, o, dtype, rows, n, log);
  check_launch("softmax");
}

void launch_softmax_backward(const void* grad, const void* y, void* grad_in, DType dtype, int64_t rows, int64_t n,
                             bool log, StreamHandle stream) {
  if (rows == 0 || n == 0) return;
  const auto* g = static_cast<const char*>(grad);
  const auto* yp = static_cast<const char*>(y);
  auto* gi = static_cast<char*>(grad_in);
  if (dtype == kFloat64)
    softmax_backward_kernel<double><<<row_blocks(rows), kRowThreads, 0, stream>>>(g, yp, gi, dtype, rows, n, log);
  else
    softmax_backward_kernel<float><<<row_blocks(rows), kRowThreads, 0, stream>>>(g, yp, gi, dtype, rows, n, log);
  check_launch("softmax_backward");
}

}  // namespace weft::cuda::detail
