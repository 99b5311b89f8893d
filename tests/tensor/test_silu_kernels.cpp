// The fused SiLU kernel (tensor/cpu/silu/) on every instruction-set level the CPU has: its forward
// and gradient give exactly the bits of the per-element reference formulas
// (tensor/elementwise_math.h, sigmoid_arith), in float32 and bfloat16, over special values, the
// clamp of |x| at 110, the denormal range of e^−|x|, and ragged lengths; and silu() on a
// contiguous tensor (the fused kernel) agrees bit for bit with silu() on a strided view of the
// same values (the elementwise ops).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "activation_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/isa.h"
#include "tensor/elementwise_math.h"
#include "tensor/float_formats.h"
#include "tensor/fused_kernels.h"

using namespace weft;
using detail::BinaryOp;
using detail::UnaryOp;

namespace {

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


}  // namespace

TEST_CASE("fused SiLU: float32 forward and gradient are the reference's bits at every ISA level") {
  for (const int64_t n : {1, 7, 16, 17, 100'003})
    testing::check_activation_float32_bits(silu, forward_reference, backward_reference, inputs(n));
}

TEST_CASE("fused SiLU: bfloat16 is the reference computed in float32 and rounded once, at every ISA level") {
  testing::check_activation_bf16_bits(silu, forward_reference, backward_reference, inputs(4099));
}

TEST_CASE("silu: the fused kernel on a contiguous tensor and the elementwise ops on a strided view agree") {
  testing::check_activation_fused_matches_strided(silu, inputs(37 * 41), 37, 41);
}
