// An independent model of the narrow floating formats, for tests only.
//
// Decoding evaluates the format's defining formula in double (sign · 2^(e−bias) · (1 + m/2^M),
// subnormals sign · 2^(1−bias) · m/2^M, the all-ones exponent as Inf/NaN for IEEE-style formats
// and only S.1111.111 as NaN for E4M3FN). Encoding is brute force: the nearest finite value found
// by searching the table of decoded codes, ties to the code with an even mantissa, and overflow
// decided from the table: |x| above max + ulp(max)/2 overflows, and exactly there it is a tie
// that goes to the even side (past max for fp16, bf16 and E5M2, whose max has an odd mantissa;
// back to 448 for E4M3FN, whose max 1.110·2^8 is even). Nothing here calls weft's float_formats.cpp,
// so the tests that compare the two check weft against the spec, not against itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace weft_test {

struct NarrowSpec {
  std::string name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_specials;  // all-ones exponent is Inf (m == 0) / NaN; false: E4M3FN (only S.1111.111 is NaN)

  int total_bits() const { return 1 + exponent_bits + mantissa_bits; }
  uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
  uint32_t num_codes() const { return 1u << total_bits(); }
};

inline const NarrowSpec kHalfSpec{"float16", 5, 10, 15, true};
inline const NarrowSpec kBFloat16Spec{"bfloat16", 8, 7, 127, true};
inline const NarrowSpec kE4M3Spec{"float8_e4m3fn", 4, 3, 7, false};
inline const NarrowSpec kE5M2Spec{"float8_e5m2", 5, 2, 15, true};

// The value a code stands for, from the format's formula.
inline double reference_decode(const NarrowSpec& f, uint32_t code) {
  const bool negative = (code & f.sign_bit()) != 0;
  const uint32_t e = (code >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1);
  const uint32_t m = code & ((1u << f.mantissa_bits) - 1);
  const uint32_t e_max = (1u << f.exponent_bits) - 1;
  const uint32_t m_max = (1u << f.mantissa_bits) - 1;
  double v;
  if (f.ieee_specials && e == e_max) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee_specials && e == e_max && m == m_max) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m) / std::ldexp(1.0, f.mantissa_bits), 1 - f.bias);
  } else {
    v = std::ldexp(1.0 + static_cast<double>(m) / std::ldexp(1.0, f.mantissa_bits), static_cast<int>(e) - f.bias);
  }
  return negative ? -v : v;
}

// The positive finite codes in increasing order of value (codes 0 .. max finite magnitude), and
// what overflow means, read off the decoded table.
struct NarrowTable {
  NarrowSpec spec;
  std::vector<double> value;  // value[code] for code in [0, max_finite]
  uint32_t max_finite;
  double overflow_threshold;  // max + ulp(max)/2: the midpoint past the largest finite value
  uint32_t nan_code;          // a positive NaN code
  bool has_infinity;
  uint32_t inf_code;
};

inline NarrowTable make_table(const NarrowSpec& f) {
  NarrowTable t{f, {}, 0, 0, 0, false, 0};
  for (uint32_t code = 0; code < f.sign_bit(); ++code) {
    const double v = reference_decode(f, code);
    if (std::isnan(v)) {
      if (t.nan_code == 0) t.nan_code = code;
    } else if (std::isinf(v)) {
      t.has_infinity = true;
      t.inf_code = code;
    } else {
      t.value.push_back(v);
      t.max_finite = code;
    }
  }
  const size_t n = t.value.size();
  t.overflow_threshold = t.value[n - 1] + (t.value[n - 1] - t.value[n - 2]) / 2;
  return t;
}

// Round-to-nearest-even into the format, by searching the table. `saturate` decides overflow:
// the largest finite value, or Inf (NaN when the format has no Inf). Infinite inputs overflow.
inline uint32_t reference_encode(const NarrowTable& t, float x, bool saturate) {
  const uint32_t sign = std::signbit(x) ? t.spec.sign_bit() : 0;
  if (std::isnan(x)) return t.nan_code;  // callers compare NaN-ness, not payloads
  const double a = std::fabs(static_cast<double>(x));
  const bool max_is_odd = (t.max_finite & 1u) != 0;
  if (a > t.overflow_threshold || (a == t.overflow_threshold && max_is_odd)) {
    if (saturate) return sign | t.max_finite;
    return sign | (t.has_infinity ? t.inf_code : t.nan_code);
  }
  // value is increasing, so the nearest lies at the insertion point or just before it.
  const auto it = std::lower_bound(t.value.begin(), t.value.end(), a);
  const auto hi = static_cast<uint32_t>(it - t.value.begin());
  if (hi == 0) return sign;  // a == 0
  const uint32_t lo = hi - 1;
  if (hi > t.max_finite) return sign | lo;  // between max and the threshold
  const double d_lo = a - t.value[lo], d_hi = t.value[hi] - a;
  if (d_lo < d_hi) return sign | lo;
  if (d_hi < d_lo) return sign | hi;
  return sign | ((lo & 1u) == 0 ? lo : hi);  // tie: the even mantissa
}

}  // namespace weft_test
