// The GPT-2 and Llama 3 split scanners and the pre_tokenizer steps (see pretokenizer.h). Each
// `*_match` returns the end of the regex's match at `pos`; the comments quote the alternative a
// branch implements.
#include "models/pretokenizer.h"

#include "models/char_class.h"
#include "io/utf8.h"

namespace weft::models {
namespace {

using detail::CharClass;

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Char {
  char32_t cp;
  CharClass cls;
  size_t length;  // in bytes
};

// The character at s[pos] (pos < s.size(), s valid UTF-8).
Char char_at(std::string_view s, size_t pos) {
  const auto b = static_cast<unsigned char>(s[pos]);
  if (b < 0x80) return {b, detail::char_class(b), 1};
  const size_t length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  const char32_t cp = io::decode_utf8(s.data() + pos, length);
  return {cp, detail::non_ascii_char_class(cp), length};
}

// The end of the run of characters of class `cls` that starts at pos.
size_t run_end(std::string_view s, size_t pos, CharClass cls) {
  while (pos < s.size()) {
    const Char c = char_at(s, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// 's|'t|'re|'ve|'m|'ll|'d at pos (s[pos] is '\''), case-insensitively for Llama 3: the length
// matched, or 0.
size_t contraction_length(std::string_view s, size_t pos, bool ignore_case) {
  auto letter = [&](size_t i) -> char {  // the ASCII letter at pos + i, folded when ignoring case
    if (pos + i >= s.size()) return 0;
    const char c = s[pos + i];
    return ignore_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
  };
  switch (letter(1)) {
    case 's': case 't': case 'm': case 'd': return 2;
    case 'r': case 'v': return letter(2) == 'e' ? 3 : 0;
    case 'l': return letter(2) == 'l' ? 3 : 0;
    default: break;
  }
  if (ignore_case && s.substr(pos + 1, 2) == "\xC5\xBF") return 3;  // U+017F folds to 's'
  return 0;
}

struct WhitespaceRun {
  size_t end;               // the end of the run
  size_t last_start;        // where its last character starts
  size_t count;             // characters in it
  size_t after_last_break;  // just past its last \r or \n, or 0 when it has none
};

WhitespaceRun whitespace_run(std::string_view s, size_t pos) {
  WhitespaceRun run{pos, pos, 0, 0};
  while (run.end < s.size()) {
    const Char c = char_at(s, run.end);
    if (c.cls != CharClass::kSpace) break;
    run.last_start = run.end;
    run.end += c.length;
    ++run.count;
    if (c.cp == '\r' || c.cp == '\n') run.after_last_break = run.end;
  }
  return run;
}

// \s+(?!\S)|\s+ at the start of a whitespace run: the lookahead gives the last space back when a
// non-space follows, unless that would leave nothing.
size_t trailing_whitespace_match(std::string_view s, const WhitespaceRun& run) {
  if (run.end == s.size() || run.count < 2) return run.end;
  return run.last_start;
}

size_t gpt2_match(std::string_view s, size_t pos) {
  const Char c = char_at(s, pos);
  if (c.cp == '\'') {
    if (const size_t n = contraction_length(s, pos, false)) return pos + n;
  }
  // ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ without the space
  if (c.cls != CharClass::kSpace) return run_end(s, pos + c.length, c.cls);
  // the same with the space
  if (c.cp == ' ' && pos + 1 < s.size()) {
    const Char d = char_at(s, pos + 1);
    if (d.cls != CharClass::kSpace) return run_end(s, pos + 1 + d.length, d.cls);
  }
  return trailing_whitespace_match(s, whitespace_run(s, pos));
}

size_t llama3_match(std::string_view s, size_t pos) {
  const Char c = char_at(s, pos);
  if (c.cp == '\'') {
    if (const size_t n = contraction_length(s, pos, true)) return pos + n;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::kLetter) return run_end(s, pos + c.length, CharClass::kLetter);
  const size_t next = pos + c.length;
  if (c.cls != CharClass::kNumber && c.cp != '\r' && c.cp != '\n' && next < s.size()) {
    const Char d = char_at(s, next);
    if (d.cls == CharClass::kLetter) return run_end(s, next + d.length, CharClass::kLetter);
  }
  // \p{N}{1,3}
  if (c.cls == CharClass::kNumber) {
    size_t end = next;
    for (int i = 1; i < 3 && end < s.size(); ++i) {
      const Char d = char_at(s, end);
      if (d.cls != CharClass::kNumber) break;
      end += d.length;
    }
    return end;
  }
  // ?[^\s\p{L}\p{N}]+[\r\n]*
  const bool other = c.cls == CharClass::kOther;
  if (other || (c.cp == ' ' && next < s.size() && char_at(s, next).cls == CharClass::kOther)) {
    size_t end = run_end(s, other ? pos : next, CharClass::kOther);
    while (end < s.size() && (s[end] == '\r' || s[end] == '\n')) ++end;
    return end;
  }
  // \s*[\r\n]+: the greedy \s* gives back characters up to the run's last line break, and [\r\n]+
  // then takes that one break only (what follows it is no break).
  const WhitespaceRun run = whitespace_run(s, pos);
  if (run.after_last_break != 0) return run.after_last_break;
  return trailing_whitespace_match(s, run);
}

}  // namespace

bool split_pattern_from_regex(std::string_view regex, SplitPattern& pattern) {
  if (regex == kGpt2Regex) {
    pattern = SplitPattern::kGpt2;
    return true;
  }
  if (regex == kLlama3Regex) {
    pattern = SplitPattern::kLlama3;
    return true;
  }
  return false;
}

void split_by_pattern(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& out) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = pattern == SplitPattern::kGpt2 ? gpt2_match(text, pos) : llama3_match(text, pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words,
                         std::deque<std::string>& storage) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text}, next;
  for (const PreTokenizerStep& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
        if (step.add_prefix_space && piece.front() != ' ') {
          std::string& prefixed = storage.emplace_back(1, ' ');
          prefixed.append(piece);
          piece = prefixed;
        }
        if (step.use_regex) {
          split_by_pattern(piece, SplitPattern::kGpt2, next);
        } else {
          next.push_back(piece);
        }
      } else {
        split_by_pattern(piece, step.pattern, next);
      }
    }
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

}  // namespace weft::models
