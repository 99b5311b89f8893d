// The out-of-line pieces of error messages (tensor/error.h).
#include "tensor/error.h"

#include <charconv>
#include <cstdio>

namespace weft::detail {

void append_signed(std::string& out, long long value) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
}

void append_unsigned(std::string& out, unsigned long long value, int base) {
  char buf[72];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, value, base).ptr);
}

void append_floating(std::string& out, double value) {
  char buf[32];
  out.append(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%g", value)));
}

void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

// Shapes print as (4, 3), and a one-dimensional one as (4,), the way PyTorch users read them.
void append_shape(std::string& out, const std::vector<int64_t>& shape) {
  out += '(';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    append_signed(out, shape[i]);
  }
  if (shape.size() == 1) out += ',';
  out += ')';
}

}  // namespace weft::detail
