// Narrow float formats (tensor/float_formats.h) against the format definitions: every code of
// fp16, bf16, E4M3FN and E5M2 decodes to the value of the format's formula and survives a round
// trip; encoding from float32 agrees with a brute-force nearest-even search of the decoded table
// (narrow_reference.h) on every midpoint, its float neighbours, random floats of every exponent
// and the specials; fp16 also agrees with the x86 F16C instruction, bf16 with the spec's RNE
// formula. The FP8 facts are those of ../shared/reference/quantization-fp8.md §B.3.
#include <doctest/doctest.h>

#include <bit>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "narrow_reference.h"
#include "tensor/all.h"

using namespace weft;
using weft_test::NarrowSpec;
using weft_test::NarrowTable;

namespace {

struct Codec {
  const NarrowSpec& spec;
  std::function<float(uint32_t)> decode;
  std::function<uint32_t(float, bool)> encode;  // bool: saturate (ignored by fp16 / bf16)
};

Codec half_codec() {
  return {weft_test::kHalfSpec, [](uint32_t c) { return half_to_float(static_cast<uint16_t>(c)); },
          [](float x, bool) { return static_cast<uint32_t>(float_to_half(x)); }};
}
Codec bf16_codec() {
  return {weft_test::kBFloat16Spec, [](uint32_t c) { return bfloat16_to_float(static_cast<uint16_t>(c)); },
          [](float x, bool) { return static_cast<uint32_t>(float_to_bfloat16(x)); }};
}
Codec e4m3_codec() {
  return {weft_test::kE4M3Spec, [](uint32_t c) { return fp8_e4m3fn_to_float(static_cast<uint8_t>(c)); },
          [](float x, bool sat) { return static_cast<uint32_t>(float_to_fp8_e4m3fn(x, sat)); }};
}
Codec e5m2_codec() {
  return {weft_test::kE5M2Spec, [](uint32_t c) { return fp8_e5m2_to_float(static_cast<uint8_t>(c)); },
          [](float x, bool sat) { return static_cast<uint32_t>(float_to_fp8_e5m2(x, sat)); }};
}

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%X", v);
  return buf;
}

// Every code decodes to the formula's value, bit for bit (so -0 stays -0), NaN codes to NaN.
void check_decode_all(const Codec& c) {
  int failures = 0;
  for (uint32_t code = 0; code < c.spec.num_codes(); ++code) {
    const double expected = weft_test::reference_decode(c.spec, code);
    const float got = c.decode(code);
    const bool ok = std::isnan(expected) ? std::isnan(got)
                                         : bits_of(got) == bits_of(static_cast<float>(expected)) &&
                                               static_cast<double>(got) == expected;
    if (!ok && failures++ < 5) FAIL_CHECK(c.spec.name << " code " << hex(code) << " decoded to " << got);
  }
  CHECK(failures == 0);
}

// decode → encode is the identity on every non-NaN code; NaN codes re-encode to a NaN code.
// The one documented exception: a satfinite FP8 encode sends ±Inf (E5M2) to ±max, as CUDA does.
void check_round_trip_all(const Codec& c, bool saturate) {
  const NarrowTable t = weft_test::make_table(c.spec);
  int failures = 0;
  for (uint32_t code = 0; code < c.spec.num_codes(); ++code) {
    const float v = c.decode(code);
    const uint32_t back = c.encode(v, saturate);
    const uint32_t sign = code & c.spec.sign_bit();
    const uint32_t expected = std::isinf(v) && saturate ? sign | t.max_finite : code;
    const bool ok = std::isnan(v) ? std::isnan(weft_test::reference_decode(c.spec, back)) : back == expected;
    if (!ok && failures++ < 5) FAIL_CHECK(c.spec.name << " code " << hex(code) << " round-tripped to " << hex(back));
  }
  CHECK(failures == 0);
}

