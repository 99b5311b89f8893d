// Added-token matching with two byte tries (see added_tokens.h).
#include "models/added_tokens.h"

#include <algorithm>

#include "models/char_class.h"
#include "io/utf8.h"

namespace weft::models {
namespace {

bool is_whitespace(char32_t cp) { return detail::char_class(cp) == detail::CharClass::kSpace; }

// Where the whitespace at the end of text[begin, end) starts (valid UTF-8: step back over
// continuation bytes to each character's start).
size_t trailing_whitespace_start(std::string_view text, size_t begin, size_t end) {
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_whitespace(io::decode_utf8(text.data() + start, end - start))) break;
    end = start;
  }
  return end;
}

// Where the whitespace at the start of text[pos, ...) ends.
size_t leading_whitespace_end(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    const io::Utf8Step step = io::utf8_step(text, pos);
    if (!is_whitespace(io::decode_utf8(text.data() + pos, step.length))) break;
    pos += step.length;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    insert(tokens_[i].normalized ? normalized_ : raw_, tokens_[i].content, static_cast<int32_t>(i));
}

void AddedTokenMatcher::insert(Trie& trie, std::string_view content, int32_t token) {
  if (content.empty()) return;  // an empty token can never be matched
  trie.starts[static_cast<unsigned char>(content[0])] = true;
  int32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = trie.nodes[static_cast<size_t>(node)].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
    if (it != children.end() && it->first == byte) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(trie.nodes.size());
      children.insert(it, {byte, child});
      trie.nodes.emplace_back();
      node = child;
    }
  }
  trie.nodes[static_cast<size_t>(node)].token = token;  // contents are distinct (the loader checks)
}

int32_t AddedTokenMatcher::longest_at(const Trie& trie, std::string_view text, size_t pos) const {
  int32_t node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = trie.nodes[static_cast<size_t>(node)].children;
    const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (trie.nodes[static_cast<size_t>(node)].token >= 0) found = trie.nodes[static_cast<size_t>(node)].token;
  }
  return found;
}

void AddedTokenMatcher::split_pass(const Trie& trie, std::string_view text, std::vector<Segment>& out) const {
  size_t done = 0;  // the end of the previous token's span
  size_t pos = 0;   // where the search goes on: the end of the previous match itself
  while (pos < text.size()) {
    const int32_t token = trie.starts[static_cast<unsigned char>(text[pos])] ? longest_at(trie, text, pos) : -1;
    if (token < 0) {
      ++pos;
      continue;
    }
    const AddedToken& added = tokens_[static_cast<size_t>(token)];
    const size_t end = pos + added.content.size();
    // The search goes on after the match, not after the whitespace an rstrip took, so a token may
    // start inside that whitespace; its span then starts where the previous one ended.
    size_t start = std::max(pos, done), stop = end;
    if (added.lstrip) start = trailing_whitespace_start(text, done, start);
    if (added.rstrip) stop = leading_whitespace_end(text, stop);
    stop = std::max(stop, start);
    if (start > done) out.push_back({text.substr(done, start - done), -1});
    out.push_back({text.substr(start, stop - start), added.id});
    done = stop;
    pos = end;
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::vector<Segment> first;
  split_pass(raw_, text, first);
  for (const Segment& segment : first) {
    if (segment.id >= 0) {
      out.push_back(segment);
    } else {
      split_pass(normalized_, segment.text, out);
    }
  }
}

}  // namespace weft::models
