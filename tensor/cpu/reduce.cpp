// CPU row reductions and the fused softmax kernels. The front-end has already moved the reduced
// dims last and made the input contiguous, so every kernel here sees rows of length n.
// Floating sums accumulate in double, eight partial sums a row (sum_in_double, rows.h: float32
// rows of a million elements stay accurate);
// integer and bool sums accumulate in int64. Rows of narrow floats are widened into a buffer of
// the kernel's own before they are reduced (tensor/cpu/convert.h), and results rounded on store.
// The reductions are instantiated once per compute type, not per storage and output dtype: every
// narrow float is read as float32 through one kernel, and a sum's output dtype is a store function
// chosen per call (issue 47: the full product was a twelfth of a shipped program). Column sums
// of float32 and bfloat16 take an AVX-512 kernel where the CPU has it (column_sums_kernels.h), with
// the scalar loop's bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/cpu/column_sums_kernels.h"
#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"
#include "tensor/cpu/rows.h"

namespace weft::detail {
namespace {

template <class C>
using Accumulator = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;

// Calls fn(C{}) with C the type dtype d is computed in: float32 for every narrow float, so one
// instantiation of a kernel serves them all (issue 47), reading rows through compute_values.
template <class Fn>
void visit_compute_type(DType d, Fn&& fn) {
  if (is_narrow_float(d)) return fn(float{});
  WEFT_DISPATCH_ALL(d, S, {
    if constexpr (!kIsNarrowFloat<S>) fn(S{});
  });
}

// How a kernel computing in C reads a contiguous tensor: through float32 chunks (`widen`) when it
// is a narrow float, else in place.
struct Storage {
  const char* base;
  FloatChunkLoad widen;  // null: the tensor is stored as C
  int64_t item;

  template <class C>
  static Storage of(const Tensor& t) {
    const DType d = t.dtype();
    return {byte_ptr(t), std::is_same_v<C, float> && d != kFloat32 ? float_chunk_load(d) : nullptr,
            static_cast<int64_t>(itemsize(d))};
  }
};

// Values [begin, begin + n) of x as compute type C: in place, or (narrow storage, C = float)
// widened into buffer.
template <class C>
const C* compute_values(const Storage& x, int64_t begin, int64_t n, std::vector<C>& buffer) {
  if constexpr (std::is_same_v<C, float>) {
    if (x.widen != nullptr) {
      buffer.resize(static_cast<size_t>(n));
      for (int64_t b = 0; b < n; b += kChunk)
        x.widen(x.base + (begin + b) * x.item, x.item, std::min(kChunk, n - b), buffer.data() + b);
      return buffer.data();
    }
  }
  return reinterpret_cast<const C*>(x.base) + begin;
}

// Where a sum's total goes: out[r] of a sum's output dtype (int64 or floating), rounded as
// convert() rounds. Chosen once per call, so the kernels are not instantiated per output dtype.
template <class Acc>
using StoreTotal = void (*)(void* out, int64_t r, Acc total);

template <class O, class Acc>
void store_total(void* out, int64_t r, Acc total) {
  static_cast<O*>(out)[r] = convert<O>(static_cast<Compute<O>>(total));
}

template <class Acc>
StoreTotal<Acc> store_total_for(DType d) {
  WEFT_CHECK(d == kInt64 || is_floating(d), "[sum] internal: unsupported accumulator dtype ", d);
  StoreTotal<Acc> store = nullptr;
  WEFT_DISPATCH_ALL(d, O, {
    if constexpr (std::is_same_v<O, int64_t> || std::is_floating_point_v<O> || kIsNarrowFloat<O>)
      store = store_total<O, Acc>;
  });
  return store;
}

// A run of n values summed in its accumulator: floats by sum_in_double's eight partial sums
// (rows.h), integers in order.
template <class C>
Accumulator<C> row_sum(const C* v, int64_t n) {
  if constexpr (std::is_floating_point_v<C>) {
    return sum_in_double(v, n);
  } else {
    Accumulator<C> acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += v[i];
    return acc;
  }
}

template <class C>
void sum_rows(const Storage& x, void* out, DType out_dtype, int64_t rows, int64_t n) {
  using Acc = Accumulator<C>;
  const StoreTotal<Acc> store = store_total_for<Acc>(out_dtype);
  if (rows == 1 && n >= 2 * kParallelGrain) {
    // One long row: partial sums per thread, combined in a fixed order (deterministic).
    const int64_t chunks = num_threads();
    std::vector<Acc> partial(static_cast<size_t>(chunks), 0);
    parallel_for(chunks, [&](int64_t c) {
      const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      std::vector<C> buffer;
      partial[static_cast<size_t>(c)] = row_sum<C>(compute_values(x, begin, end - begin, buffer), end - begin);
    });
    Acc total = 0;
    for (auto p : partial) total += p;
    store(out, 0, total);
    return;
  }
  for_each_row(rows, n, [&](int64_t r) {
    std::vector<C> buffer;
    store(out, r, row_sum<C>(compute_values(x, r * n, n, buffer), n));
  });
}

// Column sums walk x row by row (contiguous, vectorisable) into one accumulator per column;
// threads take disjoint column ranges, so the result does not depend on the thread count.
template <class C>
void sum_columns_of(const Storage& x, void* out, DType out_dtype, int64_t n, int64_t cols) {
  using Acc = Accumulator<C>;
  const StoreTotal<Acc> store = store_total_for<Acc>(out_dtype);
  const int64_t chunks = n * cols >= kParallelGrain ? std::min<int64_t>(num_threads(), (cols + 7) / 8) : 1;
  parallel_for(chunks, [&](int64_t c) {
    const int64_t begin = cols * c / chunks, end = cols * (c + 1) / chunks;
    std::vector<Acc> acc(static_cast<size_t>(end - begin), 0);
    std::vector<C> buffer;
    for (int64_t r = 0; r < n; ++r) {
      const C* row = compute_values(x, r * cols + begin, end - begin, buffer);
      for (int64_t j = 0; j < end - begin; ++j) acc[static_cast<size_t>(j)] += row[j];
    }
    for (int64_t j = begin; j < end; ++j) store(out, j, acc[static_cast<size_t>(j - begin)]);
  });
}

// Max/min propagate NaN, as PyTorch; ties keep the first index. A value result is the input's
// element itself, copied as bytes.
template <class C>
void extreme_rows(ReduceOp op, const Storage& x, void* out, int64_t rows, int64_t n) {
  const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
  const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const auto item = static_cast<size_t>(x.item);
  for_each_row(rows, n, [&](int64_t r) {
    std::vector<C> buffer;
    const C* row = compute_values(x, r * n, n, buffer);
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      const C v = row[i], b = row[best];
      if constexpr (std::is_floating_point_v<C>) {
        if (b != b) break;
        if (v != v) { best = i; break; }
      }
      if (want_max ? v > b : v < b) best = i;
    }
    if (want_index) static_cast<int64_t*>(out)[r] = best;
    else std::memcpy(static_cast<char*>(out) + static_cast<size_t>(r) * item, x.base + static_cast<size_t>(r * n + best) * item, item);
  });
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& x, const Tensor& out) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = out.numel();
  WEFT_CHECK(n > 0 || op == ReduceOp::Sum, "[reduce] cannot take max/min/argmax of an empty dimension");
  visit_compute_type(x.dtype(), [&](auto c) {
    using C = decltype(c);
    if (op == ReduceOp::Sum) sum_rows<C>(Storage::of<C>(x), out.data_ptr(), out.dtype(), rows, n);
    else extreme_rows<C>(op, Storage::of<C>(x), out.data_ptr(), rows, n);
  });
}

