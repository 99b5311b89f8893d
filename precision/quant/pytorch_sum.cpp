// The summation order of PyTorch's CPU sum kernel (aten/src/ATen/native/cpu/SumKernel.cpp) for one
// contiguous float32 row.
//
// The row is read as 8-lane vectors; whole vectors go through a 4-way interleaved cascade, the
// leftover values are summed in order, then the 8 lanes are added to them. The cascade keeps
// four levels of accumulators: rows go into level 0, and every 2^p rows (p = max(4,
// ceil(log2 rows) / 4)) a level is folded into the next, until a level's row count is not a
// multiple of its span. Rows short of a full chunk go into level 0, and the levels are finally
// added into level 0 in order.
#include "precision/quant/pytorch_sum.h"

#include <algorithm>
#include <array>

namespace weft::precision::quant {
namespace {

constexpr int kLanes = 8;     // floats per AVX2 vector
constexpr int kInterleave = 4;  // independent accumulator chains
constexpr int kLevels = 4;

int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t v = static_cast<uint64_t>(x - 1); v != 0; v >>= 1) ++bits;
  return bits;
}

// A lane-wise vector of W floats.
template <int W>
struct Lanes {
  std::array<float, W> v{};
  void add(const Lanes& o) {
    for (int i = 0; i < W; ++i) v[i] += o.v[i];
  }
};

// Sums `rows` consecutive rows of kInterleave groups; load(r, k) returns row r's group k.
template <int W, class Load>
std::array<Lanes<W>, kInterleave> cascade(int64_t rows, const Load& load) {
  const int64_t power = std::max<int64_t>(4, ceil_log2(rows) / kLevels);
  const int64_t step = int64_t{1} << power;
  const int64_t mask = step - 1;
  std::array<std::array<Lanes<W>, kInterleave>, kLevels> acc{};
  int64_t r = 0;
  for (; r + step <= rows;) {
    for (int64_t j = 0; j < step; ++j, ++r)
      for (int k = 0; k < kInterleave; ++k) acc[0][k].add(load(r, k));
    for (int level = 1; level < kLevels; ++level) {
      for (int k = 0; k < kInterleave; ++k) {
        acc[level][k].add(acc[level - 1][k]);
        acc[level - 1][k] = {};
      }
      if ((r & (mask << (level * power))) != 0) break;
    }
  }
  for (; r < rows; ++r)
    for (int k = 0; k < kInterleave; ++k) acc[0][k].add(load(r, k));
  for (int level = 1; level < kLevels; ++level)
    for (int k = 0; k < kInterleave; ++k) acc[0][k].add(acc[level][k]);
  return acc[0];
}

// row_sum: the interleaved cascade over whole groups of kInterleave items, the items left over
// added to chain 0, then chains 1..3 added to chain 0.
template <int W, class Item>
Lanes<W> row_sum(int64_t items, const Item& item) {
  const int64_t rows = items / kInterleave;
  auto chains = cascade<W>(rows, [&](int64_t r, int k) { return item(r * kInterleave + k); });
  for (int64_t i = rows * kInterleave; i < items; ++i) chains[0].add(item(i));
  for (int k = 1; k < kInterleave; ++k) chains[0].add(chains[k]);
  return chains[0];
}

}  // namespace

float pytorch_sum(const float* x, int64_t n) {
  if (n < kLanes) {
    // Too short for a vector: the same cascade over single floats.
    return row_sum<1>(n, [&](int64_t i) { return Lanes<1>{{x[i]}}; }).v[0];
  }
  const int64_t vectors = n / kLanes;
  const Lanes<kLanes> lanes = row_sum<kLanes>(vectors, [&](int64_t i) {
    Lanes<kLanes> l;
    std::copy(x + i * kLanes, x + (i + 1) * kLanes, l.v.begin());
    return l;
  });
  float total = 0.0f;
  for (int64_t i = vectors * kLanes; i < n; ++i) total += x[i];
  for (float lane : lanes.v) total += lane;
  return total;
}

float pytorch_mean(const float* x, int64_t n) { return pytorch_sum(x, n) / static_cast<float>(n); }

}  // namespace weft::precision::quant
