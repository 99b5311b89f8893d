// GradScaler's CUDA kernel (precision/amp_kernels.h): every gradient of a device through one
// flag in device memory, read back once at the end (so unscale_ waits for the device, as the CPU
// kernel's result is needed on the host to decide the step).
#include <cuda_runtime_api.h>

#include "precision/amp_kernels.h"
#include "precision/cuda/amp_launch.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::precision::detail {
namespace {

bool unscale_on_cuda(const std::vector<Tensor>& grads, float inv_scale) {
  if (grads.empty()) return false;
  const Device device = grads.front().device();
  weft::cuda::detail::DeviceGuard guard(device.index);
  Tensor flag = weft::cuda::detail::device_scratch({1}, kInt32, device);
  cudaStream_t stream = weft::cuda::detail::stream_for(flag);
  WEFT_CUDA_CHECK(cudaMemsetAsync(flag.data_ptr(), 0, sizeof(int), stream));
  for (const Tensor& g : grads) {
    WEFT_CHECK(g.is_contiguous(), "[GradScaler] internal: gradients must be contiguous to be unscaled in place");
    WEFT_CHECK(is_floating(g.dtype()), "[GradScaler] expected floating gradients, got ", g.dtype());
    cuda_detail::launch_unscale(static_cast<char*>(g.data_ptr()), g.dtype(), g.numel(), inv_scale,
                                static_cast<int*>(flag.data_ptr()), stream);
  }
  int found = 0;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&found, flag.data_ptr(), sizeof found, cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return found != 0;
}

}  // namespace

UnscaleKernel* const cuda_unscale_kernel = &unscale_on_cuda;

}  // namespace weft::precision::detail
