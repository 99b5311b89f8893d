// FP8 weight-only quantization, dequantization and the product (precision/fp8/fp8_weight_ops.h):
// argument checks, the row loops split over weft's threads, and the GEMV kernel or the blocked
// GEMM chosen by the number of input rows.
#include "precision/fp8/fp8_weight_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "precision/fp8/fp8_cast.h"
#include "precision/fp8/fp8_dispatch.h"
#include "precision/fp8/fp8_gemv_kernels.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/cpu/isa.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision {
namespace {

constexpr float kE4M3Max = 448.0f;
constexpr int64_t kGemvRowsPerTask = 16;        // output rows one thread takes at a time
constexpr int64_t kGemvThreadedWork = 1 << 16;  // weight elements below which one thread is faster
constexpr int64_t kBlockElements = 1 << 20;     // weight elements per dequantized block (4 MB of float32)

using GemvKernel = void (*)(const detail::Fp8GemvArgs&);

GemvKernel gemv_kernel() {
  const CpuIsa isa = cpu_isa();
  if (isa >= CpuIsa::Avx512) return detail::fp8_gemv_avx512;
  if (isa == CpuIsa::Avx2) return detail::fp8_gemv_avx2;
  return detail::fp8_gemv_scalar;
}

// The float32 scale for a slice whose max |w| is amax, and the factor the cast multiplies by.
struct ScalePair {
  float scale;
  float inverse;
};
ScalePair scale_for(float amax) {
  const float scale = amax / kE4M3Max;
  const float inverse = 1.0f / scale;
  if (amax == 0.0f || !std::isfinite(inverse)) return {1.0f, 1.0f};
  return {scale, inverse};
}

void check_codes(const Tensor& codes, const char* op) {
  WEFT_CHECK(codes.defined() && codes.dtype() == kFloat8E4M3FN && codes.dim() == 2 && codes.device().is_cpu(), "[", op,
             "] expected float8_e4m3fn codes (out, in) on the CPU, got ",
             codes.defined() ? weft::detail::cat(codes.dtype(), " ", codes.shape(), " on ", codes.device())
                             : std::string("none"));
}

void check_scale(const Tensor& scale, int64_t out, const char* op) {
  WEFT_CHECK(scale.defined() && scale.dtype() == kFloat32 && scale.device().is_cpu() &&
                 (scale.dim() == 0 || scale.shape() == Shape({out})),
             "[", op, "] expected a float32 scale of shape () or ", Shape({out}), " on the CPU, got ",
             scale.defined() ? weft::detail::cat(scale.dtype(), " ", scale.shape()) : std::string("none"));
}

}  // namespace

Fp8QuantizedWeight quantize_fp8_weight(const Tensor& w, bool per_channel) {
  WEFT_CHECK(w.defined() && w.is_floating_point() && w.dim() == 2 && w.device().is_cpu() &&
                 !(w.dtype() == kFloat8E4M3FN || w.dtype() == kFloat8E5M2),
             "[quantize_fp8_weight] expected a floating (out, in) weight on the CPU, got ",
             w.defined() ? weft::detail::cat(w.dtype(), " ", w.shape(), " on ", w.device()) : std::string("none"));
  const bool bf16 = w.dtype() == kBFloat16;
  const Tensor source = (bf16 || w.dtype() == kFloat32 ? w.detach() : w.detach().to(kFloat32)).contiguous();
  const int64_t out = source.size(0), in = source.size(1);
  const int64_t item = bf16 ? 2 : 4;
  const auto* base = static_cast<const uint8_t*>(source.data_ptr());
  const detail::Fp8KernelTable& kernels = detail::fp8_kernels();

  // (out) max |w| per row, NaN-propagating.
  std::vector<float> amax(static_cast<size_t>(out));
  parallel_for_if(out * in >= kGemvThreadedWork, out,
                  [&](int64_t j) { amax[static_cast<size_t>(j)] = kernels.amax(base + j * in * item, bf16, in); });
  for (int64_t j = 0; j < out; ++j)
    WEFT_CHECK(std::isfinite(amax[static_cast<size_t>(j)]), "[quantize_fp8_weight] the weight's row ", j,
               " holds NaN or Inf, which has no FP8 scale");

  Tensor scale = per_channel ? empty({out}, kFloat32) : empty({}, kFloat32);
  std::vector<float> inverse(static_cast<size_t>(out));
  if (per_channel) {
    for (int64_t j = 0; j < out; ++j) {
      const ScalePair s = scale_for(amax[static_cast<size_t>(j)]);
      scale.data<float>()[j] = s.scale;
      inverse[static_cast<size_t>(j)] = s.inverse;
    }
  } else {
    const float tensor_amax = out == 0 ? 0.0f : *std::max_element(amax.begin(), amax.end());
    const ScalePair s = scale_for(tensor_amax);
    scale.data<float>()[0] = s.scale;
    std::fill(inverse.begin(), inverse.end(), s.inverse);
  }

  // Kept as long as its layer: memory of its exact size, not a size class (tensor/cpu/exact_memory.h).
  Tensor codes = exact_empty({out, in}, kFloat8E4M3FN);
  auto* code_base = static_cast<uint8_t*>(codes.data_ptr());
  parallel_for_if(out * in >= kGemvThreadedWork, out, [&](int64_t j) {
    kernels.encode(detail::Fp8EncodeArgs{base + j * in * item, bf16, code_base + j * in, nullptr, in,
                                         inverse[static_cast<size_t>(j)], /*e5m2=*/false, /*saturate=*/true});
  });
  return {codes, scale};
}

