// The per-device kernel tables of the quantized products, and the 4-bit product on tensors.
#include "precision/quant/quant_kernels.h"

#include <array>
#include <mutex>

#include "precision/quant/gemm_4bit.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::precision::quant {
namespace {

constexpr size_t kDeviceTypes = 2;  // CPU, CUDA
std::mutex kernels_mutex;
std::array<Gemm4bitKernel, kDeviceTypes> installed_4bit;
std::array<Int8GemmKernel, kDeviceTypes> installed_int8;

}  // namespace

Tensor matmul_4bit(const Tensor& x, const Tensor& packed, const QuantState& state, const Tensor& block_absmax,
                   Product4bit product) {
  WEFT_CHECK(state.shape.size() == 2 && (state.type == QuantKind::NF4 || state.type == QuantKind::FP4),
             "[matmul_4bit] expected an NF4 or FP4 matrix, got shape ", state.shape, " of ",
             quant_format(state.type).name);
  const int64_t n = state.shape[0], k = state.shape[1];
  WEFT_CHECK(x.defined() && (x.dtype() == kFloat32 || x.dtype() == kBFloat16) && x.dim() == 2 && x.size(1) == k &&
                 x.is_contiguous(),
             "[matmul_4bit] expected x as a contiguous float32 or bfloat16 (M, ", k, ") tensor, got ",
             x.defined() ? weft::detail::cat(x.shape(), " ", x.dtype()) : std::string("none"));
  WEFT_CHECK(packed.device() == x.device(), "[matmul_4bit] expected the weight on x's device ", x.device(),
             ", got it on ", packed.device());
  if (const Gemm4bitKernel kernel = gemm_4bit_kernel(x.device().type)) return kernel(x, packed, state, block_absmax);
  WEFT_CHECK(x.device().is_cpu(), "[matmul_4bit] no 4-bit kernel for ", x.device(),
             " in this build; the CUDA backend installs one with set_gemm_4bit_kernel");
  WEFT_CHECK(packed.dtype() == kUInt8 && packed.is_contiguous() && packed.numel() == (n * k + 1) / 2 &&
                 block_absmax.dtype() == kFloat32 && block_absmax.is_contiguous() &&
                 block_absmax.numel() == state.num_blocks(),
             "[matmul_4bit] expected ", (n * k + 1) / 2, " packed uint8 codes and ", state.num_blocks(),
             " float32 block absmax, got ", packed.numel(), " ", packed.dtype(), " and ", block_absmax.numel(), " ",
             block_absmax.dtype());
  Tensor y = weft::detail::make_tensor({x.size(0), n}, kFloat32, kCPU);
  const Weights4bit w{packed.data<uint8_t>(), block_absmax.data<float>(), n, k, state.blocksize, state.type};
  if (x.dtype() == kBFloat16) {
    gemm_4bit_bf16(static_cast<const uint16_t*>(x.data_ptr()), x.size(0), w, y.data<float>(), product);
  } else {
    gemm_4bit(x.data<float>(), x.size(0), w, y.data<float>(), product);
  }
  return y;
}

Gemm4bitKernel gemm_4bit_kernel(DeviceType device_type) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  return installed_4bit[static_cast<size_t>(device_type)];
}

Int8GemmKernel int8_gemm_kernel(DeviceType device_type) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  return installed_int8[static_cast<size_t>(device_type)];
}

void set_gemm_4bit_kernel(DeviceType device_type, Gemm4bitKernel kernel) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  installed_4bit[static_cast<size_t>(device_type)] = std::move(kernel);
}

void set_int8_gemm_kernel(DeviceType device_type, Int8GemmKernel kernel) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  installed_int8[static_cast<size_t>(device_type)] = std::move(kernel);
}

}  // namespace weft::precision::quant
