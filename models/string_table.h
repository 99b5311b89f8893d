// Strings by id in one buffer, and a string → id index over a chosen set of those ids.
//
// A tokenizer holds its vocabulary twice (the spellings tokenizer.json gives and the raw bytes each
// token decodes to), 50,000 to 200,000 short strings each, and looks them up both ways, for the
// whole life of the program. One std::string and one hash-map node per token cost about a hundred
// bytes of heap each; here a token costs its bytes, 8 bytes of offset and length, and at most 8
// bytes of index (open addressing over ids, at most half the slots full).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::models {

class StringTable {
 public:
  explicit StringTable(size_t size = 0) : spans_(size) {}

  // Gives `id` the string `text` (every id starts empty); setting an id twice keeps the last.
  void set(size_t id, std::string_view text);
  std::string_view operator[](size_t id) const {
    const Span s = spans_[id];
    return {buffer_.data() + s.offset, s.length};
  }
  size_t size() const { return spans_.size(); }

 private:
  struct Span {
    uint32_t offset = 0, length = 0;
  };
  std::string buffer_;
  std::vector<Span> spans_;
};

class StringIndex {
 public:
  StringIndex() = default;
  // Indexes `ids` of `table` by their strings; where two ids have the same string, the later wins.
  StringIndex(const StringTable& table, std::span<const int32_t> ids);

  // The id whose string is `text`, looked up in the table the index was built over.
  std::optional<int32_t> find(const StringTable& table, std::string_view text) const;

 private:
  size_t slot_of(const StringTable& table, std::string_view text) const;
  std::vector<int32_t> slots_;  // ids, -1 where empty; a power-of-two count
};

}  // namespace weft::models
