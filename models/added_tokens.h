// Added tokens (tokenizer.json's "added_tokens"): strings matched in the raw text before
// pre-tokenization, each becoming its one id.
//
// Matching is the reference library's: first the tokens with normalized=false are found in the
// text, then the tokens with normalized=true in the stretches between those matches (without a
// normalizer both see the same text; the order decides overlaps). In each pass the leftmost match
// wins, and the longest token at that position; the search goes on from the end of the match.
// lstrip makes a token also take the whitespace before it (not past the previous token's span),
// rstrip the whitespace after it; that whitespace then belongs to the token and is not encoded.
// single_word is not supported (the loader refuses it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::models {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class AddedTokenMatcher {
 public:
  // A stretch of the text: an added token's id and the span it took, or text (id -1) to encode.
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Appends the segments of `text` to `out`; they tile the text and none is empty.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // A byte trie over one pass's tokens. Node 0 is the root.
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_ ending here
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    bool starts[256] = {};  // bytes some token starts with
  };
  static void insert(Trie& trie, std::string_view content, int32_t token);
  // The longest token of `trie` starting at text[pos], or -1.
  int32_t longest_at(const Trie& trie, std::string_view text, size_t pos) const;
  void split_pass(const Trie& trie, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;
};

}  // namespace weft::models
