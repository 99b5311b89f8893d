// The shared host/device codecs (tensor/narrow_codec.h) against the CPU's conversions of
// tensor/float_formats.h, which test_float_formats.cpp checks against the format definitions:
// float16 and FP8 go through the same encoder, so this pins the decoders' bit construction and
// the bfloat16 pair, which float_formats.h defines separately for its vectorised loops.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>

#include "tensor/all.h"
#include "tensor/narrow_codec.h"

using namespace weft;

namespace {

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

}  // namespace

TEST_CASE("shared decoders give float_formats' value for every code, bit for bit") {
  for (uint32_t c = 0; c < 65536; ++c) {
    CAPTURE(c);
    REQUIRE(same_bits(detail::decode_half(static_cast<uint16_t>(c)), half_to_float(static_cast<uint16_t>(c))));
    REQUIRE(same_bits(detail::decode_bfloat16(static_cast<uint16_t>(c)), bfloat16_to_float(static_cast<uint16_t>(c))));
  }
  for (uint32_t c = 0; c < 256; ++c) {
    CAPTURE(c);
    CHECK(same_bits(detail::decode_e4m3(static_cast<uint8_t>(c)), fp8_e4m3fn_to_float(static_cast<uint8_t>(c))));
    CHECK(same_bits(detail::decode_e5m2(static_cast<uint8_t>(c)), fp8_e5m2_to_float(static_cast<uint8_t>(c))));
  }
}

TEST_CASE("the shared bfloat16 encoder rounds as float_formats' on random floats and the specials") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float v = std::bit_cast<float>(bits(rng));
    CAPTURE(v);
    REQUIRE(detail::encode_bfloat16(v) == float_to_bfloat16(v));
  }
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), 1.00390625f, 1.01171875f})
    CHECK(detail::encode_bfloat16(v) == float_to_bfloat16(v));
}
