// TextStream: the text of a generation as it is made, one token at a time. A byte-level token may
// end in the middle of a UTF-8 character (an emoji is often two or three tokens); decoding it alone
// would show U+FFFD where the character will be. So the stream holds back a trailing U+FFFD until
// the next token completes it, and gives it out as it is only at finish().
//
// It decodes only the tokens since the last point where the text ended on a whole character, so a
// long generation costs linear time. That is exact because the byte-level decoder maps each token
// to its bytes independently of its neighbours.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace weft::models {

class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // The text that `token` completes ("" while a character is still missing bytes).
  std::string push(int32_t token);
  // What is still held back (a trailing U+FFFD that no further token will complete).
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> pending_;  // the tokens since the text last ended on a whole character
  size_t shown_ = 0;              // bytes of decode(pending_) already given out
};

}  // namespace weft::models
