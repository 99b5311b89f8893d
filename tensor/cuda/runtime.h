// The CUDA runtime as weft's CUDA code uses it: error checks that throw weft::Error, the current
// stream of a device, the per-device record of errors found inside kernels, and launch shapes.
// Compiled only with -DWEFT_CUDA=ON (Note [CUDA sources] in CMakeLists.txt); public headers never
// include it (tensor/cuda.h is the public face).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/error.h"

namespace weft::cuda::detail {

// Throws "[cuda] <what>: <error name> (<code>): <description>" unless rc is cudaSuccess.
// Sticky device faults (an illegal address, a failed launch) also mark the device unusable.
void check(cudaError_t rc, const char* what);
// After a kernel launch: configuration errors (too many threads, no image for this GPU) show at
// once; faults of the running kernel show at the next synchronisation.
void check_launch(const char* op);

// The calling thread's current stream on `device` (-1: the current device), and that device.
cudaStream_t stream_of(int device = -1);
int resolve_device(int device);
// Makes `device` current for the calling thread's CUDA calls for a scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// Note [Deferred device errors] (tensor/cuda.h): kernels that find a bad value (an index out of
// range) record the first one in the device's DeviceError and skip the element. `code` says
// which op; `value` and `bound` are the offending value and the size it had to stay below.
enum class DeviceErrorCode : int32_t { None = 0, IndexSelect, IndexAdd, Gather, ScatterAdd, CrossEntropyTarget };
struct DeviceError {
  int32_t code;
  int64_t value;
  int64_t bound;
};
// The device's error record (device memory, zeroed at start).
DeviceError* device_error(int device);
// Copies the record back (the host waits for the stream), clears it and throws if it was set.
void raise_deferred_errors(int device, cudaStream_t stream);

// One thread per element with a grid-stride loop: a block count that fills the GPU without
// passing gridDim.x's limit.
inline constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(wanted < 1 ? 1 : wanted > 65535 ? 65535 : wanted);
}

}  // namespace weft::cuda::detail

#define WEFT_CUDA_CHECK(expr) ::weft::cuda::detail::check((expr), #expr)
