// A general JSON document reader: the whole text becomes a tree of JsonValue, for configuration
// files that are read once and walked freely (a tokenizer's tokenizer.json, a model's
// config.json). The safetensors header has its own strict pull parser (safetensors_json.h); this
// one accepts all of RFC 8259.
//
// What it guarantees: the text is valid UTF-8; strings hold valid UTF-8 (escapes decoded, \u
// surrogate pairs joined, lone surrogates refused); objects keep their members in document order
// and a key repeated in one object is an error (naming the key) instead of a silent choice;
// nesting deeper than kMaxJsonDepth is an error, so hostile input cannot exhaust the stack.
// Numbers keep their double value and, when written as an integer literal that fits, the exact
// int64. Every error names the op, the line and column, and what was expected and got.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace weft::io {

inline constexpr int kMaxJsonDepth = 256;

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;  // members in document order

  struct Number {
    double value = 0;
    bool is_integer = false;  // written without fraction or exponent, and fits in int64
    int64_t integer = 0;
  };

  JsonValue() = default;
  explicit JsonValue(bool b) : data_(b) {}
  explicit JsonValue(Number n) : data_(n) {}
  explicit JsonValue(std::string s) : data_(std::move(s)) {}
  explicit JsonValue(Array a) : data_(std::move(a)) {}
  explicit JsonValue(Object o) : data_(std::move(o)) {}

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_number() const { return kind() == Kind::kNumber; }
  bool is_integer() const { return is_number() && std::get<Number>(data_).is_integer; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }

  // The accessors throw weft::Error naming the kind found when the value is of another kind.
  bool as_bool() const;
  double as_number() const;
  int64_t as_integer() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // The member named `key` of an object, or nullptr when there is none (or this is no object).
  const JsonValue* find(std::string_view key) const;

  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* kind_name(Kind kind);
  const char* kind_name() const { return kind_name(kind()); }

 private:
  std::variant<std::monostate, bool, Number, std::string, Array, Object> data_;
};

// Parses one JSON document (surrounding whitespace allowed). Errors read
// "[op] invalid JSON at line L, column C: ...", or "[op] 'origin': invalid JSON ..." when the
// caller names where the text came from.
JsonValue parse_json(std::string_view text, std::string_view op, std::string_view origin = {});

// Reads and parses a regular file (io::InputFile's checks); errors name the path.
JsonValue read_json_file(const std::filesystem::path& path, const std::string& op);

}  // namespace weft::io
