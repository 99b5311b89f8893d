// Finds the backend of a device. The CPU backend is built in; the CUDA backend is named directly
// (cuda_backend(), Note [Linking kernels by reference] in tensor/kernel_registry.h), never
// registered from a static initialiser.
#include "tensor/backend.h"

#include "tensor/cpu/cpu_backend.h"
#include "tensor/enum_check.h"

namespace weft::detail {

Backend& cpu_backend() {
  static CpuBackend cpu;
  return cpu;
}

Backend& backend(Device device) {
  check_enum(device.type, kNumDeviceTypes, "device", "DeviceType");
  if (device.is_cpu()) return cpu_backend();
  Backend& b = cuda_backend();
  const int count = b.device_count();
  WEFT_CHECK(device.index < count, "[device] ", device, " requested but ",
             count == 0 ? std::string("no CUDA device is visible (no GPU, or no driver)")
                        : cat("only ", count, " CUDA device(s) are visible"));
  return b;
}

}  // namespace weft::detail
