// Test helpers that write DEFLATE streams and gzip members by hand, bit by bit, straight from
// RFC 1951 and RFC 1952: the independent side of the gunzip tests (test_gzip.cpp) and the gzip
// files of the IDX tests. Nothing here calls weft's decoder; the CRC-32 is weft's, which
// test_crc32.cpp checks against the standard check value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/crc32.h"

namespace weft::testing {

// Packs bits least significant first into bytes (RFC 1951 3.1.1).
class BitWriter {
 public:
  // The low n bits of value, least significant first (header fields, extra bits).
  void bits(uint32_t value, int n) {
    for (int i = 0; i < n; ++i) bit((value >> i) & 1);
  }
  // A Huffman code of len bits, most significant bit first.
  void code(uint32_t value, int len) {
    for (int i = len - 1; i >= 0; --i) bit((value >> i) & 1);
  }
  void align() {
    while (used_ != 0) bit(0);
  }
  void byte(uint8_t b) { bits(b, 8); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void bit(uint32_t b) {
    if (used_ == 0) bytes_.push_back(0);
    bytes_.back() = static_cast<uint8_t>(bytes_.back() | (b << used_));
    used_ = (used_ + 1) % 8;
  }

  std::vector<uint8_t> bytes_;
  int used_ = 0;
};

// The canonical code of each symbol given the code lengths (RFC 1951 3.2.2, its three steps).
inline std::vector<uint32_t> canonical_codes(const std::vector<int>& lengths) {
  int max_len = 0;
  for (int l : lengths) max_len = std::max(max_len, l);
  std::vector<int> count(static_cast<size_t>(max_len) + 1, 0);
  for (int l : lengths)
    if (l > 0) ++count[static_cast<size_t>(l)];
  std::vector<uint32_t> next(static_cast<size_t>(max_len) + 1, 0);
  uint32_t code = 0;
  for (int bits = 1; bits <= max_len; ++bits) {
    code = (code + static_cast<uint32_t>(count[static_cast<size_t>(bits) - 1])) << 1;
    next[static_cast<size_t>(bits)] = code;
  }
  std::vector<uint32_t> codes(lengths.size(), 0);
  for (size_t s = 0; s < lengths.size(); ++s)
    if (lengths[s] > 0) codes[s] = next[static_cast<size_t>(lengths[s])]++;
  return codes;
}

// The fixed literal/length code (RFC 1951 3.2.6) of `symbol`, written to w.
inline void fixed_symbol(BitWriter& w, int symbol) {
  if (symbol < 144) w.code(0x30 + static_cast<uint32_t>(symbol), 8);
  else if (symbol < 256) w.code(0x190 + static_cast<uint32_t>(symbol - 144), 9);
  else if (symbol < 280) w.code(static_cast<uint32_t>(symbol - 256), 7);
  else w.code(0xC0 + static_cast<uint32_t>(symbol - 280), 8);
}

// A DEFLATE stream of stored blocks holding `data` (at most 65535 bytes a block; one empty block
// for empty data).
inline std::vector<uint8_t> stored_deflate(const std::vector<uint8_t>& data, size_t block = 65535) {
  BitWriter w;
  size_t at = 0;
  do {
    const size_t n = std::min(block, data.size() - at);
    w.bits(at + n == data.size() ? 1 : 0, 1);  // BFINAL
    w.bits(0, 2);                              // BTYPE 00
    w.align();
    w.bits(static_cast<uint32_t>(n), 16);
    w.bits(static_cast<uint32_t>(~n & 0xFFFF), 16);
    for (size_t i = 0; i < n; ++i) w.byte(data[at + i]);
    at += n;
  } while (at < data.size());
  return w.bytes();
}

// A gzip member: the minimal 10-byte header (no optional fields), `deflate`, then the CRC-32 and
// size of `original`, the bytes that stream decodes to.
inline std::vector<uint8_t> gzip_member(const std::vector<uint8_t>& deflate, const std::vector<uint8_t>& original) {
  std::vector<uint8_t> out;
  out.reserve(10 + deflate.size() + 8);
  for (uint8_t b : {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3}) out.push_back(b);  // ID1 ID2 CM FLG MTIME XFL OS
  out.insert(out.end(), deflate.begin(), deflate.end());
  const uint32_t crc = io::crc32(original.data(), original.size());
  const auto size = static_cast<uint32_t>(original.size());
  for (uint32_t v : {crc, size})
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}

// `data` as a gzip file of stored blocks.
inline std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  return gzip_member(stored_deflate(data), data);
}

inline std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace weft::testing
