// TextStream (text_stream.h): incremental detokenization with U+FFFD held back.
#include "models/text_stream.h"

namespace weft::models {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The length of `text` without its trailing U+FFFDs.
size_t without_trailing_replacements(const std::string& text) {
  size_t end = text.size();
  while (end >= kReplacement.size() && text.compare(end - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
    end -= kReplacement.size();
  return end;
}

}  // namespace

std::string TextStream::push(int32_t token) {
  pending_.push_back(token);
  const std::string text = tokenizer_.decode(pending_, skip_special_tokens_);
  const size_t end = without_trailing_replacements(text);
  std::string piece = end > shown_ ? text.substr(shown_, end - shown_) : std::string();
  if (end == text.size()) {
    pending_.clear();  // a whole character ends here: later tokens decode on their own
    shown_ = 0;
  } else {
    shown_ = std::max(shown_, end);
  }
  return piece;
}

std::string TextStream::finish() {
  const std::string text = tokenizer_.decode(pending_, skip_special_tokens_);
  std::string rest = text.size() > shown_ ? text.substr(shown_) : std::string();
  pending_.clear();
  shown_ = 0;
  return rest;
}

}  // namespace weft::models
