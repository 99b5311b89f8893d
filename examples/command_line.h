// The command-line plumbing the example programs share: the two ways a program refuses its line,
// and reading a number strictly. Each program defines examples::kProgram (its name) and
// examples::kUsage (its --help text); the functions here print them.
//
// A malformed line (an unknown flag, a missing value, text where a number goes) prints the whole
// usage; a well-formed value the program cannot use says what was expected and points to --help.
// Both exit with status 2, before any work starts.
#pragma once

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>

namespace weft::examples {

extern const char* const kProgram;
extern const char* const kUsage;

[[noreturn]] inline void usage_error(const std::string& message) {
  std::cerr << kProgram << ": " << message << "\n" << kUsage;
  std::exit(2);
}

[[noreturn]] inline void option_error(const std::string& message) {
  std::cerr << kProgram << ": " << message << "\n(" << kProgram << " --help lists the options)\n";
  std::exit(2);
}

// The whole of `text` as a T, or a usage error naming `flag`. An unsigned read would take "-1" as
// 2^64 - 1, so a sign is refused first; a floating-point value must be finite.
template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  std::istringstream is(text);
  T value{};
  const bool negative_unsigned = std::is_unsigned_v<T> && text.find('-') != std::string::npos;
  if (negative_unsigned || !(is >> value) || !is.eof() ||
      (std::is_floating_point_v<T> && !std::isfinite(static_cast<double>(value))))
    usage_error(flag + " expects " +
                (std::is_floating_point_v<T> ? "a number"
                 : std::is_unsigned_v<T>     ? "a non-negative whole number"
                                             : "a whole number") +
                ", got '" + text + "'");
  return value;
}

// A flag at the end of the line: "--flag needs a value" when the usage lists it, else unknown.
[[noreturn]] inline void missing_value_error(const std::string& flag) {
  usage_error(std::string(kUsage).find("\n  " + flag + " ") != std::string::npos ? flag + " needs a value"
                                                                               : "unknown option " + flag);
}

}  // namespace weft::examples
