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

// Runs fn(r) for every row, over the threads when there is enough work.
template <class Fn>
void for_each_row(int64_t rows, int64_t n, Fn fn) {
  const bool all = rows * n < kParallelGrain;
  parallel_for(all ? 1 : rows, [&](int64_t job) {
    for (int64_t r = all ? 0 : job; r < (all ? rows : job + 1); ++r) fn(r);
  });
}

}  // namespace weft::detail
