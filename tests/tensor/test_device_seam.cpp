// The device seam (tensor/backend.h, tensor/kernel_registry.h, tensor/cuda.h) as a CPU-only
// machine sees it: the CPU backend owns the CPU's allocator and its one device index, a feature's
// registry dispatches by device type and names what is missing, and CUDA is refused with the way
// out (a build without CUDA) or reported absent (a CUDA build on a machine without a GPU).
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "tensor/all.h"
#include "error_message.h"
#include "tensor/backend.h"
#include "tensor/fused_kernels.h"
#include "tensor/kernel_registry.h"

using namespace weft;

namespace {

int planted_calls = 0;
void planted_kernel(int* value) {
  ++planted_calls;
  *value = 7;
}
void cpu_kernel(int* value) { *value = 1; }

}  // namespace

TEST_CASE("the CPU backend owns the CPU's allocator and one device") {
  detail::Backend& cpu = detail::backend(kCPU);
  CHECK(&cpu == &detail::cpu_backend());
  CHECK(cpu.device_count() == 1);
  CHECK(&allocator_for(kCPU) == &cpu.allocator(0));
  CHECK(error_of([&] { cpu.allocator(1); }) == "[device] the cpu has device index 0 only, got 1");
  cpu.synchronize(0);  // nothing queued: returns at once
  const Tensor t = zeros({4});
  CHECK(t.storage()->device() == kCPU);
}

TEST_CASE("a kernel registry dispatches by device type, names what is missing, and can be planted") {
  using Fn = void(int*);
  detail::KernelRegistry<Fn> registry("demo", &cpu_kernel, nullptr);
  int value = 0;
  registry.at(kCPU)(&value);
  CHECK(value == 1);
  CHECK((registry.find(DeviceType::CUDA) == nullptr));
  CHECK(error_of([&] { registry.at(Device("cuda:1")); }) ==
        std::string("[demo] has no kernel for cuda:1") +
            (cuda::is_built() ? "" : ": weft was built without CUDA (configure with -DWEFT_CUDA=ON)"));
  {
    detail::ScopedKernel<Fn> planted(registry, DeviceType::CUDA, &planted_kernel);
    registry.at(Device("cuda"))(&value);
    CHECK(value == 7);
    CHECK(planted_calls == 1);
  }
  CHECK((registry.find(DeviceType::CUDA) == nullptr));  // the scope restored the empty slot
}

TEST_CASE("every fused feature has its CPU kernel, and a CUDA kernel exactly when the build has CUDA") {
  const bool cuda_build = cuda::is_built();
  CHECK((detail::cross_entropy_forward_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::cross_entropy_backward_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::layer_norm_forward_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::layer_norm_backward_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::dropout_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::linear_kernels().find(DeviceType::CPU) != nullptr));
  CHECK((detail::layer_norm_forward_kernels().find(DeviceType::CUDA) != nullptr) == cuda_build);
  CHECK((detail::dropout_kernels().find(DeviceType::CUDA) != nullptr) == cuda_build);
  CHECK((detail::linear_kernels().find(DeviceType::CUDA) != nullptr) == cuda_build);
}

TEST_CASE("without a GPU, CUDA is unavailable and asking for it fails with the reason") {
  if (cuda::is_available()) return;  // this case is about machines without one
  CHECK(cuda::device_count() == 0);
  const std::string e = error_of([] { zeros({2}, Device("cuda")); });
  CHECK(e == (cuda::is_built() ? "[device] cuda:0 requested but no CUDA device is visible (no GPU, or no driver)"
                                : "[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)"));
  CHECK(error_of([] { from_blob(nullptr, {0}, kFloat32, Device("cuda")); }) == e);
  CHECK(!cuda::is_pinned(zeros({2})));
}
