// The pieces below BPE, against hand-worked expectations: the GPT-2 and Llama 3 split scanners
// (each expectation follows the regex's alternation order and backtracking by hand), the
// character classes, GPT-2's byte-level alphabet, and UTF-8 stepping and repair.
#include <doctest/doctest.h>

#include "models/byte_level.h"
#include "models/char_class.h"
#include "models/pretokenizer.h"
#include "tokenizer_test_helpers.h"

using namespace weft::models;
using Pieces = std::vector<std::string>;

namespace {

Pieces split(std::string_view text, SplitPattern pattern) {
  std::vector<std::string_view> views;
  split_by_pattern(text, pattern, views);
  return Pieces(views.begin(), views.end());
}

}  // namespace

TEST_CASE("split_by_pattern with GPT-2's pattern") {
  const auto g = [](std::string_view text) { return split(text, SplitPattern::kGpt2); };
  CHECK(g("Hello world") == Pieces{"Hello", " world"});
  CHECK(g("I'm they'll we've he'd it's") == Pieces{"I", "'m", " they", "'ll", " we", "'ve", " he", "'d", " it", "'s"});
  CHECK(g("I'M") == Pieces{"I", "'", "M"});  // case-sensitive contractions
  CHECK(g("'sam") == Pieces{"'s", "am"});
  CHECK(g("x 123 4.5") == Pieces{"x", " 123", " 4", ".", "5"});
  CHECK(g("a  b") == Pieces{"a", " ", " b"});      // \s+(?!\S) gives one space back
  CHECK(g("a   ") == Pieces{"a", "   "});          // at the end it keeps them all
  CHECK(g("\t\ta") == Pieces{"\t", "\t", "a"});    // a lone tab before a letter: \s+
  CHECK(g("a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(g(" !?x") == Pieces{" !?", "x"});
  CHECK(g(" \u0301x") == Pieces{" \u0301", "x"});  // a combining mark is neither letter nor number
  CHECK(g("caf\u00e9 \u65e5\u672c") == Pieces{"caf\u00e9", " \u65e5\u672c"});
  CHECK(g("\u00b2\u0663x") == Pieces{"\u00b2\u0663", "x"});  // superscript and Arabic-Indic digits
  CHECK(g("a\u3000b") == Pieces{"a", "\u3000", "b"});        // U+3000 is whitespace
  CHECK(g("a \u3000b") == Pieces{"a", " ", "\u3000", "b"});
  CHECK(g("").empty());
}

TEST_CASE("split_by_pattern with Llama 3's pattern") {
  const auto l = [](std::string_view text) { return split(text, SplitPattern::kLlama3); };
  CHECK(l("Hello world") == Pieces{"Hello", " world"});
  CHECK(l("I'M HE'S You'Re") == Pieces{"I", "'M", " HE", "'S", " You", "'Re"});
  CHECK(l("x'\u017fy") == Pieces{"x", "'\u017f", "y"});  // U+017F case-folds to 's'
  CHECK(l("'hello") == Pieces{"'hello"});                  // [^\r\n\p{L}\p{N}]?\p{L}+
  CHECK(l("12345 1234567") == Pieces{"123", "45", " ", "123", "456", "7"});
  CHECK(l("a  \n\n  b") == Pieces{"a", "  \n\n", " ", " b"});  // \s*[\r\n]+ up to the last break
  CHECK(l("\t\ta") == Pieces{"\t", "\ta"});
  CHECK(l("hello.\n\nnext") == Pieces{"hello", ".\n\n", "next"});  // punctuation takes the breaks
  CHECK(l("x ?!\r\n y") == Pieces{"x", " ?!\r\n", " y"});
  CHECK(l("\n") == Pieces{"\n"});
  CHECK(l("a \n") == Pieces{"a", " \n"});
  CHECK(l("a  ") == Pieces{"a", "  "});
  CHECK(l("\r\na") == Pieces{"\r\n", "a"});   // no letter may follow \r or \n in one piece
  CHECK(l(".5") == Pieces{".", "5"});
  CHECK(l("\u4e2d\u6587 \u6587") == Pieces{"\u4e2d\u6587", " \u6587"});
}

TEST_CASE("split_pattern_from_regex knows the two patterns as tokenizer.json spells them") {
  SplitPattern p = SplitPattern::kGpt2;
  CHECK(split_pattern_from_regex(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)", p));
  CHECK(p == SplitPattern::kLlama3);
  CHECK(split_pattern_from_regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", p));
  CHECK(p == SplitPattern::kGpt2);
  CHECK_FALSE(split_pattern_from_regex(R"(\w+|[^\w\s]+)", p));
}

TEST_CASE("char_class gives \\p{L}, \\p{N} and White_Space; ASCII inline equals the table") {
  using detail::CharClass;
  for (char32_t c = 0; c < 0x80; ++c) CHECK(detail::char_class(c) == detail::non_ascii_char_class(c));
  CHECK(detail::char_class(U'a') == CharClass::kLetter);
  CHECK(detail::char_class(U'7') == CharClass::kNumber);
  CHECK(detail::char_class(U'\v') == CharClass::kSpace);
  CHECK(detail::char_class(U'\x1c') == CharClass::kOther);  // Python's isspace() says otherwise
  CHECK(detail::char_class(U'_') == CharClass::kOther);
  CHECK(detail::char_class(0xE9) == CharClass::kLetter);     // é
  CHECK(detail::char_class(0xAA) == CharClass::kLetter);     // ª (Lo)
  CHECK(detail::char_class(0xB2) == CharClass::kNumber);     // ² (No)
  CHECK(detail::char_class(0x2167) == CharClass::kNumber);   // Ⅷ (Nl)
  CHECK(detail::char_class(0x0663) == CharClass::kNumber);   // Arabic-Indic three (Nd)
  CHECK(detail::char_class(0x85) == CharClass::kSpace);
  CHECK(detail::char_class(0xA0) == CharClass::kSpace);
  CHECK(detail::char_class(0x200B) == CharClass::kOther);    // zero width space is no White_Space
  CHECK(detail::char_class(0x0301) == CharClass::kOther);    // a combining mark (Mn)
  CHECK(detail::char_class(0x4E00) == CharClass::kLetter);
  CHECK(detail::char_class(0x1F600) == CharClass::kOther);
  CHECK(detail::char_class(0x31350) == CharClass::kLetter);  // CJK Extension H (Unicode 15)
  CHECK(detail::char_class(0x10FFFF) == CharClass::kOther);
  CHECK(detail::char_class(0x110000) == CharClass::kOther);
  CHECK(detail::char_class(0xD800) == CharClass::kOther);
}

TEST_CASE("The byte-level alphabet is GPT-2's bytes_to_unicode") {
  CHECK(detail::byte_to_char('a') == U'a');
  CHECK(detail::byte_to_char('!') == U'!');
  CHECK(detail::byte_to_char(0xE9) == 0xE9);
  CHECK(detail::byte_to_char(0) == 0x100);
  CHECK(detail::byte_to_char('\n') == 0x10A);
  CHECK(detail::byte_to_char(' ') == 0x120);    // 'Ġ'
  CHECK(detail::byte_to_char(0x7F) == 0x121);
  CHECK(detail::byte_to_char(0xA0) == 0x142);
  CHECK(detail::byte_to_char(0xAD) == 0x143);   // the last of the 68 moved bytes
  for (int b = 0; b < 256; ++b) CHECK(detail::char_to_byte(detail::byte_to_char(static_cast<uint8_t>(b))) == b);
  CHECK(detail::char_to_byte(0x144) == -1);
  CHECK(detail::char_to_byte(' ') == -1);       // a space is never a vocabulary character
  CHECK(detail::token_to_bytes("a\u0120b\u010a") == "a b\n");
  CHECK(detail::token_to_bytes("<|x|>") == "<|x|>");
  CHECK(detail::token_to_bytes("\u65e5") == std::nullopt);
}
