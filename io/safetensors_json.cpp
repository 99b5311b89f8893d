// JsonReader and the JSON string writer (see safetensors_json.h). Every read checks pos_ against
// the end of the text first, so malformed input ends in an error, never in a read past the end.
#include "io/safetensors_json.h"

#include <cstdio>

#include "io/utf8.h"
#include "tensor/error.h"

namespace weft::io::detail {
namespace {

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

void JsonReader::fail(std::string_view what) const {
  WEFT_FAIL(prefix_, "invalid header JSON at byte ", pos_, ": ", what);
}

void JsonReader::skip_whitespace() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
    ++pos_;
}

std::string JsonReader::describe_next() const {
  if (pos_ >= text_.size()) return "end of header";
  const auto c = static_cast<unsigned char>(text_[pos_]);
  if (c > 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  return "byte " + hex_byte(c);
}

void JsonReader::expect(char c, std::string_view what) {
  skip_whitespace();
  if (pos_ >= text_.size() || text_[pos_] != c)
    fail(weft::detail::cat("expected '", c, "' ", what, ", got ", describe_next()));
  ++pos_;
}

void JsonReader::begin_object(std::string_view what) {
  expect('{', weft::detail::cat("to open ", what));
  awaiting_first_member_.push_back(true);
}

bool JsonReader::next_member(std::string& key) {
  WEFT_CHECK(!awaiting_first_member_.empty(), prefix_, "JsonReader::next_member called outside an object");
  skip_whitespace();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    ++pos_;
    awaiting_first_member_.pop_back();
    return false;
  }
  if (!awaiting_first_member_.back()) {
    if (pos_ >= text_.size() || text_[pos_] != ',')
      fail("expected ',' or '}' after an object member, got " + describe_next());
    ++pos_;
    skip_whitespace();
  }
  awaiting_first_member_.back() = false;
  if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key, got " + describe_next());
  key = read_string("an object key");
  expect(':', "after an object key");
  return true;
}

uint32_t JsonReader::read_hex4() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i, ++pos_) {
    if (pos_ >= text_.size()) fail("\\u escape cut off by the end of the header");
    const char c = text_[pos_];
    uint32_t digit;
    if (is_digit(c)) digit = static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
    else fail("expected 4 hex digits after \\u, got " + describe_next());
    value = value * 16 + digit;
  }
  return value;
}

void JsonReader::append_utf8_sequence(std::string& out) {
  const Utf8Step step = utf8_step(text_, pos_);
  if (!step.valid)
    fail("invalid UTF-8 sequence starting with byte " + hex_byte(static_cast<unsigned char>(text_[pos_])));
  out.append(text_.substr(pos_, step.length));
  pos_ += step.length;
}

std::string JsonReader::read_string(std::string_view what) {
  skip_whitespace();
  if (pos_ >= text_.size() || text_[pos_] != '"')
    fail(weft::detail::cat("expected a string for ", what, ", got ", describe_next()));
  const size_t start = pos_++;
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) {
      pos_ = start;
      fail("unterminated string");
    }
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c < 0x20) fail("unescaped control character " + hex_byte(c) + " in a string");
    if (c >= 0x80) {
      append_utf8_sequence(out);
      continue;
    }
    if (c != '\\') {
      out += static_cast<char>(c);
      ++pos_;
      continue;
    }
    if (++pos_ >= text_.size()) fail("escape cut off by the end of the header");
    const char e = text_[pos_++];
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = read_hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (text_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a \\u low surrogate");
          pos_ += 2;
          const uint32_t low = read_hex4();
          if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate not followed by a low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(out, cp);
        break;
      }
      default:
        --pos_;
        fail("invalid escape: '\\' followed by " + describe_next());
    }
  }
}

int64_t JsonReader::read_integer(std::string_view what) {
  skip_whitespace();
  const size_t start = pos_;
  const bool negative = pos_ < text_.size() && text_[pos_] == '-';
  if (negative) ++pos_;
  if (pos_ >= text_.size() || !is_digit(text_[pos_]))
    fail(weft::detail::cat("expected an integer in ", what, ", got ", describe_next()));
  if (text_[pos_] == '0' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))
    fail(weft::detail::cat("integer with a leading zero in ", what));
  // The magnitude may reach 2^63 only for a negative number (INT64_MIN).
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  bool too_large = false;
  for (; pos_ < text_.size() && is_digit(text_[pos_]); ++pos_) {
    const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
    if (magnitude > (limit - digit) / 10) too_large = true;
    else magnitude = magnitude * 10 + digit;
  }
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
    fail(weft::detail::cat("expected an integer in ", what, ", got a number with a fraction or exponent"));
  if (too_large) {
    const std::string_view literal = text_.substr(start, pos_ - start);
    pos_ = start;
    fail(weft::detail::cat("integer ", literal.substr(0, 40), literal.size() > 40 ? "..." : "", " in ", what,
                    " does not fit in a signed 64-bit integer"));
  }
  if (!negative) return static_cast<int64_t>(magnitude);
  return magnitude == (uint64_t{1} << 63) ? INT64_MIN : -static_cast<int64_t>(magnitude);
}

std::vector<int64_t> JsonReader::read_integer_array(std::string_view what) {
  expect('[', weft::detail::cat("to open ", what));
  std::vector<int64_t> values;
  skip_whitespace();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    ++pos_;
    return values;
  }
  while (true) {
    values.push_back(read_integer(what));
    skip_whitespace();
    if (pos_ < text_.size() && text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return values;
    }
    fail(weft::detail::cat("expected ',' or ']' in ", what, ", got ", describe_next()));
  }
}

void JsonReader::expect_end() {
  skip_whitespace();
  if (pos_ != text_.size()) fail("unexpected " + describe_next() + " after the closing '}'");
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace weft::io::detail
