// The strict subset of JSON a safetensors header is written in, read and written without a
// third-party library.
//
// JsonReader is a pull parser: the safetensors loader walks the header's schema and asks for the
// next token it expects (an object member, a string, an integer array), so no document tree is
// built and memory stays proportional to what the header describes. It accepts only what a
// header may hold (objects, strings, arrays of integers) and rejects everything else: floats,
// true/false/null, unescaped control characters, invalid UTF-8, lone surrogates, integers past
// int64. It reads only inside the text it was given and every error names the byte offset.
// Duplicate keys are not its concern: it reports keys in order and the schema decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::io::detail {

class JsonReader {
 public:
  // `prefix` starts every error, which goes on "invalid header JSON at byte N: ...".
  JsonReader(std::string_view text, std::string_view prefix) : text_(text), prefix_(prefix) {}

  // Consumes '{'. `what` names the object in the error when something else is there.
  void begin_object(std::string_view what);
  // Inside an object: returns false after consuming the closing '}', or reads the next key and
  // its ':' (and the ',' before it) and returns true.
  bool next_member(std::string& key);
  std::string read_string(std::string_view what);
  // Reads [i, j, ...]; each element must be an integer literal that fits in int64.
  std::vector<int64_t> read_integer_array(std::string_view what);
  // Only whitespace may follow the value (a header is padded with spaces).
  void expect_end();

  size_t position() const { return pos_; }
  [[noreturn]] void fail(std::string_view what) const;

 private:
  void skip_whitespace();
  // The next character as the error shows it: 'x', a byte value, or "end of header".
  std::string describe_next() const;
  void expect(char c, std::string_view what);
  int64_t read_integer(std::string_view what);
  uint32_t read_hex4();
  void append_utf8_sequence(std::string& out);

  std::string_view text_;
  std::string_view prefix_;
  size_t pos_ = 0;
  // One entry per open object: true until its first member is read (then a ',' must come first).
  std::vector<bool> awaiting_first_member_;
};

// Appends `s` (valid UTF-8) as a JSON string literal: quotes, backslashes and control
// characters escaped, everything else byte for byte.
void append_json_string(std::string& out, std::string_view s);

}  // namespace weft::io::detail
