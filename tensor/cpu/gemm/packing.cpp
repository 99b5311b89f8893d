// Portable packers (packing.h). The common layouts — rows or columns contiguous, float32 — get
// loops the compiler vectorises; everything else reads element by element through the strides.
#include "tensor/cpu/gemm/packing.h"

#include <algorithm>

#include "tensor/float_formats.h"

namespace weft::detail {
namespace {

float load(const GemmMatrix& x, int64_t i, int64_t j) {
  const int64_t offset = i * x.rs + j * x.cs;
  if (x.bf16) return bfloat16_to_float(static_cast<const uint16_t*>(x.data)[offset]);
  return static_cast<const float*>(x.data)[offset];
}

uint16_t load_bits(const GemmMatrix& x, int64_t i, int64_t j) {
  return static_cast<const uint16_t*>(x.data)[i * x.rs + j * x.cs];
}

// dst[p·width + l] = M(l, p) for l < lanes, p < steps, zero for lanes ≤ l < width, where M(l, p)
// is x(l, p) (pack A: lanes are rows) or x(p, l) (pack B: lanes are columns, transposed = true).
void pack_panel(const GemmMatrix& x, bool lanes_are_columns, int64_t lanes, int64_t steps, int width, float* dst) {
  const int64_t lane_stride = lanes_are_columns ? x.cs : x.rs;
  const int64_t step_stride = lanes_are_columns ? x.rs : x.cs;
  if (!x.bf16 && lane_stride == 1) {
    // Each step's lanes are contiguous in the source: a row copy per step.
    const auto* src = static_cast<const float*>(x.data);
    for (int64_t p = 0; p < steps; ++p) {
      const float* s = src + p * step_stride;
      float* d = dst + p * width;
      for (int64_t l = 0; l < lanes; ++l) d[l] = s[l];
      for (int64_t l = lanes; l < width; ++l) d[l] = 0.0f;
    }
    return;
  }
  if (!x.bf16 && step_stride == 1) {
    // Each lane is contiguous along the steps: walk the lanes, scatter by `width`.
    const auto* src = static_cast<const float*>(x.data);
    for (int64_t l = 0; l < lanes; ++l) {
      const float* row = src + l * lane_stride;
      for (int64_t p = 0; p < steps; ++p) dst[p * width + l] = row[p];
    }
    for (int64_t p = 0; p < steps; ++p) std::fill(dst + p * width + lanes, dst + (p + 1) * width, 0.0f);
    return;
  }
  for (int64_t p = 0; p < steps; ++p) {
    for (int64_t l = 0; l < lanes; ++l) dst[p * width + l] = lanes_are_columns ? load(x, p, l) : load(x, l, p);
    std::fill(dst + p * width + lanes, dst + (p + 1) * width, 0.0f);
  }
}

// The K-pair form of pack_panel for bfloat16 bits (Note [bf16 K-pair panels]).
void pack_panel_pairs(const GemmMatrix& x, bool lanes_are_columns, int64_t lanes, int64_t steps, int width,
                      uint16_t* dst) {
  const int64_t pairs = (steps + 1) / 2;
  std::fill(dst, dst + pairs * width * 2, uint16_t{0});
  for (int64_t p = 0; p < steps; ++p) {
    uint16_t* out = dst + (p / 2) * width * 2 + (p % 2);
    for (int64_t l = 0; l < lanes; ++l) out[l * 2] = lanes_are_columns ? load_bits(x, p, l) : load_bits(x, l, p);
  }
}

}  // namespace

void pack_a_f32(const GemmMatrix& a, int64_t mc, int64_t kc, int mr, float* dst) {
  for (int64_t i = 0; i < mc; i += mr, dst += kc * mr)
    pack_panel(a.at(i, 0), false, std::min<int64_t>(mr, mc - i), kc, mr, dst);
}

void pack_b_f32(const GemmMatrix& b, int64_t kc, int64_t nc, int nr, float* dst) {
  for (int64_t j = 0; j < nc; j += nr, dst += kc * nr)
    pack_panel(b.at(0, j), true, std::min<int64_t>(nr, nc - j), kc, nr, dst);
}

void pack_a_bf16_pairs(const GemmMatrix& a, int64_t mc, int64_t kc, int mr, uint16_t* dst) {
  const int64_t panel = (kc + 1) / 2 * mr * 2;
  for (int64_t i = 0; i < mc; i += mr, dst += panel)
    pack_panel_pairs(a.at(i, 0), false, std::min<int64_t>(mr, mc - i), kc, mr, dst);
}

void pack_b_bf16_pairs(const GemmMatrix& b, int64_t kc, int64_t nc, int nr, uint16_t* dst) {
  const int64_t panel = (kc + 1) / 2 * nr * 2;
  for (int64_t j = 0; j < nc; j += nr, dst += panel)
    pack_panel_pairs(b.at(0, j), true, std::min<int64_t>(nr, nc - j), kc, nr, dst);
}

}  // namespace weft::detail
