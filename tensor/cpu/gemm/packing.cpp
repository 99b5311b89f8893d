// Portable packers (packing.h): loops over the source's strides that the compiler vectorises
// where a panel row is contiguous in the source. The kernel sets may bring faster packers for the
// layouts that matter (GemmKernel::pack_b, pack_a, pack_pairs).
#include "tensor/cpu/gemm/packing.h"

#include <algorithm>
#include <cstring>

#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/float_formats.h"

namespace weft::detail {

alignas(64) const uint16_t kBf16PairInterleave[2][32] = {
    {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
    {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};

namespace {

float widen(float v) { return v; }
float widen(uint16_t bits) { return bfloat16_to_float(bits); }

// dst[p·width + l] = M(l, p) for l < lanes, p < steps, zero for lanes ≤ l < width, where M(l, p)
// is x(l, p) (pack A: lanes are rows) or x(p, l) (pack B: lanes are columns). T is the stored
// type: float, or uint16_t for bfloat16 bits.
template <class T>
void pack_panel(const GemmMatrix& x, bool lanes_are_columns, int64_t lanes, int64_t steps, int width, float* dst) {
  const int64_t lane_stride = lanes_are_columns ? x.cs : x.rs;
  const int64_t step_stride = lanes_are_columns ? x.rs : x.cs;
  const auto* src = static_cast<const T*>(x.data);
  if (lane_stride == 1) {
    // Each step's lanes are contiguous in the source: a row copy per step.
    for (int64_t p = 0; p < steps; ++p) {
      const T* s = src + p * step_stride;
      float* d = dst + p * width;
      for (int64_t l = 0; l < lanes; ++l) d[l] = widen(s[l]);
      for (int64_t l = lanes; l < width; ++l) d[l] = 0.0f;
    }
    return;
  }
  // Otherwise walk the lanes (contiguous along the steps when step_stride is 1), scattering by
  // `width`.
  for (int64_t l = 0; l < lanes; ++l) {
    const T* s = src + l * lane_stride;
    for (int64_t p = 0; p < steps; ++p) dst[p * width + l] = widen(s[p * step_stride]);
  }
  for (int64_t p = 0; p < steps; ++p) std::fill(dst + p * width + lanes, dst + (p + 1) * width, 0.0f);
}

void pack_panel(const GemmMatrix& x, bool lanes_are_columns, int64_t lanes, int64_t steps, int width, float* dst) {
  if (x.bf16) pack_panel<uint16_t>(x, lanes_are_columns, lanes, steps, width, dst);
  else pack_panel<float>(x, lanes_are_columns, lanes, steps, width, dst);
}

// The K-pair form of pack_panel for bfloat16 bits (Note [bf16 K-pair panels]), `pairs` steps
// of pairs long (at least (steps + 1) / 2; the rest zero). Pair q of lane l is the two values
// M(l, 2q), M(l, 2q+1); two layouts of the source have a fast loop: a lane's steps adjacent (W
// read as Wᵀ: each pair is one 32-bit word) and the lanes adjacent (a row-major B: two rows
// interleaved). Every panel byte is written once, the padding included.
void pack_panel_pairs(const GemmMatrix& x, bool lanes_are_columns, int64_t lanes, int64_t steps, int64_t pairs,
                      int width, uint16_t* dst) {
  const auto* src = static_cast<const uint16_t*>(x.data);
  const int64_t lane_stride = lanes_are_columns ? x.cs : x.rs;
  const int64_t step_stride = lanes_are_columns ? x.rs : x.cs;
  const int64_t whole_pairs = steps / 2;
  for (int64_t q = 0; q < whole_pairs; ++q) {
    uint16_t* out = dst + q * width * 2;
    const uint16_t* first = src + 2 * q * step_stride;
    if (step_stride == 1) {
      for (int64_t l = 0; l < lanes; ++l) std::memcpy(out + 2 * l, first + l * lane_stride, 2 * sizeof(uint16_t));
    } else {
      const uint16_t* second = first + step_stride;
      for (int64_t l = 0; l < lanes; ++l) {
        out[2 * l] = first[l * lane_stride];
        out[2 * l + 1] = second[l * lane_stride];
      }
    }
    std::fill(out + 2 * lanes, out + 2 * width, uint16_t{0});
  }
  for (int64_t q = whole_pairs; q < pairs; ++q) {  // an odd last step, then zero pairs
    uint16_t* out = dst + q * width * 2;
    std::fill(out, out + 2 * width, uint16_t{0});
    if (q * 2 < steps)
      for (int64_t l = 0; l < lanes; ++l) out[2 * l] = src[2 * q * step_stride + l * lane_stride];
  }
}

}  // namespace

void transpose_copy(const void* src, bool src_bf16, int64_t ld_src, int64_t rows, int64_t cols, void* dst,
                    bool dst_bf16, int64_t ld_dst) {
  constexpr int64_t kBlock = 16;
  const auto* src32 = static_cast<const float*>(src);
  const auto* src16 = static_cast<const uint16_t*>(src);
  auto* dst32 = static_cast<float*>(dst);
  auto* dst16 = static_cast<uint16_t*>(dst);
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      const int64_t i1 = std::min(rows, i0 + kBlock), j1 = std::min(cols, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) {
          const float v = src_bf16 ? bfloat16_to_float(src16[i * ld_src + j]) : src32[i * ld_src + j];
          if (dst_bf16) dst16[j * ld_dst + i] = float_to_bfloat16(v);
          else dst32[j * ld_dst + i] = v;
        }
    }
}

void widen_bf16(const GemmMatrix& x, int64_t rows, int64_t cols, bool column_major, float* dst) {
  if (column_major) pack_panel(x, false, rows, cols, static_cast<int>(rows), dst);
  else pack_panel(x, true, cols, rows, static_cast<int>(cols), dst);
}

void pack_a_f32(const GemmMatrix& a, int64_t mc, int64_t kc, int mr, float* dst) {
  for (int64_t i = 0; i < mc; i += mr, dst += kc * mr)
    pack_panel(a.at(i, 0), false, std::min<int64_t>(mr, mc - i), kc, mr, dst);
}

void pack_b_f32(const GemmMatrix& b, int64_t kc, int64_t nc, int nr, float* dst) {
  for (int64_t j = 0; j < nc; j += nr, dst += kc * nr)
    pack_panel(b.at(0, j), true, std::min<int64_t>(nr, nc - j), kc, nr, dst);
}

void pack_a_bf16_pairs(const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, int mr, uint16_t* dst) {
  const int64_t panel = pairs * mr * 2;
  for (int64_t i = 0; i < mc; i += mr, dst += panel)
    pack_panel_pairs(a.at(i, 0), false, std::min<int64_t>(mr, mc - i), kc, pairs, mr, dst);
}

void pack_b_bf16_pairs(const GemmMatrix& b, int64_t kc, int64_t nc, int64_t pairs, int nr, uint16_t* dst) {
  const int64_t panel = pairs * nr * 2;
  for (int64_t j = 0; j < nc; j += nr, dst += panel)
    pack_panel_pairs(b.at(0, j), true, std::min<int64_t>(nr, nc - j), kc, pairs, nr, dst);
}

void pack_a_bf16_rows(const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, int mr, uint16_t* dst) {
  const int64_t width = pairs * 2;
  const int64_t panels = (mc + mr - 1) / mr;
  const auto* src = static_cast<const uint16_t*>(a.data);
  // Row i of the block is dst[i·width ...]: panels of mr rows follow each other.
  if (a.cs == 1) {
    for (int64_t i = 0; i < mc; ++i)
      std::memcpy(dst + i * width, src + i * a.rs, static_cast<size_t>(kc) * sizeof(uint16_t));
  } else {
    // A read down its columns (gᵀ in a weight gradient): 16 × 16 blocks, so that both the
    // strided reads and the strided writes of a block stay in L1.
    constexpr int64_t kBlock = 16;
    for (int64_t i0 = 0; i0 < mc; i0 += kBlock)
      for (int64_t p0 = 0; p0 < kc; p0 += kBlock) {
        const int64_t i1 = std::min(mc, i0 + kBlock), p1 = std::min(kc, p0 + kBlock);
        for (int64_t p = p0; p < p1; ++p)
          for (int64_t i = i0; i < i1; ++i) dst[i * width + p] = src[i * a.rs + p * a.cs];
      }
  }
  for (int64_t i = 0; i < mc; ++i) std::fill(dst + i * width + kc, dst + (i + 1) * width, uint16_t{0});
  std::fill(dst + mc * width, dst + panels * mr * width, uint16_t{0});
}

}  // namespace weft::detail
