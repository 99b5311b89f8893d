// Helpers of the tokenizer tests: where the committed tokenizers and goldens are, and the two
// corpora scripts/make_test_tokenizers.py hashed, rebuilt here the same way (the KJV text from
// Debian's `bible` program, and the splitmix64-generated Unicode text).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/all.h"
#include "models/byte_level.h"
#include "test_data_dir.h"

namespace tokenizer_test {

inline std::filesystem::path data_dir() { return models_test_data_dir(); }

inline const weft::io::JsonValue& goldens() {
  static const weft::io::JsonValue document = weft::io::read_json_file(data_dir() / "tokenizer_goldens.json", "goldens");
  return document;
}

inline std::vector<int32_t> ids_of(const weft::io::JsonValue& array) {
  std::vector<int32_t> ids;
  for (const auto& v : array.as_array()) ids.push_back(static_cast<int32_t>(v.as_integer()));
  return ids;
}

// The script's SplitMix64.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// The script's generated_text: the same pools, weights and draws.
inline std::string generated_text(uint64_t seed, size_t size) {
  struct Range {
    char32_t lo, hi;
  };
  struct Pool {
    uint64_t weight;
    std::vector<Range> ranges;  // empty: the snippets
  };
  static const std::vector<Pool> pools = {
      {12, {{0x41, 0x5A}, {0x61, 0x7A}}},
      {6, {{0x20, 0x20}}},
      {3, {{0x30, 0x39}}},
      {3, {{0x09, 0x0D}, {0x20, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x3000, 0x3000}}},
      {3, {{0x21, 0x2F}, {0x3A, 0x40}, {0x5B, 0x60}, {0x7B, 0x7E}}},
      {2, {{0xC0, 0x24F}}},
      {2, {{0x370, 0x4FF}}},
      {2, {{0x4E00, 0x9FFF}, {0x3040, 0x30FF}}},
      {1, {{0x1F300, 0x1FAFF}}},
      {1, {{0x300, 0x36F}}},
      {1, {{0x660, 0x669}, {0x966, 0x96F}, {0xFF10, 0xFF19}, {0xB2, 0xB3}, {0x2160, 0x2188}}},
      {2, {{0x80, 0x10FFFF}}},
      {3, {}},
  };
  static const std::vector<std::string> snippets = {
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'vE", "'\u017f", "'x",
      "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "\r\n", "\n\n", " \n ", "  ", "\u2019s",
      " zq ", "<|endoftext", "\u0120"};
  uint64_t total = 0;
  for (const Pool& p : pools) total += p.weight;
  SplitMix64 rng(seed);
  std::string out;
  while (out.size() < size) {
    uint64_t pick = rng.next() % total;
    const Pool* pool = nullptr;
    for (const Pool& p : pools) {
      if (pick < p.weight) {
        pool = &p;
        break;
      }
      pick -= p.weight;
    }
    if (pool->ranges.empty()) {
      out += snippets[rng.next() % snippets.size()];
      continue;
    }
    const uint64_t length = 1 + rng.next() % 6;
    for (uint64_t i = 0; i < length; ++i) {
      const Range r = pool->ranges[rng.next() % pool->ranges.size()];
      auto cp = static_cast<char32_t>(r.lo + rng.next() % (r.hi - r.lo + 1));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      weft::io::append_utf8(out, cp);
    }
  }
  return out;
}

// The KJV text as `bible -l80` prints it, or "" when the program is missing.
inline std::string kjv_text() {
  FILE* pipe = ::popen("bible -l80 gen1:1-rev22:21 2>/dev/null", "r");
  if (pipe == nullptr) return "";
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
  ::pclose(pipe);
  return text;
}

// The script's chunks: cut after the first newline at or past each `chunk_bytes`.
inline std::vector<std::string_view> chunks(std::string_view text, size_t chunk_bytes) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t newline = start + chunk_bytes < text.size() ? text.find('\n', start + chunk_bytes) : std::string_view::npos;
    const size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

// FNV-1a 64 over the ids' little-endian bytes, as the script computes it.
inline uint64_t fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const int32_t id : ids) {
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

}  // namespace tokenizer_test

namespace tokenizer_test {

// The parts of a small hand-written tokenizer.json; each test changes the parts it is about.
// The vocabulary is byte-level: 'Ġ' is the space, and every one of the 256 bytes has a token
// (ids 0..255, in byte order) unless `all_bytes` is false, followed by `extra_vocab`.
struct TinyTokenizer {
  std::string model_type = "BPE";
  std::string extra_vocab;  // ,"token":id pairs after the byte tokens
  std::string merges = "[]";
  std::string model_fields = R"("dropout":null,"unk_token":null,"continuing_subword_prefix":null,)"
                             R"("end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false)";
  bool all_bytes = true;
  std::string normalizer = "null";
  std::string pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})";
  std::string post_processor = "null";
  std::string decoder = R"({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})";
  std::string added_tokens = "[]";
  std::string root_extra;  // more members of the root, each with a leading comma

  std::string json() const {
    std::string vocab = "{";
    bool first = true;
    for (int b = 0; b < 256; ++b) {
      if (!all_bytes && (b == 'z' || b == 'q')) continue;  // the bytes the unk tests leave out
      std::string spelling;
      weft::io::append_utf8(spelling, weft::models::detail::byte_to_char(static_cast<uint8_t>(b)));
      if (spelling == "\"" || spelling == "\\") spelling = "\\" + spelling;
      vocab += (first ? "\"" : ",\"") + spelling + "\":" + std::to_string(b);
      first = false;
    }
    vocab += extra_vocab + "}";
    return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" + added_tokens +
           R"(,"normalizer":)" + normalizer + R"(,"pre_tokenizer":)" + pre_tokenizer + R"(,"post_processor":)" +
           post_processor + R"(,"decoder":)" + decoder + R"(,"model":{"type":")" + model_type + "\"," +
           model_fields + R"(,"vocab":)" + vocab + R"(,"merges":)" + merges + "}" + root_extra + "}";
  }
  weft::models::Tokenizer load() const { return weft::models::Tokenizer::from_json(json(), "tiny"); }
};

}  // namespace tokenizer_test

namespace tokenizer_test {

// `s` with its one occurrence of `from` replaced by `to` (a test's change to a default part).
inline std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at == std::string::npos) throw std::logic_error("replaced: '" + from + "' is not in the text");
  s.replace(at, from.size(), to);
  return s;
}

}  // namespace tokenizer_test
