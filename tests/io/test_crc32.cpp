// io::crc32: the standard check value, continuation across calls, and the sliced loop against
// its byte-at-a-time reference at every length and alignment around its eight-byte steps.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "io/crc32.h"

using namespace weft;

TEST_CASE("crc32 gives the standard check value and continues across calls") {
  const std::string text = "123456789";
  const auto* digits = reinterpret_cast<const uint8_t*>(text.data());
  for (auto crc : {io::crc32, io::crc32_bytewise}) {
    CHECK(crc(digits, 9, 0) == 0xCBF43926u);
    CHECK(crc(nullptr, 0, 0) == 0u);
    CHECK(crc(digits + 4, 5, crc(digits, 4, 0)) == 0xCBF43926u);
  }
}

TEST_CASE("crc32 by slices equals the byte-at-a-time reference at every length and alignment") {
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(300);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t start = 0; start < 8; ++start)
    for (size_t length = 0; start + length <= bytes.size(); ++length) {
      const uint8_t* p = bytes.data() + start;
      REQUIRE(io::crc32(p, length) == io::crc32_bytewise(p, length));
    }
  // Continued from a CRC that is not 0, across a split that leaves the sliced loop a tail.
  CHECK(io::crc32(bytes.data() + 13, 200, io::crc32(bytes.data(), 13)) == io::crc32_bytewise(bytes.data(), 213));
}
