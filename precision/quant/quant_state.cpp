// QuantState <-> bitsandbytes' state-dict keys, and the small JSON reader and writer they need.
#include "precision/quant/quant_state.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "tensor/ops.h"

namespace weft::precision::quant {
namespace {

constexpr std::string_view kQuantStateKey = "quant_state.bitsandbytes__";

std::string type_name(QuantKind type) { return std::string(quant_format(type).name); }

DType dtype_from_name(const std::string& name, const char* field) {
  for (const DTypeTraits& t : kDTypeTraits)
    if (t.name == name) return t.dtype;
  WEFT_FAIL("[load_quant_state] unknown ", field, " '", name, "'");
}

Tensor bytes_of(const std::string& text) {
  Tensor t = weft::detail::make_tensor({static_cast<int64_t>(text.size())}, kUInt8, kCPU);
  std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

// One JSON value of the kinds the quant_state object holds.
struct JsonValue {
  enum Kind { String, Integer, Number, IntegerArray, Null } kind = Null;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  std::vector<int64_t> array;
};

// A reader for one flat JSON object of strings, numbers, integer arrays and null.
class FlatJsonReader {
 public:
  explicit FlatJsonReader(std::string_view s) : s_(s) {}

  std::vector<std::pair<std::string, JsonValue>> read_object() {
    std::vector<std::pair<std::string, JsonValue>> members;
    expect('{');
    if (!eat('}')) {
      do {
        std::string key = read_string();
        expect(':');
        members.emplace_back(std::move(key), read_value());
      } while (eat(','));
      expect('}');
    }
    skip_space();
    if (i_ != s_.size()) fail("text after the object");
    return members;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    WEFT_FAIL("[load_quant_state] the quant_state JSON is malformed at byte ", i_, ": ", what);
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail("unexpected character");
  }
  std::string read_string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') fail("escapes are not used by bitsandbytes' quant_state");
      out += s_[i_++];
    }
    if (i_ == s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  JsonValue read_number() {
    const size_t start = i_;
    while (i_ < s_.size() && std::strchr("+-.0123456789eE", s_[i_]) != nullptr) ++i_;
    const std::string_view token = s_.substr(start, i_ - start);
    JsonValue v;
    if (token.find_first_of(".eE") == std::string_view::npos) {
      v.kind = JsonValue::Integer;
      if (std::from_chars(token.data(), token.data() + token.size(), v.integer).ptr != token.data() + token.size())
        fail("bad integer");
    } else {
      v.kind = JsonValue::Number;
      if (std::from_chars(token.data(), token.data() + token.size(), v.number).ptr != token.data() + token.size())
        fail("bad number");
    }
    return v;
  }
  JsonValue read_value() {
    skip_space();
    if (i_ >= s_.size()) fail("missing value");
    JsonValue v;
    if (s_[i_] == '"') {
      v.kind = JsonValue::String;
      v.text = read_string();
    } else if (s_.substr(i_, 4) == "null") {
      i_ += 4;
    } else if (eat('[')) {
      v.kind = JsonValue::IntegerArray;
      if (!eat(']')) {
        do {
          skip_space();
          const JsonValue e = read_number();
          if (e.kind != JsonValue::Integer) fail("expected an integer array");
          v.array.push_back(e.integer);
        } while (eat(','));
        expect(']');
      }
    } else {
      v = read_number();
    }
    return v;
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";  // as json.dumps writes them
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, std::fabs(value), std::chars_format::scientific).ptr;
  const std::string sci(buf, end);  // d[.ddd]e±XX, the shortest digits that round-trip
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int decimal_point = std::stoi(sci.substr(e + 1)) + 1;  // digits before the point
  std::string out = value < 0 ? "-" : "";
  const int n = static_cast<int>(digits.size());
  if (decimal_point > -4 && decimal_point <= 16) {
    if (decimal_point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decimal_point), '0') + digits;
    } else if (decimal_point >= n) {
      out += digits + std::string(static_cast<size_t>(decimal_point - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decimal_point)) + "." + digits.substr(static_cast<size_t>(decimal_point));
    }
    return out;
  }
  const int exponent = decimal_point - 1;
  out += digits.substr(0, 1);
  if (n > 1) out.append(".").append(digits, 1);
  char exp[16];  // "e±" and up to 10 digits: an int's, as the compiler cannot see it is small
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

std::string quant_state_json(const QuantState& state) {
  std::string shape = "[";
  for (size_t i = 0; i < state.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(state.shape[i]);
  shape += "]";
  std::string json = "{\"quant_type\": \"" + type_name(state.type) + "\", \"blocksize\": " +
                     std::to_string(state.blocksize) + ", \"dtype\": \"" + std::string(dtype_name(state.dtype)) +
                     "\", \"shape\": " + shape;
  if (state.nested)
    json += ", \"nested_blocksize\": " + std::to_string(state.nested_blocksize) + ", \"nested_dtype\": \"" +
            std::string(dtype_name(state.nested_dtype)) + "\", \"nested_offset\": " +
            python_float_repr(static_cast<double>(state.offset));
  return json + "}";
}

void parse_quant_state_json(const std::string& text, QuantState& state) {
  bool has_type = false, has_blocksize = false, has_dtype = false, has_shape = false;
  std::optional<int64_t> nested_blocksize;
  std::optional<double> nested_offset;
  std::optional<DType> nested_dtype;
  // Plain names rather than structured bindings: the lambda below captures them, which clang 14
  // (without C++20's P1091) refuses.
  for (const auto& entry : FlatJsonReader(text).read_object()) {
    const auto& key = entry.first;
    const auto& v = entry.second;
    auto need = [&](JsonValue::Kind kind, const char* what) {
      WEFT_CHECK(v.kind == kind, "[load_quant_state] quant_state '", key, "' must be ", what);
    };
    if (key == "quant_type") {
      need(JsonValue::String, "a string");
      WEFT_CHECK(v.text == "nf4" || v.text == "fp4", "[load_quant_state] quant_type must be 'nf4' or 'fp4', got '",
                 v.text, "'");
      state.type = quant_format(v.text).kind;
      has_type = true;
    } else if (key == "blocksize") {
      need(JsonValue::Integer, "an integer");
      state.blocksize = v.integer;
      has_blocksize = true;
    } else if (key == "dtype") {
      need(JsonValue::String, "a string");
      state.dtype = dtype_from_name(v.text, "dtype");
      has_dtype = true;
    } else if (key == "shape") {
      need(JsonValue::IntegerArray, "an integer array");
      for (int64_t d : v.array) WEFT_CHECK(d >= 0, "[load_quant_state] shape dimensions must be non-negative");
      state.shape = v.array;
      has_shape = true;
    } else if (key == "nested_blocksize") {
      need(JsonValue::Integer, "an integer");
      nested_blocksize = v.integer;
    } else if (key == "nested_dtype") {
      need(JsonValue::String, "a string");
      nested_dtype = dtype_from_name(v.text, "nested_dtype");
    } else if (key == "nested_offset") {
      WEFT_CHECK(v.kind == JsonValue::Number || v.kind == JsonValue::Integer, "[load_quant_state] quant_state ",
                 "'nested_offset' must be a number");
      nested_offset = v.kind == JsonValue::Number ? v.number : static_cast<double>(v.integer);
    } else {
      WEFT_FAIL("[load_quant_state] unexpected quant_state field '", key, "'");
    }
  }
  WEFT_CHECK(has_type && has_blocksize && has_dtype && has_shape, "[load_quant_state] quant_state needs quant_type, ",
             "blocksize, dtype and shape");
  const bool nested = nested_blocksize || nested_offset || nested_dtype;
  WEFT_CHECK(!nested || (nested_blocksize && nested_offset && nested_dtype), "[load_quant_state] a nested quant_state ",
             "needs nested_blocksize, nested_dtype and nested_offset");
  state.nested = nested;
  if (nested) {
    state.nested_blocksize = *nested_blocksize;
    state.nested_dtype = *nested_dtype;
    state.offset = static_cast<float>(*nested_offset);
  }
}

void save_quant_state(const QuantState& state, const std::string& prefix, nn::TensorDict& out) {
  out.insert(prefix + "absmax", state.absmax);
  out.insert(prefix + "quant_map", state.code);
  if (state.nested) {
    out.insert(prefix + "nested_absmax", state.nested_absmax);
    out.insert(prefix + "nested_quant_map", state.nested_code);
  }
  out.insert(prefix + std::string(kQuantStateKey) + type_name(state.type), bytes_of(quant_state_json(state)));
}

bool has_quant_state(const nn::StateLoader& loader, const std::string& prefix) {
  return !loader.keys_with_prefix(prefix + std::string(kQuantStateKey)).empty();
}

QuantState load_quant_state(nn::StateLoader& loader, const std::string& prefix, const Tensor& codes) {
  const std::vector<std::string> entries = loader.keys_with_prefix(prefix + std::string(kQuantStateKey));
  WEFT_CHECK(entries.size() == 1, "[load_quant_state] expected one '", prefix, kQuantStateKey, "<nf4|fp4>' entry, found ",
             entries.size());
  const Tensor blob = loader.take(entries[0])->contiguous();
  WEFT_CHECK(blob.dtype() == kUInt8 && blob.dim() == 1, "[load_quant_state] '", entries[0],
             "' must be a 1-D uint8 tensor of JSON bytes, got ", blob.shape(), " ", blob.dtype());
  QuantState state;
  parse_quant_state_json(std::string(static_cast<const char*>(blob.data_ptr()), static_cast<size_t>(blob.numel())),
                         state);
  WEFT_CHECK(entries[0] == prefix + std::string(kQuantStateKey) + type_name(state.type), "[load_quant_state] '",
             entries[0], "' holds quant_type '", type_name(state.type), "'");
  auto tensor = [&](const char* name) {
    const Tensor* t = loader.take(prefix + name);
    WEFT_CHECK(t != nullptr, "[load_quant_state] missing '", prefix, name, "'");
    return t->contiguous();
  };
  state.absmax = tensor("absmax");
  state.code = tensor("quant_map");
  if (state.nested) {
    state.nested_absmax = tensor("nested_absmax");
    state.nested_code = tensor("nested_quant_map");
  }
  check_quant_state(state, codes, "load_quant_state");
  return state;
}

}  // namespace weft::precision::quant
