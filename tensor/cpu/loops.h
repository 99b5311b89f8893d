// Strided iteration and dtype dispatch for CPU kernels.
//
// for_each_strided walks N operands of one shape (strides in bytes, 0 for broadcast dims) and
// hands the innermost run of elements to a callback (N = 1 to 4), after merging dimensions that
// are laid out back to back so that contiguous tensors become one long run the compiler can
// vectorise. Large iterations are split across the pool's threads on the outer index. Its tensor form takes the
// common case — every operand contiguous or a broadcast scalar — without allocating anything,
// which is most of the cost of an op on a tiny tensor.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace weft::detail {

// Below this many elements a kernel runs on one thread: the fork costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// fn(first, count) over n contiguous elements in blocks of whole 16-lane vectors, a few blocks per
// thread so that a preempted thread's share moves to another; one block, on the calling thread,
// below 2·kParallelGrain. For the fused activation kernels (tensor/cpu/gelu/, tensor/cpu/silu/).
template <class Fn>
void for_each_vector_block(int64_t n, Fn&& fn) {
  const int64_t blocks = n >= 2 * kParallelGrain ? 4 * static_cast<int64_t>(num_threads()) : 1;
  const int64_t block = ((n + blocks - 1) / blocks + 15) / 16 * 16;
  parallel_for_if(blocks > 1, blocks, [&](int64_t b) {
    const int64_t first = b * block;
    if (first < n) fn(first, std::min(block, n - first));
  });
}

template <size_t N>
struct StridedRun {
  std::array<char*, N> ptr;
  std::array<int64_t, N> stride;  // bytes between consecutive elements of the run
  int64_t n;
};

// What for_each_strided hands each run to: a plain function and its context. The walk itself is
// compiled once per operand count (tensor/cpu/loops.cpp), not once per kernel and dtype: it is
// called once per run, never per element, so the indirect call costs nothing measurable, while
// its copies (one per op and dtype) were most of the elementwise and copy kernels' 2.8 MB of code.
template <size_t N>
using RunFn = void (*)(void* ctx, const StridedRun<N>& run);

template <size_t N>
void for_each_strided_impl(Shape shape, std::array<char*, N> base, std::array<Shape, N> strides, RunFn<N> fn,
                           void* ctx);
template <size_t N>
void for_each_strided_impl(const std::array<const Tensor*, N>& operands, RunFn<N> fn, void* ctx);

// Walks N operands of one shape (strides in bytes, 0 for broadcast dims), calling fn(run) for
// each innermost run.
template <size_t N, class Fn>
void for_each_strided(Shape shape, std::array<char*, N> base, std::array<Shape, N> strides, Fn fn) {
  for_each_strided_impl<N>(
      std::move(shape), base, std::move(strides),
      [](void* ctx, const StridedRun<N>& run) { (*static_cast<Fn*>(ctx))(run); }, &fn);
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
  for_each_strided_impl<N>(
      operands, [](void* ctx, const StridedRun<N>& run) { (*static_cast<Fn*>(ctx))(run); }, &fn);
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
