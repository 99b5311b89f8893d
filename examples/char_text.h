// A text as a character-level language model sees it: its Unicode codepoints, the vocabulary of
// the distinct ones in codepoint order (so the same text always gives the same ids), and every
// character as its id.
//
// The text must be valid UTF-8: a malformed, overlong or truncated sequence, a surrogate or a
// codepoint above U+10FFFF is refused with the byte offset where it starts, rather than guessed
// at. The vocabulary travels with a checkpoint as its UTF-8 string (vocabulary_text), so a run
// that resumes or samples can check it reads the same characters.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "weft.h"

namespace weft::examples {

struct CharText {
  std::vector<char32_t> vocabulary;  // distinct codepoints, ascending; a character's id is its index
  std::vector<int32_t> ids;          // the text, one id per character
};

// The codepoints of `bytes`, or throws naming `what` and the byte offset of the first bad sequence.
inline std::vector<char32_t> decode_utf8(const std::string& bytes, const std::string& what) {
  std::vector<char32_t> out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const io::Utf8Step step = io::utf8_step(bytes, i);
    if (!step.valid) {
      std::ostringstream byte;
      byte << "0x" << std::hex << static_cast<int>(static_cast<unsigned char>(bytes[i]));
      WEFT_FAIL("[", what, "] expected UTF-8 text, got an invalid byte sequence at byte offset ", i, " (byte ",
                byte.str(), ")");
    }
    out.push_back(io::decode_utf8(bytes.data() + i, step.length));
    i += step.length;
  }
  return out;
}

inline std::string encode_utf8(const std::vector<char32_t>& codepoints) {
  std::string out;
  for (const char32_t cp : codepoints) io::append_utf8(out, cp);
  return out;
}

// Reads and encodes a UTF-8 file (`what` names it in errors).
inline CharText read_char_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.is_open(), "[", what, "] cannot open '", path, "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<char32_t> text = decode_utf8(bytes, what);
  CharText out;
  out.vocabulary = text;
  std::sort(out.vocabulary.begin(), out.vocabulary.end());
  out.vocabulary.erase(std::unique(out.vocabulary.begin(), out.vocabulary.end()), out.vocabulary.end());
  out.ids.reserve(text.size());
  for (char32_t cp : text)
    out.ids.push_back(static_cast<int32_t>(std::lower_bound(out.vocabulary.begin(), out.vocabulary.end(), cp) -
                                           out.vocabulary.begin()));
  return out;
}

// The vocabulary as one UTF-8 string, for a checkpoint's metadata.
inline std::string vocabulary_text(const CharText& text) { return encode_utf8(text.vocabulary); }

// A character as an error message shows it: quoted, or U+XXXX where it is a control character
// (a newline between quotes would break the message's line).
inline std::string shown_character(char32_t cp) {
  if (cp < 0x20 || cp == 0x7f) {
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(cp));
    return code;
  }
  return "'" + encode_utf8({cp}) + "'";
}

inline bool has_character(const CharText& text, char32_t cp) {
  return std::binary_search(text.vocabulary.begin(), text.vocabulary.end(), cp);
}

// The ids of `s`, or the first character of it that the vocabulary lacks (as `missing`, shown).
inline std::vector<int64_t> encode(const CharText& text, const std::string& s, std::string* missing) {
  std::vector<int64_t> ids;
  for (char32_t cp : decode_utf8(s, "encode")) {
    const auto it = std::lower_bound(text.vocabulary.begin(), text.vocabulary.end(), cp);
    if (it == text.vocabulary.end() || *it != cp) {
      *missing = shown_character(cp);
      return {};
    }
    ids.push_back(it - text.vocabulary.begin());
  }
  return ids;
}

}  // namespace weft::examples
