// libFuzzer target for the safetensors loader: any input must either load or be refused with a
// weft::Error, without a sanitizer report, a crash or another exception type (libFuzzer reports
// an escaping exception as a crash). An input that loads must survive a round trip: saving the
// loaded tensors and loading that again gives the same names, dtypes, shapes, bytes and
// metadata, and the saved data region equals the input's, byte for byte (the loader returns
// tensors in offset order and requires them to cover the region exactly).
#include <cstdint>
#include <cstring>
#include <vector>

#include "weft.h"

namespace {

uint64_t header_size(const uint8_t* data) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  return n;
}

bool same_tensors(const weft::nn::TensorDict& a, const weft::nn::TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& [name_a, ta] = a.items()[i];
    const auto& [name_b, tb] = b.items()[i];
    if (name_a != name_b || ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) return false;
    if (ta.nbytes() > 0 && std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::io::SafetensorsFile file;
  try {
    file = weft::io::load_safetensors_from_memory(data, size);
  } catch (const weft::Error&) {
    return 0;  // a clean refusal
  }
  const std::vector<uint8_t> saved = weft::io::save_safetensors_to_memory(file.tensors, file.metadata);
  const weft::io::SafetensorsFile again = weft::io::load_safetensors_from_memory(saved.data(), saved.size());
  if (!same_tensors(file.tensors, again.tensors) || file.metadata != again.metadata) __builtin_trap();
  const uint64_t in_region = size - 8 - header_size(data);
  const uint64_t out_region = saved.size() - 8 - header_size(saved.data());
  if (in_region != out_region || std::memcmp(data + size - in_region, saved.data() + saved.size() - out_region,
                                             in_region) != 0)
    __builtin_trap();
  return 0;
}
