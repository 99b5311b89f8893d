// TextStream: the pieces it gives out, token by token, on a vocabulary where token b is the byte b,
// so every UTF-8 boundary case is written by hand: a character split over tokens waits for its
// last byte; an invalid byte shows as U+FFFD once what follows proves it invalid; what is still
// held at the end comes out of finish(); the pieces always add up to the whole decode.
#include <doctest/doctest.h>

#include "tokenizer_test_helpers.h"

using namespace weft;
using tokenizer_test::TinyTokenizer;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

// The piece each byte-token gives, then finish()'s rest as the last element.
std::vector<std::string> stream(const models::Tokenizer& tok, const std::vector<int32_t>& ids) {
  models::TextStream text(tok);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(text.push(id));
  pieces.push_back(text.finish());
  return pieces;
}

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> ids;
  for (const char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

}  // namespace

TEST_CASE("TextStream holds a character split over tokens until its last byte") {
  const models::Tokenizer tok = TinyTokenizer{}.load();
  using P = std::vector<std::string>;
  CHECK(stream(tok, bytes_of("ab")) == P{"a", "b", ""});
  CHECK(stream(tok, bytes_of("\xC3\xA9")) == P{"", "\xC3\xA9", ""});                      // é
  CHECK(stream(tok, bytes_of("x\xF0\x9F\x98\x80y")) == P{"x", "", "", "", "\xF0\x9F\x98\x80", "y", ""});  // 😀
}

TEST_CASE("TextStream shows an invalid byte as U+FFFD once the next token proves it, or at finish") {
  const models::Tokenizer tok = TinyTokenizer{}.load();
  using P = std::vector<std::string>;
  // A lead byte followed by an ASCII letter: the lead byte can never be completed.
  CHECK(stream(tok, bytes_of("\xC3" "a")) == P{"", kReplacement + "a", ""});
  // A lone continuation byte decodes as U+FFFD at once, but the stream cannot tell it from a
  // character still arriving, so it waits.
  CHECK(stream(tok, bytes_of("a\x80")) == P{"a", "", kReplacement});
  // A generation that stops in the middle of a character.
  CHECK(stream(tok, bytes_of("\xF0\x9F")) == P{"", "", kReplacement});
}

TEST_CASE("TextStream's pieces add up to the decode of all the tokens, special tokens skipped") {
  TinyTokenizer t;
  t.added_tokens = R"([{"id":256,"content":"<|end|>","single_word":false,"lstrip":false,"rstrip":false,)"
                   R"("normalized":false,"special":true}])";
  const models::Tokenizer tok = t.load();
  const std::string text = "na\xC3\xAFve \xE2\x82\xAC \xF0\x9F\x98\x80!\xC3";
  std::vector<int32_t> ids = bytes_of(text);
  ids.insert(ids.begin() + 3, 256);
  const std::vector<std::string> pieces = stream(tok, ids);
  std::string joined;
  for (size_t i = 0; i + 1 < pieces.size(); ++i) {
    CHECK(pieces[i].find(kReplacement) == std::string::npos);  // only the unfinished last byte is invalid
    joined += pieces[i];
  }
  CHECK(pieces.back() == kReplacement);
  joined += pieces.back();
  CHECK(joined == tok.decode(ids, /*skip_special_tokens=*/true));
  CHECK(joined == "na\xC3\xAFve \xE2\x82\xAC \xF0\x9F\x98\x80!" + kReplacement);
  // Kept when asked: the special token's text is part of the stream.
  models::TextStream with_special(tok, /*skip_special_tokens=*/false);
  std::string all;
  for (const int32_t id : ids) all += with_special.push(id);
  all += with_special.finish();
  CHECK(all == tok.decode(ids, /*skip_special_tokens=*/false));
  CHECK(all.find("<|end|>") != std::string::npos);
}
