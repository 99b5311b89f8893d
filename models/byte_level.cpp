// The byte-level alphabet as two constant tables (see byte_level.h).
#include "models/byte_level.h"

#include <array>

#include "io/utf8.h"

namespace weft::models::detail {
namespace {

constexpr bool shown_as_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

constexpr std::array<char32_t, 256> kByteToChar = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) table[b] = shown_as_itself(b) ? char32_t(b) : next++;
  return table;
}();

constexpr size_t kCharLimit = 0x100 + 68;  // every shown code point is below this

constexpr std::array<int16_t, kCharLimit> kCharToByte = [] {
  std::array<int16_t, kCharLimit> table{};
  for (auto& entry : table) entry = -1;
  for (int b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<int16_t>(b);
  return table;
}();

}  // namespace

char32_t byte_to_char(uint8_t b) { return kByteToChar[b]; }

int char_to_byte(char32_t cp) { return cp < kCharLimit ? kCharToByte[cp] : -1; }

std::optional<std::string> token_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const io::Utf8Step step = io::utf8_step(token, pos);
    if (!step.valid) return std::nullopt;
    const int b = char_to_byte(io::decode_utf8(token.data() + pos, step.length));
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
    pos += step.length;
  }
  return out;
}

}  // namespace weft::models::detail
