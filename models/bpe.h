// The byte-level BPE model: one pre-tokenized word (raw bytes) in, token ids out.
//
// A word starts as one symbol per byte (the byte's token), then the adjacent pair with the lowest
// merge rank is merged, again and again, until no adjacent pair has a merge; among equal ranks
// (the same pair twice) the leftmost goes first. A min-heap of candidate pairs, each checked
// against the current symbols when it comes out (a merge nearby may have made it stale), makes
// that O(n log n) in the word's length — the way the `tokenizers` library does it, so the ids are
// its ids. With ignore_merges (Llama 3), a word that is itself in the vocabulary is that token.
//
// Results are cached per word (raw bytes) up to a bound on the number of words; words longer than
// kMaxCachedWordBytes, and new words once the cache is full, are merged without being kept, so the
// cache's memory stays bounded whatever the text. The cache is guarded by a mutex, so one Bpe may
// serve many threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/string_table.h"

namespace weft::models {

// Hashing for maps keyed by std::string that are looked up by std::string_view without building a
// string (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

class Bpe {
 public:
  static constexpr size_t kMaxCachedWordBytes = 256;
  struct Merge {
    int32_t left, right, merged;  // token ids
  };
  struct Options {
    bool ignore_merges = false;
    std::optional<int32_t> unk_id;  // the token of a byte that has none; without it, an error
    bool fuse_unk = false;          // adjacent unknown bytes become one unk token
    size_t cache_capacity = 10000;
  };

  // `token_bytes` holds, per id, the raw bytes the token stands for; `vocab_ids` are the ids the
  // model's words are made of (the tokens whose every character is a byte-level character);
  // `merges` are in rank order. All are validated by the caller.
  Bpe(StringTable token_bytes, std::span<const int32_t> vocab_ids, const std::vector<Merge>& merges, Options options);

  // Appends the ids of `word` (non-empty raw bytes) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The raw bytes of every id, as decoding emits them.
  const StringTable& token_bytes() const { return bytes_; }

 private:
  struct RankedMerge {
    uint32_t rank;
    int32_t merged;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const RankedMerge* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  StringTable bytes_;
  StringIndex vocab_;  // over bytes_: a word's bytes to its id
  std::unordered_map<uint64_t, RankedMerge> merges_;
  int32_t byte_ids_[256];  // the token of each single byte, or -1
  Options options_;

  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace weft::models