void CpuBackend::sum_columns(const Tensor& x, const Tensor& out) {
  const int64_t n = x.size(0), cols = x.size(1);
  if ((x.dtype() == kFloat32 || x.dtype() == kBFloat16) && cpu_isa() >= CpuIsa::Avx512) {
    // The vector kernel of column_sums_kernels.h, over the column ranges sum_columns_of takes.
    const StoreTotal<double> store = store_total_for<double>(out.dtype());
    const int64_t chunks = n * cols >= kParallelGrain ? std::min<int64_t>(num_threads(), (cols + 7) / 8) : 1;
    const bool bf16 = x.dtype() == kBFloat16;
    parallel_for(chunks, [&](int64_t c) {
      const int64_t begin = cols * c / chunks, end = cols * (c + 1) / chunks;
      std::vector<double> acc(static_cast<size_t>(end - begin), 0.0);
      add_columns_avx512(byte_ptr(x) + begin * (bf16 ? 2 : 4), bf16, cols, n, end - begin, acc.data());
      for (int64_t j = begin; j < end; ++j) store(out.data_ptr(), j, acc[static_cast<size_t>(j - begin)]);
    });
    return;
  }
  visit_compute_type(x.dtype(), [&](auto c) {
    using C = decltype(c);
    sum_columns_of<C>(Storage::of<C>(x), out.data_ptr(), out.dtype(), n, cols);
  });
}

void CpuBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  const int64_t n = x.size(-1), rows = x.numel() / std::max<int64_t>(n, 1);
  visit_floating_storage(x.dtype(), "softmax", [&](auto tag) {
    using S = decltype(tag);
    using T = Compute<S>;
    const S* xp = static_cast<const S*>(x.data_ptr());
    S* op = static_cast<S*>(out.data_ptr());
    for_each_row(rows, n, [&](int64_t r) {
      std::vector<T> in_buffer, out_buffer;
      const T* row = row_values(xp, r, n, in_buffer);
      T* o = row_target(op, r, n, out_buffer);
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
      store_row(op, r, n, out_buffer);
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& grad, const Tensor& y, const Tensor& gx, bool log) {
  const int64_t n = y.size(-1), rows = y.numel() / std::max<int64_t>(n, 1);
  visit_floating_storage(y.dtype(), "softmax", [&](auto tag) {
    using S = decltype(tag);
    using T = Compute<S>;
    const S* gp = static_cast<const S*>(grad.data_ptr());
    const S* yp = static_cast<const S*>(y.data_ptr());
    S* op = static_cast<S*>(gx.data_ptr());
    for_each_row(rows, n, [&](int64_t r) {
      std::vector<T> g_buffer, y_buffer, out_buffer;
      const T* gr = row_values(gp, r, n, g_buffer);
      const T* yr = row_values(yp, r, n, y_buffer);
      T* o = row_target(op, r, n, out_buffer);
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += log ? gr[i] : gr[i] * yr[i];
      const T d = static_cast<T>(dot);
      for (int64_t i = 0; i < n; ++i) o[i] = log ? gr[i] - std::exp(yr[i]) * d : yr[i] * (gr[i] - d);
      store_row(op, r, n, out_buffer);
    });
  });
}

}  // namespace weft::detail
