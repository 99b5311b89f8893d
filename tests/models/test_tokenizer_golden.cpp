// The tokenizer against the `tokenizers` library: the two committed byte-level BPE tokenizers
// (GPT-2 and Llama 3 style) give the library's ids on a few hundred crafted and random strings
// (full id lists), and on two corpora of several MB (per-chunk hashes): the KJV Bible and a
// generated Unicode text. Decoding gives the library's text, invalid UTF-8 included, and
// decode(encode(s)) == s. Goldens: scripts/make_test_tokenizers.py.
#include <doctest/doctest.h>

#include <cinttypes>
#include <cstdio>

#include "tokenizer_test_helpers.h"

using namespace weft;
using namespace tokenizer_test;

namespace {

const models::Tokenizer& tokenizer(const std::string& name) {
  static const models::Tokenizer gpt2 = models::Tokenizer::from_file(data_dir() / "gpt2_tokenizer.json");
  static const models::Tokenizer llama3 = models::Tokenizer::from_file(data_dir() / "llama3_tokenizer.json");
  return name == "gpt2" ? gpt2 : llama3;
}

void check_encodings(const models::Tokenizer& tok, const io::JsonValue& cases, bool round_trip) {
  for (const auto& c : cases.as_array()) {
    const std::string& text = c.find("text")->as_string();
    CAPTURE(text);
    const std::vector<int32_t> ids = tok.encode(text, false);
    CHECK(ids == ids_of(*c.find("ids")));
    const io::JsonValue* with_special = c.find("ids_with_special");  // absent: the same ids
    CHECK(tok.encode(text, true) == (with_special ? ids_of(*with_special) : ids));
    // Decoding gives the text back, except where an added token changes it: the whitespace an
    // lstrip/rstrip token (" zq ", "<|tool|>") takes is not emitted, and "Ġzq" decodes as " zq".
    if (round_trip && text.find("zq") == std::string::npos && text.find("<|tool|>") == std::string::npos)
      CHECK(tok.decode(ids) == text);
  }
}

void check_corpus(const models::Tokenizer& tok, std::string_view text, const io::JsonValue& expected) {
  const size_t chunk_bytes = static_cast<size_t>(goldens().find("chunk_bytes")->as_integer());
  const std::vector<std::string_view> parts = chunks(text, chunk_bytes);
  REQUIRE(parts.size() == expected.as_array().size());
  int64_t tokens = 0, mismatches = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::vector<int32_t> ids = tok.encode(parts[i], false);
    const auto& want = expected.as_array()[i];
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016" PRIx64, fnv1a(ids));
    if (static_cast<int64_t>(ids.size()) != want.find("tokens")->as_integer() || hash != want.find("fnv1a")->as_string()) {
      if (mismatches++ < 3) FAIL_CHECK("chunk " << i << " differs; it starts: " << std::string(parts[i].substr(0, 80)));
    }
    tokens += static_cast<int64_t>(ids.size());
    // A sample of chunks round-trips (not those where an added token changes the text, see above).
    if (i % 8 == 0 && parts[i].find("zq") == std::string_view::npos) CHECK(tok.decode(ids) == parts[i]);
  }
  CHECK(mismatches == 0);
  int64_t expected_tokens = 0;
  for (const auto& chunk : expected.as_array()) expected_tokens += chunk.find("tokens")->as_integer();
  CHECK(tokens == expected_tokens);
}

}  // namespace

TEST_CASE("Tokenizer gives the tokenizers library's ids on crafted and random strings") {
  for (const std::string name : {"gpt2", "llama3"}) {
    CAPTURE(name);
    const auto& golden = *goldens().find(name);
    CHECK(tokenizer(name).vocab_size() == golden.find("vocab_size")->as_integer());
    check_encodings(tokenizer(name), *golden.find("encodings"), true);
  }
}

TEST_CASE("Tokenizer's ByteLevel add_prefix_space prefixes every stretch between added tokens") {
  // The GPT-2 tokenizer with add_prefix_space switched on, against the library's ids for the same.
  const std::string path = (data_dir() / "gpt2_tokenizer.json").string();
  std::string json;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) json.append(buf, n);
    std::fclose(f);
  }
  const std::string off = R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false)";
  const size_t at = json.find(off);
  REQUIRE(at != std::string::npos);
  json.replace(at, off.size(), R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true)");
  const models::Tokenizer tok = models::Tokenizer::from_json(json);
  check_encodings(tok, *goldens().find("gpt2_add_prefix_space")->find("encodings"), false);
  CHECK(tok.decode(tok.encode("x")) == " x");  // the prefixed space is real text after that
}

TEST_CASE("Tokenizer decodes as the tokenizers library does, invalid UTF-8 included") {
  for (const std::string name : {"gpt2", "llama3"}) {
    CAPTURE(name);
    for (const auto& c : goldens().find(name)->find("decodings")->as_array()) {
      const std::vector<int32_t> ids = ids_of(*c.find("ids"));
      CAPTURE(ids);
      CHECK(tokenizer(name).decode(ids, false) == c.find("text")->as_string());
      CHECK(tokenizer(name).decode(ids, true) == c.find("text_skipping_special")->as_string());
    }
  }
}

TEST_CASE("Tokenizer gives the tokenizers library's ids on the KJV Bible (4.3 MB)") {
  const std::string text = kjv_text();
  REQUIRE_MESSAGE(!text.empty(), "the `bible` program (Debian's bible-kjv) is missing: scripts/install-deps.sh installs it");
  REQUIRE(static_cast<int64_t>(text.size()) == goldens().find("kjv_bytes")->as_integer());
  for (const std::string name : {"gpt2", "llama3"}) {
    CAPTURE(name);
    check_corpus(tokenizer(name), text, *goldens().find(name)->find("kjv"));
  }
}

TEST_CASE("Tokenizer gives the tokenizers library's ids on 1 MB of generated Unicode text") {
  const std::string text = generated_text(2026, 1 << 20);
  REQUIRE(static_cast<int64_t>(text.size()) == goldens().find("unicode_corpus_bytes")->as_integer());
  for (const std::string name : {"gpt2", "llama3"}) {
    CAPTURE(name);
    check_corpus(tokenizer(name), text, *goldens().find(name)->find("unicode_corpus"));
  }
}
