// CPU gather/scatter kernels on (outer, n, inner) views: index_select and its adjoint
// index_add pick whole rows; gather and its adjoint scatter_add pick one element per position.
// Every index is bounds-checked before any write.
#include <cstring>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

// The 3-D geometry (outer, n, inner) of a contiguous tensor viewed around one dim.
struct Geometry {
  int64_t outer, n, inner;
};

Geometry geometry(const Tensor& t) { return {t.size(0), t.size(1), t.size(2)}; }

}  // namespace

void CpuBackend::index_select(const Tensor& x_in, const Tensor& index, const Tensor& out) {
  const Tensor x = dense(x_in);
  const auto g = geometry(x);
  const int64_t k = index.numel();
  const int64_t* idx = index.data<int64_t>();
  for (int64_t j = 0; j < k; ++j) check_index(idx[j], g.n, "index_select");
  const size_t row_bytes = static_cast<size_t>(g.inner) * itemsize(x.dtype());
  const char* src = byte_ptr(x);
  char* dst = byte_ptr(out);
  parallel_for(g.outer * k * g.inner >= kParallelGrain ? g.outer : 1, [&](int64_t job) {
    const bool all = g.outer * k * g.inner < kParallelGrain;
    for (int64_t o = all ? 0 : job; o < (all ? g.outer : job + 1); ++o)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(dst + (o * k + j) * row_bytes, src + (o * g.n + idx[j]) * row_bytes, row_bytes);
  });
}

void CpuBackend::index_add(const Tensor& out, const Tensor& index, const Tensor& src_in) {
  const Tensor src = dense(widen_if_narrow(src_in));
  const Tensor acc = compute_target(out);
  if (!acc.is_same(out)) copy(out, acc);
  const auto g = geometry(acc);
  const int64_t k = index.numel();
  const int64_t* idx = index.data<int64_t>();
  for (int64_t j = 0; j < k; ++j) check_index(idx[j], g.n, "index_add");
  WEFT_DISPATCH_COMPUTE(acc.dtype(), T, {
    T* o = acc.data<T>();
    const T* s = src.data<T>();
    // Rows may repeat in the index, so the outer dim is the only safe one to split.
    parallel_for(g.outer, [&](int64_t oi) {
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < g.inner; ++i)
          o[(oi * g.n + idx[j]) * g.inner + i] =
              static_cast<T>(o[(oi * g.n + idx[j]) * g.inner + i] + s[(oi * k + j) * g.inner + i]);
    });
  });
  store_from(acc, out);
}

void CpuBackend::gather(const Tensor& x_in, const Tensor& index_in, const Tensor& out) {
  const Tensor x = dense(x_in);
  const Tensor index = dense(index_in);
  const auto gx = geometry(x);
  const auto gi = geometry(index);
  const int64_t* idx = index.data<int64_t>();
  for (int64_t j = 0; j < index.numel(); ++j) check_index(idx[j], gx.n, "gather");
  const size_t item = itemsize(x.dtype());
  const char* src = byte_ptr(x);
  char* dst = byte_ptr(out);
  for (int64_t o = 0; o < gi.outer; ++o)
    for (int64_t j = 0; j < gi.n; ++j)
      for (int64_t i = 0; i < gi.inner; ++i) {
        const int64_t pos = (o * gi.n + j) * gi.inner + i;
        std::memcpy(dst + pos * static_cast<int64_t>(item),
                    src + ((o * gx.n + idx[pos]) * gx.inner + i) * static_cast<int64_t>(item), item);
      }
}

void CpuBackend::scatter_add(const Tensor& out, const Tensor& index_in, const Tensor& src_in) {
  const Tensor src = dense(widen_if_narrow(src_in));
  const Tensor index = dense(index_in);
  const Tensor acc = compute_target(out);
  if (!acc.is_same(out)) copy(out, acc);
  const auto go = geometry(acc);
  const auto gi = geometry(index);
  const int64_t* idx = index.data<int64_t>();
  for (int64_t j = 0; j < index.numel(); ++j) check_index(idx[j], go.n, "scatter_add");
  WEFT_DISPATCH_COMPUTE(acc.dtype(), T, {
    T* o = acc.data<T>();
    const T* s = src.data<T>();
    for (int64_t oi = 0; oi < gi.outer; ++oi)
      for (int64_t j = 0; j < gi.n; ++j)
        for (int64_t i = 0; i < gi.inner; ++i) {
          const int64_t pos = (oi * gi.n + j) * gi.inner + i;
          T& target = o[(oi * go.n + idx[pos]) * go.inner + i];
          target = static_cast<T>(target + s[pos]);
        }
  });
  store_from(acc, out);
}

}  // namespace weft::detail
