// The registry that maps a device type to its kernels. The CPU backend is built in; a CUDA
// backend, when compiled, registers itself at start-up.
#include "tensor/backend.h"

#include "tensor/cpu/cpu_backend.h"

namespace weft::detail {
namespace {
Backend* cuda_backend = nullptr;
}

Backend& backend(Device device) {
  static CpuBackend cpu;
  if (device.is_cpu()) return cpu;
  WEFT_CHECK(cuda_backend != nullptr, "[device] ", device,
             " requested but weft was built without CUDA; rebuild with -DWEFT_CUDA=ON on a machine "
             "with the CUDA toolkit, or use the cpu device");
  return *cuda_backend;
}

void register_backend(DeviceType type, Backend* b) {
  WEFT_CHECK(type == DeviceType::CUDA, "[device] the cpu backend is built in and cannot be replaced");
  cuda_backend = b;
}

}  // namespace weft::detail
