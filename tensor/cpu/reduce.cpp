// CPU row reductions and the fused softmax kernels. The front-end has already moved the reduced
// dims last and made the input contiguous, so every kernel here sees rows of length n.
// Floating sums accumulate in double (float32 rows of a million elements stay accurate);
// integer and bool sums accumulate in int64.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

template <class T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T, class Out>
void sum_rows(const T* x, Out* out, int64_t rows, int64_t n) {
  if (rows == 1 && n >= 2 * kParallelGrain) {
    // One long row: partial sums per thread, combined in a fixed order (deterministic).
    const int64_t chunks = num_threads();
    std::vector<Accumulator<T>> partial(static_cast<size_t>(chunks), 0);
    parallel_for(chunks, [&](int64_t c) {
      Accumulator<T> acc = 0;
      for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; ++i) acc += x[i];
      partial[static_cast<size_t>(c)] = acc;
    });
    Accumulator<T> total = 0;
    for (auto p : partial) total += p;
    out[0] = static_cast<Out>(total);
    return;
  }
  parallel_for(rows * n >= kParallelGrain ? rows : 1, [&](int64_t job) {
    const bool all = rows * n < kParallelGrain;
    for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) {
      Accumulator<T> acc = 0;
      const T* row = x + r * n;
      for (int64_t i = 0; i < n; ++i) acc += row[i];
      out[r] = static_cast<Out>(acc);
    }
  });
}

// Column sums walk x row by row (contiguous, vectorisable) into one accumulator per column;
// threads take disjoint column ranges, so the result does not depend on the thread count.
template <class T, class Out>
void sum_columns_of(const T* x, Out* out, int64_t n, int64_t cols) {
  const int64_t chunks = n * cols >= kParallelGrain ? std::min<int64_t>(num_threads(), (cols + 7) / 8) : 1;
  parallel_for(chunks, [&](int64_t c) {
    const int64_t begin = cols * c / chunks, end = cols * (c + 1) / chunks;
    std::vector<Accumulator<T>> acc(static_cast<size_t>(end - begin), 0);
    for (int64_t r = 0; r < n; ++r) {
      const T* row = x + r * cols + begin;
      for (int64_t j = 0; j < end - begin; ++j) acc[static_cast<size_t>(j)] += row[j];
    }
    for (int64_t j = begin; j < end; ++j) out[j] = static_cast<Out>(acc[static_cast<size_t>(j - begin)]);
  });
}

// Max/min propagate NaN, as PyTorch; ties keep the first index.
template <class T>
void extreme_rows(ReduceOp op, const T* x, void* out, int64_t rows, int64_t n) {
  const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
  const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  parallel_for(rows * n >= kParallelGrain ? rows : 1, [&](int64_t job) {
    const bool all = rows * n < kParallelGrain;
    for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) {
      const T* row = x + r * n;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i) {
        const T v = row[i], b = row[best];
        if constexpr (std::is_floating_point_v<T>) {
          if (b != b) break;
          if (v != v) { best = i; break; }
        }
        if (want_max ? v > b : v < b) best = i;
      }
      if (want_index) static_cast<int64_t*>(out)[r] = best;
      else static_cast<T*>(out)[r] = row[best];
    }
  });
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& x_in, const Tensor& out_in) {
  const Tensor x = widen_if_narrow(x_in);
  const Tensor out = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin ? out_in : compute_target(out_in);
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = out.numel();
  WEFT_CHECK(n > 0 || op == ReduceOp::Sum, "[reduce] cannot take max/min/argmax of an empty dimension");
  if (op == ReduceOp::Sum) {
    WEFT_DISPATCH_COMPUTE(x.dtype(), T, {
      if (out.dtype() == DType::Int64) sum_rows<T, int64_t>(x.data<T>(), out.data<int64_t>(), rows, n);
      else if (out.dtype() == DType::Float64) sum_rows<T, double>(x.data<T>(), out.data<double>(), rows, n);
      else if (out.dtype() == DType::Float32) sum_rows<T, float>(x.data<T>(), out.data<float>(), rows, n);
      else WEFT_FAIL("[sum] internal: unsupported accumulator dtype ", out.dtype());
    });
  } else {
    WEFT_DISPATCH_COMPUTE(x.dtype(), T, { extreme_rows<T>(op, x.data<T>(), out.data_ptr(), rows, n); });
  }
  store_from(out, out_in);
}

void CpuBackend::sum_columns(const Tensor& x_in, const Tensor& out_in) {
  const Tensor x = widen_if_narrow(x_in);
  const Tensor out = compute_target(out_in);
  const int64_t n = x.size(0), cols = x.size(1);
  WEFT_DISPATCH_COMPUTE(x.dtype(), T, {
    if (out.dtype() == DType::Int64) sum_columns_of<T, int64_t>(x.data<T>(), out.data<int64_t>(), n, cols);
    else if (out.dtype() == DType::Float64) sum_columns_of<T, double>(x.data<T>(), out.data<double>(), n, cols);
    else if (out.dtype() == DType::Float32) sum_columns_of<T, float>(x.data<T>(), out.data<float>(), n, cols);
    else WEFT_FAIL("[sum] internal: unsupported accumulator dtype ", out.dtype());
  });
  store_from(out, out_in);
}

void CpuBackend::softmax(const Tensor& x_in, const Tensor& out_in, bool log) {
  const Tensor x = widen_if_narrow(x_in);
  const Tensor out = compute_target(out_in);
  const int64_t n = x.size(-1), rows = x.numel() / std::max<int64_t>(n, 1);
  WEFT_DISPATCH_FLOATING(x.dtype(), T, {
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    parallel_for(rows * n >= kParallelGrain ? rows : 1, [&](int64_t job) {
      const bool all = rows * n < kParallelGrain;
      for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) {
        const T* row = xp + r * n;
        T* o = op + r * n;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::max(m, row[i]);
        if (std::isinf(m) && m < 0) m = 0;  // an all -inf row gives nan, as PyTorch; avoid inf - inf
        double total = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T e = std::exp(row[i] - m);
          total += e;
          if (!log) o[i] = e;
        }
        if (log) {
          const T lse = m + static_cast<T>(std::log(total));
          for (int64_t i = 0; i < n; ++i) o[i] = row[i] - lse;
        } else {
          const T inv = static_cast<T>(1.0 / total);
          for (int64_t i = 0; i < n; ++i) o[i] *= inv;
        }
      }
    });
  });
  store_from(out, out_in);
}

void CpuBackend::softmax_backward(const Tensor& grad_in, const Tensor& y_in, const Tensor& gx_in, bool log) {
  const Tensor g = widen_if_narrow(grad_in);
  const Tensor y = widen_if_narrow(y_in);
  const Tensor gx = compute_target(gx_in);
  const int64_t n = y.size(-1), rows = y.numel() / std::max<int64_t>(n, 1);
  WEFT_DISPATCH_FLOATING(y.dtype(), T, {
    const T* gp = g.data<T>();
    const T* yp = y.data<T>();
    T* op = gx.data<T>();
    parallel_for(rows * n >= kParallelGrain ? rows : 1, [&](int64_t job) {
      const bool all = rows * n < kParallelGrain;
      for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) {
        const T* gr = gp + r * n;
        const T* yr = yp + r * n;
        T* o = op + r * n;
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += log ? gr[i] : gr[i] * yr[i];
        const T d = static_cast<T>(dot);
        for (int64_t i = 0; i < n; ++i) o[i] = log ? gr[i] - std::exp(yr[i]) * d : yr[i] * (gr[i] - d);
      }
    });
  });
  store_from(gx, gx_in);
}

}  // namespace weft::detail
