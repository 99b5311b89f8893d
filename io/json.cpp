// The JSON document reader (see json.h): a recursive-descent parser over text already checked to
// be valid UTF-8. Every read checks the position against the end first, so truncated input ends
// in an error, never in a read past the end; the depth counter bounds the recursion.
#include "io/json.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <system_error>

#include "io/input_file.h"
#include "io/safetensors_json.h"
#include "io/utf8.h"
#include "tensor/error.h"

namespace weft::io {
namespace {

class Parser {
 public:
  // `prefix` starts every error: "[op] " or "[op] 'path': ".
  Parser(std::string_view text, std::string prefix) : text_(text), prefix_(std::move(prefix)) {}

  JsonValue document() {
    JsonValue value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("expected the end of the document after the value, got " + describe_next());
    return value;
  }

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;  // columns count characters, not the continuation bytes of one
      }
    }
    WEFT_FAIL(prefix_, "invalid JSON at line ", line, ", column ", column, ": ", what);
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  std::string describe_next() const {
    if (at_end()) return "the end of the text";
    const auto c = static_cast<unsigned char>(peek());
    if (c > 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  JsonValue parse_value(int depth) {
    skip_whitespace();
    if (at_end()) fail("expected a value, got the end of the text");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return JsonValue(parse_string());
      case 't': expect_word("true"); return JsonValue(true);
      case 'f': expect_word("false"); return JsonValue(false);
      case 'n': expect_word("null"); return JsonValue();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return JsonValue(parse_number());
        fail("expected a value, got " + describe_next());
    }
  }

  void check_depth(int depth) const {
    if (depth > kMaxJsonDepth)
      fail(weft::detail::cat("nesting deeper than ", kMaxJsonDepth, " arrays and objects"));
  }

  JsonValue parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    JsonValue::Object members;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return JsonValue(std::move(members));
    }
    for (;;) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key, got " + describe_next());
      std::string key = parse_string();
      skip_whitespace();
      if (at_end() || peek() != ':') fail("expected ':' after the key \"" + key + "\", got " + describe_next());
      ++pos_;
      JsonValue value = parse_value(depth);
      members.emplace_back(std::move(key), std::move(value));
      skip_whitespace();
      if (at_end()) fail("expected ',' or '}' after an object member, got the end of the text");
      if (peek() == '}') break;
      if (peek() != ',') fail("expected ',' or '}' after an object member, got " + describe_next());
      ++pos_;
    }
    check_unique_keys(members);
    ++pos_;  // '}'
    return JsonValue(std::move(members));
  }

  // Sorting pointers to the keys finds a repeat in O(n log n), which matters for a tokenizer's
  // vocabulary object of 100k+ members.
  void check_unique_keys(const JsonValue::Object& members) const {
    if (members.size() < 2) return;
    std::vector<const std::string*> keys;
    keys.reserve(members.size());
    for (const auto& [key, value] : members) keys.push_back(&key);
    std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    for (size_t i = 1; i < keys.size(); ++i)
      if (*keys[i] == *keys[i - 1]) fail("the key \"" + *keys[i] + "\" appears twice in one object");
  }

  JsonValue parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    JsonValue::Array items;
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return JsonValue(std::move(items));
    }
    for (;;) {
      items.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("expected ',' or ']' after an array element, got the end of the text");
      if (peek() == ']') break;
      if (peek() != ',') fail("expected ',' or ']' after an array element, got " + describe_next());
      ++pos_;
    }
    ++pos_;  // ']'
    return JsonValue(std::move(items));
  }

  void expect_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("expected a value, got " + describe_next());
    pos_ += word.size();
  }

  uint32_t read_hex4() {
    if (text_.size() - pos_ < 4) fail("expected 4 hex digits after \\u, got the end of the text");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_];
      uint32_t digit;
      if (c >= '0' && c <= '9') digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
      else fail("expected 4 hex digits after \\u, got " + describe_next());
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  void append_escape(std::string& out) {
    if (at_end()) fail("expected an escape after '\\', got the end of the text");
    const char c = peek();
    ++pos_;
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: --pos_; fail("expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u), got " + describe_next());
    }
    uint32_t cp = read_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") fail("a high surrogate \\u escape not followed by a low one");
      pos_ += 2;
      const uint32_t low = read_hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate \\u escape not followed by a low one");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  std::string parse_string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      // Copy the run up to the next quote, backslash or control character in one go.
      size_t end = pos_;
      while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
             static_cast<unsigned char>(text_[end]) >= 0x20)
        ++end;
      out.append(text_.data() + pos_, end - pos_);
      pos_ = end;
      if (at_end()) fail("expected the closing '\"' of a string, got the end of the text");
      if (peek() == '"') {
        ++pos_;
        return out;
      }
      if (peek() != '\\') fail("a control character inside a string must be escaped, got " + describe_next());
      ++pos_;
      append_escape(out);
    }
  }

  JsonValue::Number parse_number() {
    const size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (at_end() || !is_digit(peek())) fail("expected a digit in a number, got " + describe_next());
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && is_digit(peek())) fail("a number may not start with 0 followed by digits");
    } else {
      skip_digits();
    }
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (at_end() || !is_digit(peek())) fail("expected a digit after '.', got " + describe_next());
      skip_digits();
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (at_end() || !is_digit(peek())) fail("expected a digit in an exponent, got " + describe_next());
      skip_digits();
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    JsonValue::Number number;
    if (integral) {
      const auto [ptr, ec] = std::from_chars(first, last, number.integer);
      number.is_integer = ec == std::errc() && ptr == last;
    }
    const auto [ptr, ec] = std::from_chars(first, last, number.value);
    if (ec == std::errc::result_out_of_range) fail("a number past the range of a double");
    if (ec != std::errc() || ptr != last) fail("an unreadable number");
    return number;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  void skip_digits() {
    while (!at_end() && is_digit(peek())) ++pos_;
  }

  std::string_view text_;
  std::string prefix_;
  size_t pos_ = 0;
};

