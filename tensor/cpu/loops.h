// Strided iteration and dtype dispatch for CPU kernels.
//
// for_each_strided walks N operands of one shape (strides in bytes, 0 for broadcast dims) and
// hands the innermost run of elements to a callback, after merging dimensions that are laid out
// back to back so that contiguous tensors become one long run the compiler can vectorise. Large
// iterations are split across OpenMP threads on the outer index. Its tensor form takes the
// common case — every operand contiguous or a broadcast scalar — without allocating anything,
// which is most of the cost of an op on a tiny tensor.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace weft::detail {

// Below this many elements a kernel runs on one thread: the fork costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

template <size_t N>
struct StridedRun {
  std::array<char*, N> ptr;
  std::array<int64_t, N> stride;  // bytes between consecutive elements of the run
  int64_t n;
};

// One run of n elements, split into chunks for the threads when it is long.
template <size_t N, class Fn>
void for_each_run(int64_t n, const std::array<char*, N>& base, const std::array<int64_t, N>& stride, Fn& fn) {
  const int64_t chunks = n >= 2 * kParallelGrain ? num_threads() : 1;
  parallel_for(chunks, [&](int64_t c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    StridedRun<N> run;
    for (size_t k = 0; k < N; ++k) {
      run.ptr[k] = base[k] + begin * stride[k];
      run.stride[k] = stride[k];
    }
    run.n = end - begin;
    fn(run);
  });
}

template <size_t N, class Fn>
void for_each_strided(Shape shape, std::array<char*, N> base, std::array<Shape, N> strides, Fn fn) {
  // Drop size-1 dims, then merge dim d into d+1 when every operand is contiguous across them.
  Shape sizes;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) return;
    sizes.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  for (size_t d = sizes.size() - 1; d > 0; --d) {
    bool mergeable = true;
    for (size_t k = 0; k < N; ++k) mergeable &= st[k][d - 1] == st[k][d] * sizes[d];
    if (!mergeable) continue;
    sizes[d - 1] *= sizes[d];
    for (size_t k = 0; k < N; ++k) st[k][d - 1] = st[k][d];
    sizes.erase(sizes.begin() + static_cast<int64_t>(d));
    for (size_t k = 0; k < N; ++k) st[k].erase(st[k].begin() + static_cast<int64_t>(d));
  }

  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t inner = sizes.back();
  int64_t outer = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) outer *= sizes[d];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = st[k].back();

  if (outer == 1) {
    for_each_run(inner, base, inner_stride, fn);
    return;
  }
  const bool parallel = outer * inner >= kParallelGrain;
  parallel_for(parallel ? outer : 1, [&](int64_t job) {
    const int64_t first = parallel ? job : 0, last = parallel ? job + 1 : outer;
    for (int64_t o = first; o < last; ++o) {
      StridedRun<N> run;
      run.ptr = base;
      int64_t rest = o;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        const int64_t i = rest % sizes[d];
        rest /= sizes[d];
        for (size_t k = 0; k < N; ++k) run.ptr[k] += i * st[k][d];
      }
      run.stride = inner_stride;
      run.n = inner;
      fn(run);
    }
  });
}

// Byte strides and the first-element pointer of a tensor, for for_each_strided.
inline Shape byte_strides(const Tensor& t) {
  Shape s = t.strides();
  for (auto& x : s) x *= static_cast<int64_t>(itemsize(t.dtype()));
  return s;
}
inline char* byte_ptr(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

// for_each_strided over tensors of one shape (operand 0's).
template <size_t N, class Fn>
void for_each_strided(const std::array<const Tensor*, N>& operands, Fn fn) {
  const int64_t n = operands[0]->numel();
  if (n == 0) return;
  std::array<char*, N> base;
  std::array<int64_t, N> stride;
  bool flat = true;
  for (size_t k = 0; k < N && flat; ++k) {
    const Tensor& t = *operands[k];
    base[k] = byte_ptr(t);
    if (t.is_contiguous()) {
      stride[k] = static_cast<int64_t>(itemsize(t.dtype()));
    } else {
      // A broadcast scalar: stride 0 along every dim that has more than one element.
      const auto& sizes = t.shape();
      const auto& st = t.strides();
      for (size_t d = 0; d < sizes.size(); ++d) flat &= sizes[d] == 1 || st[d] == 0;
      stride[k] = 0;
    }
  }
  if (flat) {
    for_each_run(n, base, stride, fn);
    return;
  }
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) {
    base[k] = byte_ptr(*operands[k]);
    strides[k] = byte_strides(*operands[k]);
  }
  for_each_strided<N>(operands[0]->shape(), base, std::move(strides), fn);
}

// Runs `body` with `T` bound to the C++ type that computes dtype `d`. Narrow floats are not
// computed directly (the CPU backend widens them first), so they are an error here.
#define WEFT_DISPATCH_COMPUTE(d, T, ...)                                                        \
  ::weft::visit_dtype((d), [&](auto weft_dtype_tag_) {                                          \
    using T = decltype(weft_dtype_tag_);                                                        \
    if constexpr (::weft::kIsNarrowFloat<T>)                                                    \
      WEFT_FAIL("[cpu] internal: narrow dtype ", (d), " reached a compute kernel");              \
    else {                                                                                      \
      __VA_ARGS__;                                                                              \
    }                                                                                           \
  })

// Runs `body` with `T` bound to double or float; other dtypes are an error.
#define WEFT_DISPATCH_FLOATING(d, T, ...)                                                       \
  ::weft::visit_dtype((d), [&](auto weft_dtype_tag_) {                                          \
    using T = decltype(weft_dtype_tag_);                                                        \
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {                      \
      __VA_ARGS__;                                                                              \
    } else {                                                                                    \
      WEFT_FAIL("[cpu] internal: expected float32 or float64, got ", (d));                       \
    }                                                                                           \
  })

}  // namespace weft::detail
