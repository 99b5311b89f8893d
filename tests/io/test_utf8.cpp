// UTF-8 (io/utf8.h): stepping, decoding, encoding, and the lossy repair the tokenizer's decode uses,
// on hand-written byte sequences for every kind of invalid stretch.
#include <doctest/doctest.h>

#include <string>

#include "io/all.h"

using namespace weft;

TEST_CASE("to_valid_utf8 replaces each maximal invalid subpart with one U+FFFD") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(io::to_valid_utf8("abc") == "abc");
  CHECK(io::to_valid_utf8("\xE2\x82\xAC") == "\xE2\x82\xAC");  // €
  CHECK(io::to_valid_utf8("\xE2\x82") == r);                  // a cut-off sequence: one
  CHECK(io::to_valid_utf8("\xE2\x82" "a") == r + "a");
  CHECK(io::to_valid_utf8("\xF0\x9F\x98") == r);
  CHECK(io::to_valid_utf8("\xE0\x80") == r + r);              // E0 80 is overlong: two
  CHECK(io::to_valid_utf8("\xED\xA0\x80") == r + r + r);      // a surrogate: three
  CHECK(io::to_valid_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // past U+10FFFF
  CHECK(io::to_valid_utf8("\xC0\xAF") == r + r);
  CHECK(io::to_valid_utf8("\x80\x80") == r + r);
  CHECK(io::to_valid_utf8("\xE1\x80\xE1") == r + r);
  CHECK(io::find_invalid_utf8("ab\xC3\xA9") == std::string_view::npos);
  CHECK(io::find_invalid_utf8("ab\xC3") == 2);
  CHECK(io::find_invalid_utf8("\xC3\xA9\xFF") == 2);
  CHECK(io::is_valid_utf8("na\xC3\xAFve \xF0\x9F\x98\x80"));
  CHECK_FALSE(io::is_valid_utf8("\xED\xA0\x80"));
}

TEST_CASE("append_utf8 and decode_utf8 are inverse at every sequence length and boundary") {
  for (const char32_t cp : {U'\0', U'a', char32_t(0x7F), char32_t(0x80), char32_t(0x7FF), char32_t(0x800),
                            char32_t(0xD7FF), char32_t(0xE000), char32_t(0xFFFF), char32_t(0x10000),
                            char32_t(0x10FFFF)}) {
    CAPTURE(static_cast<uint32_t>(cp));
    std::string bytes;
    io::append_utf8(bytes, cp);
    const size_t expected_length = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    CHECK(bytes.size() == expected_length);
    const io::Utf8Step step = io::utf8_step(bytes, 0);
    CHECK(step.valid);
    CHECK(step.length == expected_length);
    CHECK(io::decode_utf8(bytes.data(), step.length) == cp);
  }
  std::string euro;
  io::append_utf8(euro, U'\u20AC');
  CHECK(euro == "\xE2\x82\xAC");
}
