// The NF4, FP4 and signed dynamic code tables.
#include "precision/quant/codebooks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace weft::precision::quant {
namespace {

// torch.linspace(0.1, 1.0, n) in float32, value for value: PyTorch's kernel fills the first half
// from the start and the second half from the end, each as one fused multiply-add.
float linspace_point(int64_t i, int64_t n) {
  const float start = 0.1f, end = 1.0f;
  const float step = (end - start) / static_cast<float>(n - 1);
  if (i < n / 2) return std::fma(step, static_cast<float>(i), start);
  return std::fma(-step, static_cast<float>(n - i - 1), end);
}

// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for the
// decades 1e-6 .. 1e0, 2^i + 1 evenly spaced boundaries in [0.1, 1], the midpoints of neighbours
// scaled to the decade, with both signs; then 0 and 1; sorted.
std::array<float, 256> make_dynamic_code() {
  std::array<float, 256> code{};
  int next = 0;
  for (int i = 0; i < 7; ++i) {
    const int64_t boundaries = (int64_t{1} << i) + 1;
    const auto decade = static_cast<float>(std::pow(10.0, i - 6));
    for (int64_t j = 0; j + 1 < boundaries; ++j) {
      const float mean = (linspace_point(j, boundaries) + linspace_point(j + 1, boundaries)) / 2.0f;
      code[next++] = decade * mean;
      code[next++] = -decade * mean;
    }
  }
  code[next++] = 0.0f;
  code[next++] = 1.0f;
  std::sort(code.begin(), code.end());
  return code;
}

}  // namespace

const std::array<float, 16>& nf4_code() {
  static const std::array<float, 16> code = {
      -1.0f,
      -0.6961928009986877f,
      -0.5250730514526367f,
      -0.39491748809814453f,
      -0.28444138169288635f,
      -0.18477343022823334f,
      -0.09105003625154495f,
      0.0f,
      0.07958029955625534f,
      0.16093020141124725f,
      0.24611230194568634f,
      0.33791524171829224f,
      0.44070982933044434f,
      0.5626170039176941f,
      0.7229568362236023f,
      1.0f,
  };
  return code;
}

const std::array<float, 16>& fp4_code() {
  // The raw magnitudes in bit order, divided by the largest (12) in float32 as bitsandbytes does.
  static const std::array<float, 16> code = [] {
    const float raw[8] = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f};
    std::array<float, 16> c{};
    for (int i = 0; i < 8; ++i) {
      c[i] = raw[i] / 12.0f;
      c[i + 8] = i == 0 ? 0.0f : -raw[i] / 12.0f;  // code 0b1000 is a second +0
    }
    return c;
  }();
  return code;
}

const std::array<float, 16>& fp4_cpu_decode_code() {
  static const std::array<float, 16> code = [] {
    std::array<float, 16> c = fp4_code();
    c[8] = -0.0f;
    return c;
  }();
  return code;
}

const std::array<float, 256>& dynamic_code() {
  static const std::array<float, 256> code = make_dynamic_code();
  return code;
}

}  // namespace weft::precision::quant
