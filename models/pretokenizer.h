// Pre-tokenization: cutting text into the words BPE then encodes one at a time, as a byte-level
// tokenizer.json's pre_tokenizer describes it.
//
// The two regular expressions byte-level tokenizers split with are implemented as hand-written
// scanners over code points (no regex engine: std::regex has no \p{L}, and is slow):
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Each scanner returns at every position the match the regex engine returns there: the first
// alternative that matches, with greedy quantifiers backtracked as far as a later part needs (the
// (?!\S) lookahead gives back one space before a non-space). Both patterns match at every
// position, so the pieces tile the text. The character classes are the reference library's
// (char_class.h); the case-insensitive contractions also accept U+017F (long s) for 's', as
// Unicode case folding does.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace weft::models {

enum class SplitPattern { kGpt2, kLlama3 };

// The pattern `regex` is, when it is one of the two (byte for byte as tokenizer.json spells it).
bool split_pattern_from_regex(std::string_view regex, SplitPattern& pattern);

// Appends to `out` the pieces of `text` (valid UTF-8) in order; they tile the text.
void split_by_pattern(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& out);

// One step of a pre_tokenizer: a Split by a pattern (behaviour "Isolated"), or ByteLevel, which
// first prefixes a space to each piece that does not start with one (add_prefix_space) and then
// splits by GPT-2's pattern (use_regex). ByteLevel's byte-to-character mapping needs no step here:
// the tokenizer works on raw bytes.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel };
  Kind kind = Kind::kByteLevel;
  SplitPattern pattern = SplitPattern::kGpt2;  // kSplit
  bool add_prefix_space = false;               // kByteLevel
  bool use_regex = true;                       // kByteLevel
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Appends the words of `text` (valid UTF-8) to `words`. A word is a view into `text` or, when a
  // space was prefixed, into a string appended to `storage`, which must outlive the words.
  void split(std::string_view text, std::vector<std::string_view>& words, std::deque<std::string>& storage) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace weft::models
