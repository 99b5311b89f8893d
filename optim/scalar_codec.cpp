// Text codecs for state-dict scalars (optim/scalar_codec.h).
#include "optim/scalar_codec.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "tensor/error.h"

namespace weft::optim {

std::string format_scalar(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}
std::string format_scalar(bool value) { return value ? "true" : "false"; }
std::string format_scalar(int64_t value) { return std::to_string(value); }
std::string format_scalar(const std::pair<double, double>& value) {
  return format_scalar(value.first) + "," + format_scalar(value.second);
}

void parse_scalar(const std::string& key, const std::string& text, double& out, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  WEFT_CHECK(!text.empty() && end == text.c_str() + text.size() && errno != ERANGE, where, " '", key,
             "': expected a number, got '", text, "'");
}

void parse_scalar(const std::string& key, const std::string& text, bool& out) {
  WEFT_CHECK(text == "true" || text == "false", "[load_state_dict] '", key, "': expected true or false, got '",
             text, "'");
  out = text == "true";
}

void parse_scalar(const std::string& key, const std::string& text, int64_t& out) {
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(text.c_str(), &end, 10);
  WEFT_CHECK(!text.empty() && end == text.c_str() + text.size() && errno != ERANGE, "[load_state_dict] '", key,
             "': expected an integer, got '", text, "'");
}

void parse_scalar(const std::string& key, const std::string& text, std::pair<double, double>& out) {
  const size_t comma = text.find(',');
  WEFT_CHECK(comma != std::string::npos, "[load_state_dict] '", key, "': expected two numbers 'a,b', got '", text,
             "'");
  parse_scalar(key, text.substr(0, comma), out.first);
  parse_scalar(key, text.substr(comma + 1), out.second);
}

}  // namespace weft::optim
