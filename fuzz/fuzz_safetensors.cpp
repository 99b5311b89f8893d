// libFuzzer target for the safetensors loader: any input must either load or be refused with a
// weft::Error, without a sanitizer report, a crash or another exception type (libFuzzer reports
// an escaping exception as a crash). Each input goes both ways in: from memory (copies), and as a
// file that load_safetensors maps, whose aligned tensors are views of the mapping (Note
// [Zero-copy loading] in io/safetensors.cpp); the two must agree, refusing with the same reason or
// loading the same tensors. An input that loads must survive a round trip: saving the
// loaded tensors and loading that again gives the same names, dtypes, shapes, bytes and
// metadata, and the saved data region equals the input's, byte for byte (the loader returns
// tensors in offset order and requires them to cover the region exactly).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
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

// The input as an in-memory file, loaded through load_safetensors's mapped path: the tensors, or
// the refusal's reason after its prefix. The file descriptor closes before the tensors are used,
// as a mapping outlives it.
struct MappedLoad {
  weft::io::SafetensorsFile file;
  std::string error;
};
MappedLoad load_mapped(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("fuzz_safetensors", 0);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) __builtin_trap();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  MappedLoad out;
  try {
    out.file = weft::io::load_safetensors(path);
  } catch (const weft::Error& e) {
    out.error = std::string(e.what()).substr(std::string("[load_safetensors] '").size() + path.size() + 3);
  }
  ::close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const MappedLoad mapped = load_mapped(data, size);
  weft::io::SafetensorsFile file;
  try {
    file = weft::io::load_safetensors_from_memory(data, size);
  } catch (const weft::Error& e) {
    // A clean refusal, for the same reason both ways.
    const std::string reason = std::string(e.what()).substr(std::string("[load_safetensors_from_memory] ").size());
    if (mapped.error != reason) __builtin_trap();
    return 0;
  }
  if (!mapped.error.empty() || !same_tensors(file.tensors, mapped.file.tensors) || file.metadata != mapped.file.metadata)
    __builtin_trap();
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
