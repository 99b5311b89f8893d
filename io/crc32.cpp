// CRC-32 by slicing by 8, beside its byte-at-a-time reference (io/crc32.h).
#include "io/crc32.h"

#include <array>
#include <bit>
#include <cstring>

namespace weft::io {

namespace {

static_assert(std::endian::native == std::endian::little, "crc32 reads eight bytes as a little-endian word");

constexpr uint32_t kPolynomial = 0xEDB88320u;  // reflected

// kTables[0][n]: the CRC register after shifting byte n through it; kTables[k][n]: after byte n
// and then k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

const Tables& tables() {
  static const Tables t = [] {
    Tables out{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? kPolynomial ^ (c >> 1) : c >> 1;
      out[0][n] = c;
    }
    for (size_t k = 1; k < out.size(); ++k)
      for (uint32_t n = 0; n < 256; ++n) out[k][n] = (out[k - 1][n] >> 8) ^ out[0][out[k - 1][n] & 0xFF];
    return out;
  }();
  return t;
}

}  // namespace

uint32_t crc32_bytewise(const uint8_t* data, size_t size, uint32_t crc) {
  const auto& byte = tables()[0];
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = byte[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
  const Tables& t = tables();
  crc = ~crc;
  for (; size >= 8; data += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    // The register meets the first four bytes; each byte's lookup adds what it contributes after
    // the bytes that follow it in this step.
    const auto low = static_cast<uint32_t>(word) ^ crc, high = static_cast<uint32_t>(word >> 32);
    crc = t[7][low & 0xFF] ^ t[6][(low >> 8) & 0xFF] ^ t[5][(low >> 16) & 0xFF] ^ t[4][low >> 24] ^
          t[3][high & 0xFF] ^ t[2][(high >> 8) & 0xFF] ^ t[1][(high >> 16) & 0xFF] ^ t[0][high >> 24];
  }
  for (; size > 0; ++data, --size) crc = t[0][(crc ^ *data) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace weft::io
