// The FP8 GEMM on CUDA (precision/cuda/fp8_gemm.cpp) against the CPU kernel on the same codes:
// E4M3 × E4M3 and E4M3 × E5M2, bfloat16 and float32 results, with and without bias, the TN
// layout of the forward and the layouts of the two gradients (which take transposed copies).
// Needs a GPU of compute capability 8.9 or newer; reported as skipped by doctest elsewhere (and
// in a build without CUDA). The rules themselves are tested on the CPU in
// tests/tensor/test_gemm_plan.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

bool fp8_gpu() {
  if (!cuda::is_available()) return false;
  const cuda::DeviceProperties p = cuda::get_device_properties();
  return p.major > 8 || (p.major == 8 && p.minor >= 9);
}
const bool kNoFp8Gpu = !fp8_gpu();

Fp8Tensor codes(const Tensor& x, DType dtype, float scale) {
  return Fp8Tensor(fp8_cast(x, dtype, scale), 1.0f / scale);
}

Fp8Tensor on_gpu(const Fp8Tensor& t) { return Fp8Tensor(t.data.to(Device("cuda")), t.scale_inv); }

}  // namespace

TEST_CASE("fp8_gemm on cuda equals the cpu kernel on the same codes" * doctest::skip(kNoFp8Gpu)) {
  Generator gen(11);
  const int64_t m = 32, k = 48, n = 16;
  const Tensor x = randn({m, k}, {}, &gen), w = randn({n, k}, {}, &gen), dy = randn({m, n}, {}, &gen);
  const Tensor bias = randn({n}, {}, &gen).to(kBFloat16);
  for (DType second : {kFloat8E4M3FN, kFloat8E5M2}) {
    CAPTURE(second);
    const Fp8Tensor xq = codes(x, kFloat8E4M3FN, 8.0f), wq = codes(w, second, 4.0f);
    // forward x·Wᵀ (TN as it is), input gradient dy·W and weight gradient dyᵀ·x (copied to TN)
    const Fp8Tensor dyq = codes(dy, kFloat8E4M3FN, 2.0f);
    const std::pair<Fp8Tensor, Fp8Tensor> products[] = {
        {xq, Fp8Tensor(wq.data.t(), wq.scale_inv)},
        {dyq, wq},
        {Fp8Tensor(dyq.data.t(), dyq.scale_inv), Fp8Tensor(codes(x, second, 8.0f).data, xq.scale_inv)}};
    for (const auto& [a, b] : products) {
      for (DType out : {kBFloat16, kFloat32}) {
        CAPTURE(out);
        const bool with_bias = b.data.size(1) == n;
        const Tensor cpu = fp8_gemm(a, b, out, with_bias ? bias : Tensor());
        const Tensor gpu = fp8_gemm(on_gpu(a), on_gpu(b), out, with_bias ? bias.to(Device("cuda")) : Tensor());
        REQUIRE(gpu.device().is_cuda());
        REQUIRE(gpu.dtype() == out);
        REQUIRE(gpu.shape() == cpu.shape());
        const auto g = gpu.to(kCPU).to_vector<double>(), c = cpu.to_vector<double>();
        const double rtol = out == kBFloat16 ? 1.6e-2 : 1e-5;
        for (size_t i = 0; i < c.size(); ++i) CHECK(std::abs(g[i] - c[i]) <= 1e-3 + rtol * std::abs(c[i]));
      }
    }
  }
}
