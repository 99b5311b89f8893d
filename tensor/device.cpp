// Parsing and printing of devices.
#include "tensor/device.h"

#include <charconv>
#include <ostream>

#include "tensor/error.h"

namespace weft {

Device::Device(std::string_view spec) {
  if (spec == "cpu") return;
  if (spec.substr(0, 4) == "cuda") {
    type = DeviceType::CUDA;
    if (spec.size() == 4) return;
    if (spec[4] == ':') {
      const char* first = spec.data() + 5;
      const char* last = spec.data() + spec.size();
      auto [ptr, ec] = std::from_chars(first, last, index);
      if (ec == std::errc() && ptr == last && index >= 0 && first != last) return;
    }
  }
  WEFT_FAIL("[device] expected 'cpu', 'cuda' or 'cuda:N', got '", spec, "'");
}

void append_to(std::string& out, const Device& d) {
  if (d.is_cpu()) out += "cpu";
  else if (!d.is_cuda()) out += detail::cat("DeviceType(", static_cast<int>(d.type), ")");
  else out += detail::cat("cuda:", d.index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  std::string text;
  append_to(text, d);
  return os << text;
}

}  // namespace weft
