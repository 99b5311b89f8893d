// Where a tensor's memory lives. The CPU always exists; CUDA devices exist only in builds made
// with -DWEFT_CUDA=ON and a visible GPU (see tensor/backend.h for how ops find their kernels).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace weft {

enum class DeviceType : uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // which GPU; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1". Throws weft::Error on anything else.
  Device(std::string_view spec);  // NOLINT: implicit so that "cuda:0" reads naturally
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU{DeviceType::CPU, 0};

// How a device reads in an error message (tensor/error.h) and on a stream: cpu, cuda:0.
void append_to(std::string& out, const Device& d);
std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace weft
