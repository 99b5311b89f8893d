// KernelRegistry: one feature's kernels, one slot per device type.
//
// The core ops reach a device through the Backend vtable (tensor/backend.h). Kernels outside that
// set — the optimizers' fused updates, gradient clipping, GradScaler's unscale, the fused
// cross-entropy and layer norm, dropout, later quantize/dequantize and FP8 casts — each get a
// registry of their own beside the code that uses them, so a feature gains a CUDA kernel without
// editing backend.h:
//
//   // optim/fused_kernels.h
//   using AdamKernel = void(const AdamLaunch&);
//   extern AdamKernel* const cuda_adam_kernel;        // null in a build without CUDA
//   const KernelRegistry<AdamKernel>& adam_kernels();  // {cpu_adam_kernel, cuda_adam_kernel}
//
// Note [Linking kernels by reference]: a registry is filled from the function-local static that
// builds it, which names the CPU kernel and the CUDA kernel pointer directly. The CUDA pointer is
// defined in the feature's .cu file when weft is built with -DWEFT_CUDA=ON and as nullptr in the
// floor's cuda_stub.cpp otherwise, so the linker always pulls in exactly one of the two. Nothing
// registers itself from a static initialiser, which a static library would silently drop.
//
// set() replaces a slot (a test that plants a kernel for a device type, a backend supplied from
// outside); ScopedKernel restores the previous kernel when it goes out of scope.
#pragma once

#include <array>
#include <atomic>

#include "tensor/device.h"
#include "tensor/error.h"

namespace weft::cuda {
bool is_built();  // tensor/cuda.h
}  // namespace weft::cuda

namespace weft::detail {

template <class Fn>
class KernelRegistry {
 public:
  // `feature` names the registry in errors, e.g. "AdamW" or "cross_entropy".
  KernelRegistry(const char* feature, Fn* cpu, Fn* cuda) : feature_(feature) {
    slots_[slot(DeviceType::CPU)].store(cpu);
    slots_[slot(DeviceType::CUDA)].store(cuda);
  }

  // The kernel for the device type, or nullptr.
  Fn* find(DeviceType type) const { return slots_[slot(type)].load(); }

  // The kernel for a device; throws naming the feature and the device when there is none.
  Fn& at(Device device) const {
    Fn* fn = find(device.type);
    WEFT_CHECK(fn != nullptr, "[", feature_, "] has no kernel for ", device,
               device.is_cuda() && !cuda::is_built() ? ": weft was built without CUDA (configure with -DWEFT_CUDA=ON)"
                                                     : "");
    return *fn;
  }

  // Installs `fn` for the device type and returns the kernel it replaces.
  Fn* set(DeviceType type, Fn* fn) { return slots_[slot(type)].exchange(fn); }

  const char* feature() const { return feature_; }

 private:
  static int slot(DeviceType type) { return static_cast<int>(type); }

  const char* feature_;
  std::array<std::atomic<Fn*>, kNumDeviceTypes> slots_;
};

// Installs a kernel for one scope.
template <class Fn>
class ScopedKernel {
 public:
  ScopedKernel(KernelRegistry<Fn>& registry, DeviceType type, Fn* fn)
      : registry_(registry), type_(type), previous_(registry.set(type, fn)) {}
  ~ScopedKernel() { registry_.set(type_, previous_); }
  ScopedKernel(const ScopedKernel&) = delete;
  ScopedKernel& operator=(const ScopedKernel&) = delete;

 private:
  KernelRegistry<Fn>& registry_;
  DeviceType type_;
  Fn* previous_;
};

}  // namespace weft::detail
