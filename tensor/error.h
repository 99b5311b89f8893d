// The one error type of weft, and the check macro every op uses.
//
// Messages name the op in brackets, then what was expected and what was got:
//   [matmul] inner dimensions differ: (4, 3) · (5, 2)
// WEFT_CHECK builds the message only when the check fails, so checks cost nothing on the hot path.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// Shapes print as (4, 3), the way PyTorch users read them.
inline void append(std::ostringstream& os, const std::vector<int64_t>& shape) {
  os << '(';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ',';
  os << ')';
}

template <class T>
void append(std::ostringstream& os, const T& value) {
  os << value;
}

template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (append(os, args), ...);
  return os.str();
}

}  // namespace detail
}  // namespace weft

#define WEFT_CHECK(cond, ...)                                        \
  do {                                                               \
    if (!(cond)) throw ::weft::Error(::weft::detail::cat(__VA_ARGS__)); \
  } while (0)

#define WEFT_FAIL(...) throw ::weft::Error(::weft::detail::cat(__VA_ARGS__))