// The inputs that exercise rounding: every midpoint of adjacent finite codes (the ties) and its
// float neighbours, the codes themselves, the overflow threshold and its neighbours, random bit
// patterns over the whole float32 range, and the specials; all with both signs.
std::vector<float> encoding_inputs(const NarrowTable& t) {
  std::vector<float> xs;
  auto add_with_neighbours = [&xs](float v) {
    xs.push_back(v);
    xs.push_back(std::nextafter(v, 0.0f));
    xs.push_back(std::nextafter(v, std::numeric_limits<float>::infinity()));
  };
  for (size_t i = 0; i < t.value.size(); ++i) {
    add_with_neighbours(static_cast<float>(t.value[i]));
    if (i + 1 < t.value.size()) {
      const double mid = (t.value[i] + t.value[i + 1]) / 2;
      REQUIRE(static_cast<double>(static_cast<float>(mid)) == mid);  // every midpoint is a float
      add_with_neighbours(static_cast<float>(mid));
    }
  }
  if (t.overflow_threshold < std::numeric_limits<float>::max()) add_with_neighbours(static_cast<float>(t.overflow_threshold));
  for (float v : {std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 0.0f, 1e30f, 1e-30f})
    xs.push_back(v);
  std::mt19937 rng(20240601);
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  const size_t n = xs.size();
  for (size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  xs.push_back(std::bit_cast<float>(0x7F800001u));  // signalling NaN
  return xs;
}

void check_encode_against_reference(const Codec& c, bool saturate) {
  const NarrowTable t = weft_test::make_table(c.spec);
  int failures = 0;
  size_t checked = 0;
  for (float x : encoding_inputs(t)) {
    const uint32_t expected = weft_test::reference_encode(t, x, saturate);
    const uint32_t got = c.encode(x, saturate);
    const bool expect_nan = std::isnan(weft_test::reference_decode(c.spec, expected));
    const bool ok = expect_nan ? std::isnan(weft_test::reference_decode(c.spec, got)) : got == expected;
    ++checked;
    if (!ok && failures++ < 5)
      FAIL_CHECK(c.spec.name << (saturate ? " (satfinite)" : " (non-saturating)") << " encode(" << x << " = "
                             << hex(bits_of(x)) << ") gave " << hex(got) << ", expected " << hex(expected));
  }
  CHECK(failures == 0);
  CHECK(checked > 400000);
}

}  // namespace

// fp16 and bf16 are IEEE-style: overflow is Inf, i.e. the reference's non-saturating mode.
TEST_CASE("float16: all 65536 codes decode to the IEEE binary16 formula and round-trip") {
  check_decode_all(half_codec());
  check_round_trip_all(half_codec(), false);
}

TEST_CASE("bfloat16: all 65536 codes decode to the formula and round-trip") {
  check_decode_all(bf16_codec());
  check_round_trip_all(bf16_codec(), false);
}

TEST_CASE("float8: all 256 codes of E4M3FN and E5M2 decode to the formula and round-trip both ways") {
  for (const Codec& c : {e4m3_codec(), e5m2_codec()}) {
    CAPTURE(c.spec.name);
    check_decode_all(c);
    check_round_trip_all(c, true);
    check_round_trip_all(c, false);
  }
}

