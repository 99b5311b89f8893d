// Narrow float encode/decode on the CPU, on the codecs the CUDA kernels share
// (tensor/narrow_codec.h). Decoding goes through tables built once from the codec, so bulk
// conversions are a load per element.
#include "tensor/float_formats.h"

#include <array>
#include <cstddef>

#include "tensor/narrow_codec.h"

namespace weft {
namespace {

template <size_t N, class Decode>
std::array<float, N> decode_table(Decode decode) {
  std::array<float, N> table{};
  for (size_t code = 0; code < N; ++code) table[code] = decode(static_cast<uint32_t>(code));
  return table;
}

}  // namespace

float half_to_float(uint16_t bits) {
  static const auto table = decode_table<65536>([](uint32_t c) { return detail::decode_half(static_cast<uint16_t>(c)); });
  return table[bits];
}

uint16_t float_to_half(float value) { return detail::encode_half(value); }

float fp8_e4m3fn_to_float(uint8_t bits) {
  static const auto table = decode_table<256>([](uint32_t c) { return detail::decode_e4m3(static_cast<uint8_t>(c)); });
  return table[bits];
}

uint8_t float_to_fp8_e4m3fn(float value, bool saturate) { return detail::encode_e4m3(value, saturate); }

float fp8_e5m2_to_float(uint8_t bits) {
  static const auto table = decode_table<256>([](uint32_t c) { return detail::decode_e5m2(static_cast<uint8_t>(c)); });
  return table[bits];
}

uint8_t float_to_fp8_e5m2(float value, bool saturate) { return detail::encode_e5m2(value, saturate); }

}  // namespace weft
