// The fused SiLU kernel (tensor/cpu/silu/) on every instruction-set level the CPU has: its forward
// and gradient give exactly the bits of the per-element reference formulas
// (tensor/elementwise_math.h, sigmoid_arith), in float32 and bfloat16, over special values, the
// clamp of |x| at 110, the denormal range of e^−|x|, and ragged lengths; and silu() on a
// contiguous tensor (the fused kernel) agrees bit for bit with silu() on a strided view of the
// same values (the elementwise ops).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/isa.h"
#include "tensor/elementwise_math.h"
#include "tensor/float_formats.h"
#include "tensor/fused_kernels.h"

using namespace weft;
using detail::BinaryOp;
using detail::UnaryOp;

namespace {

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// n values over [-120, 120] with the special ones first: zeros, infinities, NaN, the clamp at
// |x| = 110, where e^−|x| leaves the normal floats (87.3) and reaches 0 (103.3), tiny and huge
// magnitudes.
std::vector<float> inputs(int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,   -0.0f,  inf,     -inf,   std::numeric_limits<float>::quiet_NaN(), 110.0f, -110.0f,
                          -87.5f, -95.0f, -103.5f, 1e-30f, -1e-30f, 1e30f, -1e30f, 3.0f, -5.5f};
  const int64_t specials = static_cast<int64_t>(v.size());
  v.resize(static_cast<size_t>(std::max(n, specials)));
  for (int64_t i = specials; i < n; ++i)
    v[static_cast<size_t>(i)] = -120.0f + 240.0f * static_cast<float>(i) / static_cast<float>(n);
  v.resize(static_cast<size_t>(n));
  return v;
}

float forward_reference(float x) { return detail::unary_scalar<UnaryOp::Silu>(x, 0, 0); }
float backward_reference(float g, float x) { return detail::binary_scalar<BinaryOp::SiluBackward>(g, x); }

// Bit equality, NaN against any NaN.
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

}  // namespace

TEST_CASE("fused SiLU: float32 forward and gradient are the reference's bits at every ISA level") {
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const int64_t n : {1, 7, 16, 17, 100'003}) {
      CAPTURE(cpu_isa_name(isa));
      CAPTURE(n);
      const std::vector<float> xs = inputs(n);
      std::vector<float> gs(xs.size());
      for (size_t i = 0; i < gs.size(); ++i) gs[i] = 0.5f - static_cast<float>(i % 7) * 0.25f;
      const Tensor x = from_vector(xs, {n}, TensorOptions(kFloat32)).requires_grad_();
      const Tensor y = silu(x);
      y.backward(from_vector(gs, {n}, TensorOptions(kFloat32)));
      const std::vector<float> ys = y.detach().to_vector<float>(), dxs = x.grad().to_vector<float>();
      int wrong = 0;
      for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
        if (!same(ys[i], forward_reference(xs[i])) || !same(dxs[i], backward_reference(gs[i], xs[i]))) {
          ++wrong;
          CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", forward_reference(xs[i]), ", gradient ", dxs[i],
                        " vs ", backward_reference(gs[i], xs[i]));
        }
      }
    }
  }
}

TEST_CASE("fused SiLU: bfloat16 is the reference computed in float32 and rounded once, at every ISA level") {
  const int64_t n = 4099;
  const Tensor x16 = from_vector(inputs(n), {n}, TensorOptions(kFloat32)).to(kBFloat16);
  const Tensor g16 = full({n}, -0.75).to(kBFloat16);
  const std::vector<float> xs = x16.to(kFloat32).to_vector<float>();  // the values bfloat16 holds
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    const Tensor x = x16.clone().requires_grad_();
    const Tensor y = silu(x);
    y.backward(g16);
    const std::vector<float> ys = y.detach().to(kFloat32).to_vector<float>();
    const std::vector<float> dxs = x.grad().to(kFloat32).to_vector<float>();
    int wrong = 0;
    for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
      const float want_y = bfloat16_to_float(float_to_bfloat16(forward_reference(xs[i])));
      const float want_dx = bfloat16_to_float(float_to_bfloat16(backward_reference(-0.75f, xs[i])));
      if (!same(ys[i], want_y) || !same(dxs[i], want_dx)) {
        ++wrong;
        CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", want_y, ", gradient ", dxs[i], " vs ", want_dx);
      }
    }
  }
}

TEST_CASE("silu: the fused kernel on a contiguous tensor and the elementwise ops on a strided view agree") {
  const int64_t rows = 37, cols = 41;
  const Tensor base = from_vector(inputs(rows * cols), {cols, rows}, TensorOptions(kFloat32));
  const Tensor strided = base.t().detach().requires_grad_();  // (rows, cols), not contiguous
  const Tensor contiguous = base.t().contiguous().requires_grad_();
  REQUIRE_FALSE(strided.is_contiguous());
  const Tensor g = add(mul(arange(static_cast<double>(rows * cols)), 1e-3), -0.6).reshape({rows, cols});
  const Tensor a = silu(strided), b = silu(contiguous);
  a.backward(g);
  b.backward(g);
  const std::vector<float> av = a.detach().contiguous().to_vector<float>(), bv = b.detach().to_vector<float>();
  const std::vector<float> ag = strided.grad().contiguous().to_vector<float>(), bg = contiguous.grad().to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    REQUIRE(same(av[i], bv[i]));
    REQUIRE(same(ag[i], bg[i]));
  }
}