TEST_CASE("float16 table facts") {
  CHECK(half_to_float(0x7BFF) == 65504.0f);
  CHECK(half_to_float(0x0400) == std::ldexp(1.0f, -14));  // min normal
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // min subnormal
  CHECK(half_to_float(0x3C00) == 1.0f);
  CHECK(half_to_float(0x3C01) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(std::isinf(half_to_float(0x7C00)));
  CHECK(half_to_float(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(half_to_float(0x7E00)));
  CHECK(std::isnan(half_to_float(0x7C01)));
  CHECK(float_to_half(65519.996f) == 0x7BFF);  // just below max + ulp/2
  CHECK(float_to_half(65520.0f) == 0x7C00);    // the tie goes to the even (infinite) side
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // half the min subnormal ties to 0
  CHECK(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(float_to_half(-0.0f) == 0x8000);
}

TEST_CASE("float8_e4m3fn table facts (§B.3)") {
  CHECK(fp8_e4m3fn_to_float(0x7E) == 448.0f);
  CHECK(fp8_e4m3fn_to_float(0xFE) == -448.0f);
  CHECK(fp8_e4m3fn_to_float(0x08) == 0.015625f);      // min normal 2^-6
  CHECK(fp8_e4m3fn_to_float(0x07) == 0.013671875f);   // max subnormal 0.875·2^-6
  CHECK(fp8_e4m3fn_to_float(0x01) == 0.001953125f);   // min subnormal 2^-9
  CHECK(fp8_e4m3fn_to_float(0x39) - fp8_e4m3fn_to_float(0x38) == 0.125f);  // epsilon at 1
  CHECK(fp8_e4m3fn_to_float(0x38) == 1.0f);
  CHECK(std::bit_cast<uint32_t>(fp8_e4m3fn_to_float(0x80)) == 0x80000000u);  // -0
  int nan_codes = 0, inf_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3fn_to_float(static_cast<uint8_t>(c));
    nan_codes += std::isnan(v);
    inf_codes += std::isinf(v);
  }
  CHECK(nan_codes == 2);  // only 0x7F and 0xFF
  CHECK(std::isnan(fp8_e4m3fn_to_float(0x7F)));
  CHECK(std::isnan(fp8_e4m3fn_to_float(0xFF)));
  CHECK(inf_codes == 0);
  // Overflow: past 464 = 448 + ulp/2 rounds past 448; satfinite gives ±448, non-saturating NaN.
  // 464 itself is the tie between 448 (1.110·2^8, even) and the would-be 480 (1.111·2^8), so
  // round-to-nearest-even keeps 448, exactly as CUDA's `absx > FP8_OVERFLOW_THRESHOLD` does.
  const float above_464 = std::nextafter(464.0f, 1e9f);
  CHECK(float_to_fp8_e4m3fn(463.99997f, false) == 0x7E);
  CHECK(float_to_fp8_e4m3fn(464.0f, false) == 0x7E);
  CHECK(float_to_fp8_e4m3fn(-464.0f, false) == 0xFE);
  CHECK(float_to_fp8_e4m3fn(above_464) == 0x7E);
  CHECK(float_to_fp8_e4m3fn(-above_464) == 0xFE);
  CHECK(float_to_fp8_e4m3fn(above_464, false) == 0x7F);
  CHECK(float_to_fp8_e4m3fn(-above_464, false) == 0xFF);
  CHECK(float_to_fp8_e4m3fn(1e9f, false) == 0x7F);
  CHECK(float_to_fp8_e4m3fn(-1e9f, false) == 0xFF);
  CHECK(float_to_fp8_e4m3fn(std::numeric_limits<float>::infinity()) == 0x7E);  // CUDA satfinite
  CHECK(float_to_fp8_e4m3fn(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK((float_to_fp8_e4m3fn(std::numeric_limits<float>::infinity(), false) & 0x7F) == 0x7F);
  CHECK((float_to_fp8_e4m3fn(std::numeric_limits<float>::quiet_NaN()) & 0x7F) == 0x7F);
  CHECK(float_to_fp8_e4m3fn(0.0009765625f) == 0x00);   // half the min subnormal ties to 0
  CHECK(float_to_fp8_e4m3fn(0.0009765626f) == 0x01);
  CHECK(float_to_fp8_e4m3fn(0.0029296875f) == 0x02);   // 1.5 · min subnormal ties to the even 2
}

TEST_CASE("float8_e5m2 table facts (§B.3)") {
  CHECK(fp8_e5m2_to_float(0x7B) == 57344.0f);
  CHECK(fp8_e5m2_to_float(0xFB) == -57344.0f);
  CHECK(fp8_e5m2_to_float(0x04) == std::ldexp(1.0f, -14));   // min normal
  CHECK(fp8_e5m2_to_float(0x03) == 0.75f * std::ldexp(1.0f, -14));  // max subnormal
  CHECK(fp8_e5m2_to_float(0x01) == std::ldexp(1.0f, -16));   // min subnormal
  CHECK(fp8_e5m2_to_float(0x3C) == 1.0f);
  CHECK(fp8_e5m2_to_float(0x3D) == 1.25f);  // epsilon 2^-2
  CHECK(fp8_e5m2_to_float(0x7C) == std::numeric_limits<float>::infinity());
  CHECK(fp8_e5m2_to_float(0xFC) == -std::numeric_limits<float>::infinity());
  for (int c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) CHECK(std::isnan(fp8_e5m2_to_float(static_cast<uint8_t>(c))));
  // Overflow: |x| ≥ 61440 rounds past 57344; satfinite gives ±57344, non-saturating ±Inf.
  CHECK(float_to_fp8_e5m2(61439.996f) == 0x7B);
  CHECK(float_to_fp8_e5m2(61439.996f, false) == 0x7B);
  CHECK(float_to_fp8_e5m2(61440.0f) == 0x7B);
  CHECK(float_to_fp8_e5m2(61440.0f, false) == 0x7C);
  CHECK(float_to_fp8_e5m2(-61440.0f, false) == 0xFC);
  CHECK(float_to_fp8_e5m2(std::numeric_limits<float>::infinity()) == 0x7B);
  CHECK(float_to_fp8_e5m2(-std::numeric_limits<float>::infinity(), false) == 0xFC);
  CHECK(std::isnan(fp8_e5m2_to_float(float_to_fp8_e5m2(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("encoding agrees with the brute-force nearest-even reference") {
  SUBCASE("float16") { check_encode_against_reference(half_codec(), false); }
  SUBCASE("bfloat16") { check_encode_against_reference(bf16_codec(), false); }
  SUBCASE("float8_e4m3fn satfinite") { check_encode_against_reference(e4m3_codec(), true); }
  SUBCASE("float8_e4m3fn non-saturating") { check_encode_against_reference(e4m3_codec(), false); }
  SUBCASE("float8_e5m2 satfinite") { check_encode_against_reference(e5m2_codec(), true); }
  SUBCASE("float8_e5m2 non-saturating") { check_encode_against_reference(e5m2_codec(), false); }
}

TEST_CASE("bfloat16 encoding equals the spec's RNE formula on a sweep of float32 bit patterns") {
  int failures = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4093) {
    const auto bits = static_cast<uint32_t>(u);
    const float x = std::bit_cast<float>(bits);
    const uint16_t got = float_to_bfloat16(x);
    if (std::isnan(x)) {
      if (!std::isnan(bfloat16_to_float(got)) && failures++ < 5) FAIL_CHECK("NaN " << hex(bits));
      continue;
    }
    const auto expected = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    if (got != expected && failures++ < 5)
      FAIL_CHECK(hex(bits) << " gave " << hex(got) << ", expected " << hex(expected));
  }
  CHECK(failures == 0);
}

#ifdef __F16C__
TEST_CASE("float16 encoding equals the F16C instruction") {
  const NarrowTable t = weft_test::make_table(weft_test::kHalfSpec);
  std::vector<float> xs = encoding_inputs(t);
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4093) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  int failures = 0;
  for (float x : xs) {
    const auto hw = static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    const uint16_t got = float_to_half(x);
    const bool ok = std::isnan(x) ? std::isnan(half_to_float(got)) : got == hw;
    if (!ok && failures++ < 5)
      FAIL_CHECK(hex(bits_of(x)) << " gave " << hex(got) << ", F16C gives " << hex(hw));
    if (!std::isnan(x)) {
      const float hw_back = _cvtsh_ss(hw);
      if (bits_of(hw_back) != bits_of(half_to_float(hw)) && failures++ < 5)
        FAIL_CHECK("decode of " << hex(hw) << " differs from F16C");
    }
  }
  CHECK(failures == 0);
}
#endif

TEST_CASE("tensor conversions float32 <-> float16 / bfloat16 give the scalar functions' bits at every level") {
  // The contiguous conversion loops take vector kernels where the CPU has them
  // (tensor/cpu/convert_kernels.h); every code and the encoding inputs above (an odd count, so
  // the last partial vector is covered) must come out as float_to_half / float_to_bfloat16 and
  // half_to_float / bfloat16_to_float give them.
  std::vector<float> xs = encoding_inputs(weft_test::make_table(weft_test::kHalfSpec));
  if (xs.size() % 8 == 0) xs.push_back(1.0f);
  std::vector<uint16_t> codes(65536 + 5);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i * 40503u);  // every code, shuffled
  const Tensor floats = from_blob(xs.data(), {static_cast<int64_t>(xs.size())}, kFloat32);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    for (const DType narrow : {kFloat16, kBFloat16}) {
      CAPTURE(narrow);
      const bool half = narrow == kFloat16;
      const Tensor encoded = floats.to(narrow);
      const auto* got = static_cast<const uint16_t*>(encoded.data_ptr());
      int failures = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const uint16_t want = half ? float_to_half(xs[i]) : float_to_bfloat16(xs[i]);
        const bool ok = std::isnan(xs[i]) ? std::isnan(half ? half_to_float(got[i]) : bfloat16_to_float(got[i]))
                                          : got[i] == want;
        if (!ok && failures++ < 5) FAIL_CHECK(hex(bits_of(xs[i])) << " gave " << hex(got[i]) << ", expected " << hex(want));
      }
      const Tensor decoded = from_blob(codes.data(), {static_cast<int64_t>(codes.size())}, narrow).to(kFloat32);
      const auto* back = decoded.data<float>();
      for (size_t i = 0; i < codes.size(); ++i) {
        const float want = half ? half_to_float(codes[i]) : bfloat16_to_float(codes[i]);
        const bool ok = std::isnan(want) ? std::isnan(back[i]) : bits_of(back[i]) == bits_of(want);
        if (!ok && failures++ < 5) FAIL_CHECK("decode of " << hex(codes[i]) << " gave " << hex(bits_of(back[i])));
      }
      CHECK(failures == 0);
    }
  }
}
