// The CUDA kernels of the scaled FP8 casts (precision/fp8/fp8_cast_kernels.h): each fills the
// plain arguments of precision/cuda/fp8_launch.h from its launch and queues the kernels on the
// current stream of the tensors' device. Nothing is read back: the amax stays on the device.
#include <cuda_runtime_api.h>

#include "precision/cuda/fp8_launch.h"
#include "precision/fp8/fp8_cast_kernels.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::precision::detail {
namespace {

using weft::cuda::detail::DeviceGuard;
using weft::cuda::detail::stream_for;

float* float_ptr(const Tensor& t) { return t.defined() ? static_cast<float*>(t.data_ptr()) : nullptr; }

void cast_on_cuda(const Fp8CastLaunch& l) {
  const Device device = l.source.device();
  DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(l.source);
  cuda_detail::Fp8CastArgs args{};
  args.src = l.source.data_ptr();
  args.src_bf16 = l.source.dtype() == kBFloat16;
  args.codes = l.codes.defined() ? static_cast<uint8_t*>(l.codes.data_ptr()) : nullptr;
  args.decoded = l.decoded.defined() ? static_cast<uint16_t*>(l.decoded.data_ptr()) : nullptr;
  args.n = l.source.numel();
  args.scale = l.scale;
  args.scale_on_device = float_ptr(l.scale_on_device);
  args.scale_inv = float_ptr(l.scale_inv);
  args.amax = float_ptr(l.amax);
  args.e5m2 = l.codes.defined() && l.codes.dtype() == kFloat8E5M2;
  args.saturate = l.saturate;
  // Freed in the order of this stream (tensor/cuda/allocator.cpp), so after the kernels that use it.
  Tensor amax_bits;
  if (args.amax) {
    amax_bits = weft::cuda::detail::device_scratch({1}, kInt32, device);
    args.amax_bits = static_cast<uint32_t*>(amax_bits.data_ptr());
    WEFT_CUDA_CHECK(cudaMemsetAsync(args.amax_bits, 0, sizeof(uint32_t), stream));
  }
  cuda_detail::launch_fp8_cast(args, stream);
}

void dequantize_on_cuda(const Fp8DequantizeLaunch& l) {
  DeviceGuard guard(l.codes.device().index);
  weft::detail::Fp8DecodeArgs args{};
  args.codes = static_cast<const uint8_t*>(l.codes.data_ptr());
  if (l.out.dtype() == kFloat32) args.out_f32 = static_cast<float*>(l.out.data_ptr());
  else args.out_bf16 = static_cast<uint16_t*>(l.out.data_ptr());
  args.n = l.codes.numel();
  args.scale_inv = l.scale_inv;
  args.e5m2 = l.codes.dtype() == kFloat8E5M2;
  cuda_detail::launch_fp8_dequantize(args, stream_for(l.codes));
}

}  // namespace

Fp8CastKernel* const cuda_fp8_cast = &cast_on_cuda;
Fp8DequantizeKernel* const cuda_fp8_dequantize = &dequantize_on_cuda;

}  // namespace weft::precision::detail
