// The strided walk of tensor/cpu/loops.h, compiled once per operand count N (1 to 4): it merges
// dims, splits the work over the threads and hands each innermost run to the kernel's callback.
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

// One run of n elements, split into chunks for the threads when it is long.
template <size_t N>
void for_each_run(int64_t n, const std::array<char*, N>& base, const std::array<int64_t, N>& stride, RunFn<N> fn,
                  void* ctx) {
  const int64_t chunks = n >= 2 * kParallelGrain ? num_threads() : 1;
  parallel_for(chunks, [&](int64_t c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    StridedRun<N> run;
    for (size_t k = 0; k < N; ++k) {
      run.ptr[k] = base[k] + begin * stride[k];
      run.stride[k] = stride[k];
    }
    run.n = end - begin;
    fn(ctx, run);
  });
}

}  // namespace

template <size_t N>
void for_each_strided_impl(Shape shape, std::array<char*, N> base, std::array<Shape, N> strides, RunFn<N> fn,
                           void* ctx) {
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
    for_each_run<N>(inner, base, inner_stride, fn, ctx);
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
      fn(ctx, run);
    }
  });
}

template <size_t N>
void for_each_strided_impl(const std::array<const Tensor*, N>& operands, RunFn<N> fn, void* ctx) {
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
    for_each_run<N>(n, base, stride, fn, ctx);
    return;
  }
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) {
    base[k] = byte_ptr(*operands[k]);
    strides[k] = byte_strides(*operands[k]);
  }
  for_each_strided_impl<N>(operands[0]->shape(), base, std::move(strides), fn, ctx);
}

#define WEFT_FOR_EACH_STRIDED(N)                                                                           \
  template void for_each_strided_impl<N>(Shape, std::array<char*, N>, std::array<Shape, N>, RunFn<N>, void*); \
  template void for_each_strided_impl<N>(const std::array<const Tensor*, N>&, RunFn<N>, void*);
WEFT_FOR_EACH_STRIDED(1)
WEFT_FOR_EACH_STRIDED(2)
WEFT_FOR_EACH_STRIDED(3)
WEFT_FOR_EACH_STRIDED(4)
#undef WEFT_FOR_EACH_STRIDED

}  // namespace weft::detail
