// UTF-8 stepping, decoding and lossy repair (see utf8.h).
#include "io/utf8.h"

namespace weft::io {

Utf8Step utf8_step(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {1, true};
  size_t length;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // below is overlong
    if (b0 == 0xED) hi = 0x9F;  // above are the UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // below is overlong
    if (b0 == 0xF4) hi = 0x8F;  // above is past U+10FFFF
  } else {
    return {1, false};  // a continuation byte, C0/C1 (always overlong) or F5..FF
  }
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= s.size()) return {i, false};
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if (b < lo || b > hi) return {i, false};
    lo = 0x80, hi = 0xBF;
  }
  return {length, true};
}

char32_t decode_utf8(const char* p, size_t length) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  switch (length) {
    case 1: return u[0];
    case 2: return (char32_t(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3: return (char32_t(u[0] & 0x0F) << 12) | (char32_t(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    default:
      return (char32_t(u[0] & 0x07) << 18) | (char32_t(u[1] & 0x3F) << 12) | (char32_t(u[2] & 0x3F) << 6) |
             (u[3] & 0x3F);
  }
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t find_invalid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = utf8_step(s, pos);
    if (!step.valid) return pos;
    pos += step.length;
  }
  return std::string_view::npos;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, pos);
    if (step.valid) {
      out.append(bytes.data() + pos, step.length);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    pos += step.length;
  }
  return out;
}

}  // namespace weft::io