JsonValue parse_with_prefix(std::string_view text, std::string prefix) {
  if (!is_valid_utf8(text)) WEFT_FAIL(prefix, "invalid JSON: the text is not valid UTF-8");
  return Parser(text, std::move(prefix)).document();
}

}  // namespace

const char* JsonValue::kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "a boolean";
    case Kind::kNumber: return "a number";
    case Kind::kString: return "a string";
    case Kind::kArray: return "an array";
    case Kind::kObject: return "an object";
  }
  return "?";
}

bool JsonValue::as_bool() const {
  WEFT_CHECK(is_bool(), "[JsonValue] expected a boolean, got ", kind_name());
  return std::get<bool>(data_);
}

double JsonValue::as_number() const {
  WEFT_CHECK(is_number(), "[JsonValue] expected a number, got ", kind_name());
  return std::get<Number>(data_).value;
}

int64_t JsonValue::as_integer() const {
  WEFT_CHECK(is_number(), "[JsonValue] expected an integer, got ", kind_name());
  WEFT_CHECK(is_integer(), "[JsonValue] expected an integer, got the number ", as_number());
  return std::get<Number>(data_).integer;
}

const std::string& JsonValue::as_string() const {
  WEFT_CHECK(is_string(), "[JsonValue] expected a string, got ", kind_name());
  return std::get<std::string>(data_);
}

const JsonValue::Array& JsonValue::as_array() const {
  WEFT_CHECK(is_array(), "[JsonValue] expected an array, got ", kind_name());
  return std::get<Array>(data_);
}

const JsonValue::Object& JsonValue::as_object() const {
  WEFT_CHECK(is_object(), "[JsonValue] expected an object, got ", kind_name());
  return std::get<Object>(data_);
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [name, value] : std::get<Object>(data_))
    if (name == key) return &value;
  return nullptr;
}

JsonValue parse_json(std::string_view text, std::string_view op, std::string_view origin) {
  if (origin.empty()) return parse_with_prefix(text, weft::detail::cat("[", op, "] "));
  return parse_with_prefix(text, weft::detail::cat("[", op, "] '", origin, "': "));
}

JsonValue read_json_file(const std::filesystem::path& path, const std::string& op) {
  const InputFile file(path, op);
  std::string text(file.size(), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      WEFT_FAIL("[", op, "] '", path.string(), "': cannot read: ", std::system_category().message(err));
    }
    if (n == 0) break;  // the file shrank since it was measured: parse what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return parse_json(text, op, path.string());
}

}  // namespace weft::io