Tensor dequantize_fp8_weight(const Tensor& codes_in, const Tensor& scale) {
  check_codes(codes_in, "dequantize_fp8_weight");
  const int64_t out = codes_in.size(0), in = codes_in.size(1);
  check_scale(scale, out, "dequantize_fp8_weight");
  const Tensor codes = codes_in.contiguous();
  const Tensor s = scale.contiguous();
  Tensor result = empty({out, in}, kFloat32);
  const auto* code_base = static_cast<const uint8_t*>(codes.data_ptr());
  const detail::Fp8KernelTable& kernels = detail::fp8_kernels();
  parallel_for_if(out * in >= kGemvThreadedWork, out, [&](int64_t j) {
    const float sj = s.dim() == 0 ? s.data<float>()[0] : s.data<float>()[j];
    kernels.decode(detail::Fp8DecodeArgs{code_base + j * in, result.data<float>() + j * in, nullptr, in, sj, false});
  });
  return result;
}

Tensor fp8_weight_matmul(const Tensor& x_in, const Tensor& codes_in, const Tensor& scale, const Tensor& bias_in) {
  check_codes(codes_in, "fp8_weight_matmul");
  const int64_t out = codes_in.size(0), in = codes_in.size(1);
  check_scale(scale, out, "fp8_weight_matmul");
  WEFT_CHECK(
      x_in.defined() && x_in.dtype() == kFloat32 && x_in.dim() == 2 && x_in.size(1) == in && x_in.device().is_cpu(),
      "[fp8_weight_matmul] expected float32 activations (m, ", in, ") on the CPU, got ",
      x_in.defined() ? weft::detail::cat(x_in.dtype(), " ", x_in.shape()) : std::string("none"));
  WEFT_CHECK(!bias_in.defined() || (bias_in.dtype() == kFloat32 && bias_in.shape() == Shape({out})),
             "[fp8_weight_matmul] expected a float32 bias ", Shape({out}), ", got ",
             bias_in.defined() ? weft::detail::cat(bias_in.dtype(), " ", bias_in.shape()) : std::string("none"));
  const Tensor x = x_in.contiguous(), codes = codes_in.contiguous(), s = scale.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  const int64_t m = x.size(0);
  Tensor y = empty({m, out}, kFloat32);
  if (m == 0 || out == 0) return y;

  const float* row_scales = s.dim() == 0 ? nullptr : s.data<float>();
  const float tensor_scale = s.dim() == 0 ? s.data<float>()[0] : 1.0f;
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  const auto* code_base = static_cast<const uint8_t*>(codes.data_ptr());

  if (m <= kFp8GemvMaxRows) {
    const GemvKernel kernel = gemv_kernel();
    const int64_t tasks = (out + kGemvRowsPerTask - 1) / kGemvRowsPerTask;
    parallel_for_if(out * in >= kGemvThreadedWork, tasks, [&](int64_t t) {
      const int64_t begin = t * kGemvRowsPerTask, end = std::min(out, begin + kGemvRowsPerTask);
      kernel(detail::Fp8GemvArgs{code_base, x.data<float>(), row_scales, tensor_scale, b, y.data<float>(), m, in, out,
                                 begin, end});
    });
    return y;
  }

  // Blocks of weight rows decoded to their exact values (no scale), multiplied by the GEMM, then
  // scaled and biased once per output as the GEMV does.
  const int64_t block = std::max<int64_t>(16, kBlockElements / std::max<int64_t>(in, 1));
  for (int64_t j0 = 0; j0 < out; j0 += block) {
    const int64_t n = std::min(block, out - j0);
    const Tensor values = fp8_dequantize(codes.narrow(0, j0, n), 1.0f, kFloat32);  // (n, in)
    const Tensor partial = linear(x, values).contiguous();                         // (m, n)
    const float* p = partial.data<float>();
    float* yd = y.data<float>();
    parallel_for_if(m * n >= kGemvThreadedWork, m, [&](int64_t i) {
      for (int64_t jj = 0; jj < n; ++jj) {
        const int64_t j = j0 + jj;
        const float sj = row_scales ? row_scales[j] : tensor_scale;
        yd[i * out + j] = std::fma(p[i * n + jj], sj, b ? b[j] : 0.0f);
      }
    });
  }
  return y;
}

bool fp8_codes_have_nan(const Tensor& codes_in) {
  check_codes(codes_in, "fp8_codes_have_nan");
  const Tensor codes = codes_in.contiguous();
  const auto* c = static_cast<const uint8_t*>(codes.data_ptr());
  const int64_t n = codes.numel();
  for (int64_t i = 0; i < n; ++i)
    if ((c[i] & 0x7F) == 0x7F) return true;
  return false;
}

}  // namespace weft::precision
