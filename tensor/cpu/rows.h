// Row access for the CPU row kernels (reductions, softmax, the fused losses and norms): rows of a
// contiguous (rows, n) array as compute values, widened into a buffer of the kernel's own when
// their storage is narrow (tensor/cpu/convert.h), and results rounded back on store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {

// Row r of a contiguous (rows, n) array of storage type S as compute values: the row itself, or
// (narrow S) its widened copy in `buffer`.
template <class S>
const Compute<S>* row_values(const S* base, int64_t r, int64_t n, std::vector<Compute<S>>& buffer) {
  if constexpr (kIsNarrowFloat<S>) {
    buffer.resize(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; b += kChunk)
      load_chunk<S>(reinterpret_cast<const char*>(base + r * n + b), sizeof(S), std::min(kChunk, n - b), buffer.data() + b);
    return buffer.data();
  } else {
    (void)buffer;
    return base + r * n;
  }
}

// Where row results are computed: the output row itself, or (narrow S) `buffer`, which
// store_row then rounds into the output.
template <class S>
Compute<S>* row_target(S* base, int64_t r, int64_t n, std::vector<Compute<S>>& buffer) {
  if constexpr (kIsNarrowFloat<S>) {
    buffer.resize(static_cast<size_t>(n));
    return buffer.data();
  } else {
    (void)buffer;
    return base + r * n;
  }
}

template <class S>
void store_row(S* base, int64_t r, int64_t n, const std::vector<Compute<S>>& buffer) {
  if constexpr (kIsNarrowFloat<S>)
    for (int64_t b = 0; b < n; b += kChunk)
      store_chunk<S>(reinterpret_cast<char*>(base + r * n + b), sizeof(S), std::min(kChunk, n - b), buffer.data() + b);
}

// Σ f(i) for i < n in double over PARTS interleaved partial sums (value i to sum i mod PARTS),
// added pairwise at the end. One running sum is a chain of dependent additions, a double
// addition's latency per value, that a row's other work waits on; interleaved ones vectorise at
// every instruction-set level, so the sum does not depend on the level. A float result differs
// from the sequential sum's only where the double total lies within a double rounding of a float's
// halfway point.
template <int PARTS, class F>
double interleaved_sum(int64_t n, const F& f) {
  static_assert(PARTS >= 2 && (PARTS & (PARTS - 1)) == 0, "a power of two of partial sums");
  double part[PARTS] = {};
  int64_t i = 0;
  for (; i + PARTS <= n; i += PARTS)
    for (int j = 0; j < PARTS; ++j) part[j] += f(i + j);
  for (; i < n; ++i) part[i % PARTS] += f(i);
  for (int width = PARTS; width > 1; width /= 2)
    for (int j = 0; j < width / 2; ++j) part[j] = part[2 * j] + part[2 * j + 1];
  return part[0];
}

// Σ v[i] in double over eight partial sums: the row sums of the reductions and of the RMS norm
// (its mean of squares over a Llama's 2048-wide rows, summed in order, was 2.7 % of a bf16 prefill).
template <class C>
double sum_in_double(const C* v, int64_t n) {
  return interleaved_sum<8>(n, [v](int64_t i) { return static_cast<double>(v[i]); });
}

// Runs fn(r) for every row, over the threads when there is enough work.
template <class Fn>
void for_each_row(int64_t rows, int64_t n, Fn fn) {
  const bool all = rows * n < kParallelGrain;
  parallel_for(all ? 1 : rows, [&](int64_t job) {
    for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) fn(r);
  });
}

}  // namespace weft::detail
