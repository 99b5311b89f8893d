// The checks the fused activation kernels' tests share (test_gelu_kernels.cpp,
// test_silu_kernels.cpp): an op y = op(x) against its per-element scalar references
// (tensor/elementwise_math.h), bit for bit, through autograd (forward and gradient), at every
// instruction-set level the CPU has.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/float_formats.h"

namespace weft::testing {

// float32 over `xs` (its length leaving vector tails or not), upstream gradients cycling through
// 0.5, 0.25, …, −1: forward(x) and backward(g, x) exactly. Reports the first three misses.
template <class Op, class Forward, class Backward>
void check_activation_float32_bits(Op op, Forward forward, Backward backward, const std::vector<float>& xs) {
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> gs(xs.size());
  for (size_t i = 0; i < gs.size(); ++i) gs[i] = 0.5f - static_cast<float>(i % 7) * 0.25f;
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    CAPTURE(n);
    const Tensor x = from_vector(xs, {n}, TensorOptions(kFloat32)).requires_grad_();
    const Tensor y = op(x);
    y.backward(from_vector(gs, {n}, TensorOptions(kFloat32)));
    const std::vector<float> ys = y.detach().to_vector<float>(), dxs = x.grad().to_vector<float>();
    int wrong = 0;
    for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
      if (!same_bits(ys[i], forward(xs[i])) || !same_bits(dxs[i], backward(gs[i], xs[i]))) {
        ++wrong;
        CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", forward(xs[i]), ", gradient ", dxs[i], " vs ",
                      backward(gs[i], xs[i]));
      }
    }
  }
}

// bfloat16: `wide` rounded to bfloat16, the gradient −0.75 everywhere; forward and gradient are the
// float32 references on the values bfloat16 holds, rounded once.
template <class Op, class Forward, class Backward>
void check_activation_bf16_bits(Op op, Forward forward, Backward backward, const std::vector<float>& wide) {
  const int64_t n = static_cast<int64_t>(wide.size());
  const Tensor x16 = from_vector(wide, {n}, TensorOptions(kFloat32)).to(kBFloat16);
  const Tensor g16 = full({n}, -0.75).to(kBFloat16);
  const std::vector<float> xs = x16.to(kFloat32).to_vector<float>();
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    const Tensor x = x16.clone().requires_grad_();
    const Tensor y = op(x);
    y.backward(g16);
    const std::vector<float> ys = y.detach().to(kFloat32).to_vector<float>();
    const std::vector<float> dxs = x.grad().to(kFloat32).to_vector<float>();
    int wrong = 0;
    for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
      const float want_y = bfloat16_to_float(float_to_bfloat16(forward(xs[i])));
      const float want_dx = bfloat16_to_float(float_to_bfloat16(backward(-0.75f, xs[i])));
      if (!same_bits(ys[i], want_y) || !same_bits(dxs[i], want_dx)) {
        ++wrong;
        CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", want_y, ", gradient ", dxs[i], " vs ", want_dx);
      }
    }
  }
}

// op on a contiguous float32 tensor (the fused kernel) and on a strided view of the same values
// (the elementwise ops) agree bit for bit, forward and gradient; `values` holds rows × cols.
template <class Op>
void check_activation_fused_matches_strided(Op op, const std::vector<float>& values, int64_t rows, int64_t cols) {
  const Tensor base = from_vector(values, {cols, rows}, TensorOptions(kFloat32));
  const Tensor strided = base.t().detach().requires_grad_();  // (rows, cols), not contiguous
  const Tensor contiguous = base.t().contiguous().requires_grad_();
  REQUIRE_FALSE(strided.is_contiguous());
  const Tensor g = add(mul(arange(static_cast<double>(rows * cols)), 1e-3), -0.6).reshape({rows, cols});
  const Tensor a = op(strided), b = op(contiguous);
  a.backward(g);
  b.backward(g);
  const std::vector<float> av = a.detach().contiguous().to_vector<float>(), bv = b.detach().to_vector<float>();
  const std::vector<float> ag = strided.grad().contiguous().to_vector<float>(), bg = contiguous.grad().to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    REQUIRE(same_bits(av[i], bv[i]));
    REQUIRE(same_bits(ag[i], bg[i]));
  }
}

}  // namespace weft::testing
