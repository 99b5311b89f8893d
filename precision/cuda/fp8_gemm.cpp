// The FP8 GEMM on CUDA (precision/fp8/fp8_gemm.h): cuBLASLt with the operands' factors
// (device_scale_inv, or scale_inv uploaded) as its A/B scale pointers, on compute capability 8.9
// and newer only (checked per device at run time, with the device's capability in the error).
//
//   out = (A · B) · (a.scale_inv · b.scale_inv) + bias,    A: (M, K), B: (K, N), out: (M, N)
//
// cuBLASLt takes FP8 only in the TN layout (tensor/gemm_plan.h): A must be row-contiguous and B
// the transpose of a row-contiguous (N, K) matrix, as in the forward x·Wᵀ. An operand in the
// other layout (the gradients' dy·W and dyᵀ·x) is first copied into the one it needs — a
// transposed FP8 copy, codes unchanged. bfloat16 results take the bias in cuBLASLt's epilogue
// (the bias rounded to bfloat16, the type cuBLASLt's FP8 bias has); other result dtypes are
// computed in float32, where cuBLASLt allows no bias, and the bias is added after (one more
// float32 rounding than the CPU kernel's fused epilogue), then converted.
//
// Note [FP8 accumulation on the GPU]: Hopper's FP8 tensor cores add the products of a chunk of K
// in an accumulator narrower than float32; cuBLASLt promotes the partial sums to float32 between
// chunks (CUBLASLT_MATMUL_DESC_FAST_ACCUM, left at its default 0, would skip even that). So a
// float32 result is close to, not equal to, the CPU kernel's float32 sum of the same exact
// products. Measured on an H100 (2026-11-27): up to 2⁻¹³·⁵ of the largest output in an Fp8Linear
// step, and 0.0042 on a K = 48 product whose terms add up to about 30 in absolute value.
#include <array>
#include <mutex>
#include <optional>

#include "precision/fp8/fp8_gemm.h"
#include "tensor/cuda.h"
#include "tensor/cuda/cublaslt.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/gemm_plan.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft::detail {
namespace {

using precision::Fp8Tensor;

// The compute capability check, asked of the driver once per device.
void check_device(int device) {
  static std::mutex mutex;
  static std::array<std::optional<std::pair<int, int>>, 64> capability;
  std::pair<int, int> cc;
  {
    std::lock_guard lock(mutex);
    auto& known = capability[static_cast<size_t>(device)];
    if (!known) {
      const cuda::DeviceProperties p = cuda::get_device_properties(device);
      known = std::pair{p.major, p.minor};
    }
    cc = *known;
  }
  check_fp8_compute_capability(cc.first, cc.second);
}

// The operand's factor as one float32 element on the device: its device_scale_inv as it is (no
// wait for the device), or its scale_inv uploaded.
Tensor device_factor(const Fp8Tensor& t, Device device) {
  return t.device_scale_inv.defined() ? t.device_scale_inv : from_vector<float>({t.scale_inv}, {1}).to(device);
}

// A contiguous copy of `view` on its device (codes copied as they are).
Tensor packed(const Tensor& view) {
  Tensor out = cuda::detail::device_scratch(view.shape(), view.dtype(), view.device());
  cuda_backend().copy(view, out);
  return out;
}

Tensor fp8_gemm_on_cuda(const Fp8Tensor& a, const Fp8Tensor& b, DType out_dtype, const Tensor& bias) {
  const Device device = a.data.device();
  check_device(device.index);
  const int64_t m = a.data.size(0), k = a.data.size(1), n = b.data.size(1);
  // TN: a row-contiguous (M, K); b the transpose of a row-contiguous (N, K).
  const Tensor lhs = a.data.is_contiguous() ? a.data : packed(a.data);
  const Tensor rhs = b.data.t().is_contiguous() ? b.data : packed(b.data.t()).t();
  const Tensor a_factor = device_factor(a, device), b_factor = device_factor(b, device);
  const bool bf16 = out_dtype == kBFloat16;
  Tensor out = empty({m, n}, TensorOptions(bf16 ? kBFloat16 : kFloat32).device(device));
  const Tensor lt_bias = bf16 && bias.defined() ? bias.detach().to(kBFloat16).contiguous() : Tensor();
  const bool planned = cuda::detail::cublaslt_matmul(
      {lhs, rhs, lt_bias, out, GemmActivation::None, a_factor.data<float>(), b_factor.data<float>()});
  WEFT_CHECK(planned, "[fp8_gemm] no cuBLASLt plan for operands of strides ", lhs.strides(), " and ", rhs.strides(),
             " (K=", k, ")");
  if (!bf16 && bias.defined()) out = add(out, bias.detach().to(kFloat32));
  return bf16 || out_dtype == kFloat32 ? out : out.to(out_dtype);
}

}  // namespace

Fp8GemmFn* const cuda_fp8_gemm = &fp8_gemm_on_cuda;

}  // namespace weft::detail
