// The one error type of weft, and the check macro every op uses.
//
// Messages name the op in brackets, then what was expected and what was got:
//   [matmul] inner dimensions differ: (4, 3) · (5, 2)
// WEFT_CHECK builds the message only when the check fails, so checks cost nothing on the hot path.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace weft {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// An integer that a message shows in hexadecimal: cat("flags 0x", Hex{flags}).
struct Hex {
  uint64_t value;
};

// Messages are built on std::string, not iostreams: a program that links weft statically then
// carries no locale machinery (half a megabyte of a static binary). A weft type reads in a message
// through `append_to(std::string&, const T&)`, found next to the type by argument-dependent lookup.
template <class T>
void append(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, char>) {
    out += value;
  } else if constexpr (std::is_same_v<T, Hex>) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, value.value, 16).ptr);
  } else if constexpr (std::is_integral_v<T>) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[32];  // %g, six significant digits: what an ostream prints for a double
    out.append(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%g", static_cast<double>(value))));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out += std::string_view(value);
  } else if constexpr (requires { value.native(); value.string(); }) {
    // A std::filesystem::path, quoted as a stream quotes it (without including <filesystem> here).
    out += '"';
    for (const char c : value.string()) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    // Shapes print as (4, 3), the way PyTorch users read them.
    out += '(';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i) out += ", ";
      append(out, value[i]);
    }
    if (value.size() == 1) out += ',';
    out += ')';
  } else {
    append_to(out, value);
  }
}

template <class... Args>
std::string cat(const Args&... args) {
  std::string out;
  (append(out, args), ...);
  return out;
}

}  // namespace detail
}  // namespace weft

#define WEFT_CHECK(cond, ...)                                        \
  do {                                                               \
    if (!(cond)) throw ::weft::Error(::weft::detail::cat(__VA_ARGS__)); \
  } while (0)

#define WEFT_FAIL(...) throw ::weft::Error(::weft::detail::cat(__VA_ARGS__))
