// The FP8 GEMM front-end, its device seam and the CPU kernel (precision/fp8/fp8_gemm.h).
#include "precision/fp8/fp8_gemm.h"

#include <algorithm>
#include <array>
#include <mutex>

#include "precision/fp8/fp8_dispatch.h"
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision {
namespace {

std::mutex kernels_mutex;
std::array<Fp8GemmKernel, 2> installed;  // per DeviceType; empty: the built-in one

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

// The exact bfloat16 copy of an operand, in the operand's layout.
Tensor decoded_operand(const Fp8Tensor& t) {
  if (t.decoded.defined()) return t.decoded;
  if (t.data.is_contiguous()) return fp8_decode_bf16(t.data);
  return fp8_decode_bf16(t.data.t()).t();  // the transpose of a contiguous matrix
}

// acc: (M, N) float32 -> out: (M, N) = fma(acc, scale, bias) in float32 (one rounding, the same
// on every instruction set), then rounded to bfloat16 where asked; in place for float32.
Tensor epilogue(const Tensor& acc, float scale, const Tensor& bias, DType out_dtype) {
  const int64_t m = acc.size(0), n = acc.size(1);
  const Tensor bias32 = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  const bool bf16 = out_dtype == kBFloat16;
  const Tensor out = bf16 ? empty({m, n}, TensorOptions(kBFloat16).device(acc.device())) : acc;
  const weft::detail::Fp8KernelTable& k = weft::detail::fp8_kernels();
  constexpr int64_t kRowsPerTask = 16;
  parallel_for((m + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
    const int64_t begin = task * kRowsPerTask, rows = std::min(kRowsPerTask, m - begin);
    weft::detail::Fp8EpilogueArgs args{acc.data<float>() + begin * n, bias32.defined() ? bias32.data<float>() : nullptr,
                                 nullptr, nullptr, rows, n, scale};
    if (bf16) args.out_bf16 = static_cast<uint16_t*>(out.data_ptr()) + begin * n;
    else args.out_f32 = acc.data<float>() + begin * n;
    k.epilogue(args);
  });
  return bf16 || out_dtype == kFloat32 ? out : acc.to(out_dtype);
}

// The operand's factor: its device_scale_inv (here on the CPU) when it has one.
float factor_of(const Fp8Tensor& t) {
  return t.device_scale_inv.defined() ? t.device_scale_inv.item<float>() : t.scale_inv;
}

Tensor cpu_fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b, DType out_dtype, const Tensor& bias) {
  const Tensor a16 = decoded_operand(a), b16 = decoded_operand(b);
  const int64_t m = a16.size(0), n = b16.size(1);
  Tensor acc = empty({m, n}, TensorOptions(kFloat32).device(a16.device()));
  weft::detail::backend(a16.device()).matmul(a16.unsqueeze(0), b16.unsqueeze(0), acc.view({1, m, n}), false);
  return epilogue(acc, factor_of(a) * factor_of(b), bias, out_dtype);
}

void check_operand(const Fp8Tensor& t, const char* which) {
  WEFT_CHECK(t.data.defined(), "[fp8_gemm] operand ", which, " is undefined");
  WEFT_CHECK(is_fp8(t.data.dtype()), "[fp8_gemm] operand ", which, " must be float8_e4m3fn or float8_e5m2, got ",
             t.data.dtype());
  WEFT_CHECK(t.data.dim() == 2, "[fp8_gemm] operand ", which, " must be a matrix, got shape ", t.data.shape());
  WEFT_CHECK(t.data.is_contiguous() || t.data.t().is_contiguous(), "[fp8_gemm] operand ", which,
             " must be contiguous or the transpose of a contiguous matrix, got strides ", t.data.strides());
  WEFT_CHECK(!t.decoded.defined() || (t.decoded.dtype() == kBFloat16 && t.decoded.shape() == t.data.shape()),
             "[fp8_gemm] operand ", which, "'s decoded copy must be bfloat16 of shape ", t.data.shape());
  const Tensor& factor = t.device_scale_inv;
  WEFT_CHECK(!factor.defined() ||
                 (factor.dtype() == kFloat32 && factor.numel() == 1 && factor.device() == t.data.device()),
             "[fp8_gemm] operand ", which, "'s device_scale_inv must be one float32 element on ", t.data.device());
}

}  // namespace

Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b, DType out_dtype, const Tensor& bias) {
  check_operand(a, "a");
  check_operand(b, "b");
  WEFT_CHECK(a.data.size(1) == b.data.size(0), "[fp8_gemm] inner dimensions differ: ", a.data.shape(), " · ",
             b.data.shape());
  WEFT_CHECK(!(a.data.dtype() == kFloat8E5M2 && b.data.dtype() == kFloat8E5M2),
             "[fp8_gemm] Multiplication of two float8_e5m2 matrices is not supported; one operand must be "
             "float8_e4m3fn");
  WEFT_CHECK(a.data.device() == b.data.device(), "[fp8_gemm] expected both operands on the same device, got ",
             a.data.device(), " and ", b.data.device());
  WEFT_CHECK(is_floating(out_dtype) && !is_fp8(out_dtype), "[fp8_gemm] expected a float32, bfloat16, float16 or "
             "float64 result, got ", out_dtype);
  if (bias.defined())
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == b.data.size(1) && bias.device() == a.data.device(),
               "[fp8_gemm] expected a bias of shape (", b.data.size(1), ",) on ", a.data.device(), ", got ",
               bias.shape(), " on ", bias.device());
  const Fp8GemmKernel kernel = fp8_gemm_kernel(a.data.device().type);
  WEFT_CHECK(kernel != nullptr, "[fp8_gemm] no FP8 GEMM kernel for ", a.data.device(),
             a.data.device().is_cuda() ? ": weft was built without CUDA (configure with -DWEFT_CUDA=ON)" : "");
  return kernel(a, b, out_dtype, bias);
}

Fp8GemmKernel fp8_gemm_kernel(DeviceType device_type) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  const Fp8GemmKernel& set = installed[static_cast<size_t>(device_type)];
  if (set) return set;
  if (device_type == DeviceType::CPU) return Fp8GemmKernel(cpu_fp8_gemm);
  return weft::detail::cuda_fp8_gemm != nullptr ? Fp8GemmKernel(weft::detail::cuda_fp8_gemm) : Fp8GemmKernel();
}

void set_fp8_gemm_kernel(DeviceType device_type, Fp8GemmKernel kernel) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  installed[static_cast<size_t>(device_type)] = std::move(kernel);
}

}  // namespace weft::precision
