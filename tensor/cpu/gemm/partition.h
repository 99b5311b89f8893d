// How the GEMM drivers (gemm.cpp, gemm_f64.cpp) cut a dimension: into equal cache blocks, and
// into near-equal parts of whole tiles for the threads.
#pragma once

#include <algorithm>
#include <cstdint>

namespace weft::detail {

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

// The step that cuts n into equal chunks of at most `most`, rounded up to a multiple of `align`
// (K = 784 with a KC of 256: chunks of 196, not 3×256 + 16, so no chunk is a sliver).
inline int64_t even_step(int64_t n, int64_t most, int64_t align) {
  const int64_t chunks = ceil_div(n, most);
  return ceil_div(ceil_div(n, chunks), align) * align;
}

// Part `part` of `parts` near-equal runs of whole units (tiles) over n values: its first value and
// its length.
struct PartRange {
  int64_t first, length;
};
inline PartRange part_of(int64_t n, int64_t unit, int64_t parts, int64_t part) {
  const int64_t units = ceil_div(n, unit);
  const int64_t first = units * part / parts * unit;
  return {first, std::min(units * (part + 1) / parts * unit, n) - first};
}

}  // namespace weft::detail
