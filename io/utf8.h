// UTF-8 for the JSON readers, the tokenizer and the examples: stepping over sequences, decoding and
// encoding code points, checking text, and turning arbitrary bytes into valid UTF-8 the way the
// `tokenizers` library (Rust's from_utf8_lossy) does.
//
// "Valid" is RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF. An invalid
// stretch is replaced per maximal subpart (Unicode chapter 3, "U+FFFD substitution of maximal
// subparts"): a lead byte and the continuation bytes that could still have completed it form one
// U+FFFD; any other bad byte is one U+FFFD by itself. So E2 82 gives one U+FFFD, E0 80 two.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft::io {

struct Utf8Step {
  size_t length;  // bytes of the sequence, or of the maximal invalid subpart; at least 1
  bool valid;
};

// The sequence starting at s[pos] (pos < s.size()).
Utf8Step utf8_step(std::string_view s, size_t pos);

// The code point of the valid sequence of `length` bytes at p.
char32_t decode_utf8(const char* p, size_t length);

// Appends the UTF-8 bytes of `cp` (at most U+10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t cp);

// The byte offset of the first invalid sequence, or std::string_view::npos when s is valid.
size_t find_invalid_utf8(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

// `bytes` with every maximal invalid subpart replaced by U+FFFD.
std::string to_valid_utf8(std::string_view bytes);

}  // namespace weft::io
