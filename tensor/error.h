// The one error type of weft, and the check macro every op uses.
//
// Messages name the op in brackets, then what was expected and what was got:
//   [matmul] inner dimensions differ: (4, 3) · (5, 2)
// WEFT_CHECK builds the message only when the check fails, so checks cost nothing on the hot path.
#pragma once

#include <cstdint>
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

// The pieces of a message that take more than a string append, out of line (tensor/error.cpp), so
// that each of the hundreds of distinct cat(...) calls compiles to a few calls.
void append_signed(std::string& out, long long value);
void append_unsigned(std::string& out, unsigned long long value, int base = 10);
void append_floating(std::string& out, double value);  // %g: what a stream prints for a double
void append_quoted(std::string& out, std::string_view text);
void append_shape(std::string& out, const std::vector<int64_t>& shape);

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
    append_unsigned(out, value.value, 16);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    append_signed(out, value);
  } else if constexpr (std::is_integral_v<T>) {
    append_unsigned(out, value);
  } else if constexpr (std::is_floating_point_v<T>) {
    append_floating(out, static_cast<double>(value));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out += std::string_view(value);
  } else if constexpr (requires { value.native(); value.string(); }) {
    append_quoted(out, value.string());  // a std::filesystem::path, quoted as a stream quotes it
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    append_shape(out, value);
  } else {
    append_to(out, value);
  }
}

// Only a failing check builds a message: cold, so compiled for size and kept off the hot path.
template <class... Args>
[[gnu::cold]] std::string cat(const Args&... args) {
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
