// Test-only gradient checker: compares the gradients autograd computes with central finite
// differences in float64, for every element of every input that requires grad.
//
// The function under test is reduced to a scalar by fixed pseudo-random weights, one tensor per
// output: L = Σ_k Σ_j out_k[j]·R_k[j]. The analytic side seeds each output's backward with R_k
// (so no op of weft is needed to form L), the numeric side computes
//   ∂L/∂x_i ≈ (L(x + eps·e_i) − L(x − eps·e_i)) / (2·eps)
// and they must agree within atol + rtol·|numeric|. Random weights rather than a plain sum make a
// rule that sends the right total to the wrong element fail.
//
// Every check runs twice: once with contiguous leaves, once with each floating input made a
// non-contiguous leaf (a transposed, stride-2 view of a larger buffer) holding the same values.
// Both must give gradients of the leaf's shape and dtype; leaves that do not require grad must
// get none. Integer and bool inputs (indices, masks) are passed through unchanged.
//
// Inputs marked requires_grad must be float64, and the function must be differentiable (no ties,
// no kinks) within eps of them: tests pick their values accordingly.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/all.h"

namespace weft::testing {

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
  bool check_noncontiguous = true;
  uint64_t seed = 20240917;  // of the output weights R
};

struct GradcheckReport {
  bool ok = true;
  std::string text;  // what disagreed, one line per finding (first few per input)
};

// A float64 tensor of uniform values in [lo, hi), reproducible from `seed`.
inline Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  return add(mul(rand(shape, kFloat64, &gen), hi - lo), lo);
}

// A float64 leaf that requires grad, values uniform in [lo, hi).
inline Tensor arg(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return uniform(shape, lo, hi, seed).requires_grad_();
}

// A float64 leaf that requires grad with |value| in [lo, hi) and a random sign: keeps abs, relu,
// clamp and friends away from their kinks.
inline Tensor arg_away_from_zero(const Shape& shape, uint64_t seed, double lo = 0.2, double hi = 1.0) {
  NoGradGuard no_grad;
  const Tensor magnitude = uniform(shape, lo, hi, seed);
  const Tensor sign = where(lt(uniform(shape, 0.0, 1.0, seed + 1), 0.5), full_like(magnitude, -1.0),
                            full_like(magnitude, 1.0));
  return mul(magnitude, sign).requires_grad_();
}

namespace detail {

// The same values in a non-contiguous layout: t's dims in reverse memory order (a transpose),
// with t's last dim taking every second slot of its buffer (a strided slice).
inline Tensor noncontiguous_copy(const Tensor& t) {
  NoGradGuard no_grad;
  if (t.dim() == 0) return t.clone();
  Shape reversed(t.shape().rbegin(), t.shape().rend());
  reversed[0] *= 2;
  const Tensor base = zeros(reversed, t.dtype());
  Shape back;
  for (int64_t d = t.dim() - 1; d >= 0; --d) back.push_back(d);
  Tensor view = base.slice(0, 0, reversed[0], 2).permute(back);
  view.copy_(t);
  return view;
}

inline Tensor fresh_leaf(const Tensor& input, bool noncontiguous) {
  if (!input.is_floating_point()) return input;
  Tensor leaf = noncontiguous ? noncontiguous_copy(input) : input.detach().clone();
  if (input.requires_grad()) leaf.requires_grad_();
  return leaf;
}

// Address of element `linear` (row-major over t's shape) of a strided float64 tensor.
inline double* element(const Tensor& t, int64_t linear) {
  double* p = t.data<double>();
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (linear % t.size(d)) * t.stride(d);
    linear /= t.size(d);
  }
  return p + offset;
}

template <class F>
std::vector<Tensor> outputs_of(F& fn, const std::vector<Tensor>& leaves) {
  if constexpr (std::is_same_v<std::invoke_result_t<F&, const std::vector<Tensor>&>, Tensor>) {
    return {fn(leaves)};
  } else {
    return fn(leaves);
  }
}

inline std::vector<Tensor> output_weights(const std::vector<Tensor>& outs, uint64_t seed) {
  std::vector<Tensor> weights;
  for (size_t k = 0; k < outs.size(); ++k) {
    Generator gen(seed + k);
    weights.push_back(randn(outs[k].shape(), kFloat64, &gen));
  }
  return weights;
}

inline double weighted_sum(const std::vector<Tensor>& outs, const std::vector<Tensor>& weights) {
  double total = 0.0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].is_floating_point()) continue;
    const auto o = outs[k].to_vector<double>();
    const auto w = weights[k].to_vector<double>();
    for (size_t j = 0; j < o.size(); ++j) total += o[j] * w[j];
  }
  return total;
}

template <class F>
void check_layout(F& fn, const std::vector<Tensor>& inputs, bool noncontiguous, const GradcheckOptions& opt,
                  GradcheckReport& report) {
  const char* layout = noncontiguous ? "non-contiguous" : "contiguous";
  bool ok = true;
  auto fail = [&](const std::string& line) {
    ok = report.ok = false;
    report.text += std::string("[") + layout + "] " + line + "\n";
  };

  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) leaves.push_back(fresh_leaf(input, noncontiguous));
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].requires_grad() && leaves[i].dtype() != kFloat64)
      fail("input " + std::to_string(i) + " requires grad but is not float64");
  if (!ok) return;

  // Analytic: seed every differentiable output with its weights.
  const std::vector<Tensor> outs = outputs_of(fn, leaves);
  const std::vector<Tensor> weights = output_weights(outs, opt.seed);
  std::vector<size_t> roots;
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].is_floating_point() && outs[k].requires_grad()) roots.push_back(k);
  if (roots.empty()) {
    fail("no output requires grad");
    return;
  }
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& out = outs[roots[r]];
    out.backward(weights[roots[r]].to(out.dtype()), /*retain_graph=*/r + 1 < roots.size());
  }

  // Numeric: perturb each element of each leaf that requires grad, one at a time.
  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& leaf = leaves[i];
    const std::string name = "input " + std::to_string(i);
    if (!leaf.is_floating_point() || !leaf.requires_grad()) {
      if (leaf.is_floating_point() && leaf.grad().defined()) fail(name + " does not require grad but got one");
      continue;
    }
    const Tensor grad = leaf.grad();
    std::vector<double> analytic(static_cast<size_t>(leaf.numel()), 0.0);  // no grad = zero gradient
    if (grad.defined()) {
      if (grad.shape() != leaf.shape() || grad.dtype() != leaf.dtype()) {
        std::ostringstream os;
        os << name << ": gradient has shape " << ::weft::detail::cat(grad.shape()) << " and dtype " << grad.dtype()
           << ", the input has " << ::weft::detail::cat(leaf.shape()) << " and " << leaf.dtype();
        fail(os.str());
        continue;
      }
      analytic = grad.to_vector<double>();
    }
    int reported = 0;
    for (int64_t j = 0; j < leaf.numel(); ++j) {
      double* x = element(leaf, j);
      const double original = *x;
      *x = original + opt.eps;
      const double plus = weighted_sum(outputs_of(fn, leaves), weights);
      *x = original - opt.eps;
      const double minus = weighted_sum(outputs_of(fn, leaves), weights);
      *x = original;
      const double numeric = (plus - minus) / (2.0 * opt.eps);
      const double a = analytic[static_cast<size_t>(j)];
      if (!(std::fabs(a - numeric) <= opt.atol + opt.rtol * std::fabs(numeric)) && reported++ < 4) {
        std::ostringstream os;
        os.precision(10);
        os << name << " element " << j << ": analytic " << a << ", numeric " << numeric;
        fail(os.str());
      }
    }
  }
}

}  // namespace detail

// Runs the comparison and returns what disagreed. `fn` takes the leaves (in the order of
// `inputs`) and returns a Tensor or a std::vector<Tensor>.
template <class F>
GradcheckReport check_gradients(F fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {}) {
  GradcheckReport report;
  detail::check_layout(fn, inputs, false, opt, report);
  if (opt.check_noncontiguous) detail::check_layout(fn, inputs, true, opt, report);
  return report;
}

// The doctest form: one CHECK that names every disagreement.
template <class F>
void gradcheck(F fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {}) {
  const GradcheckReport report = check_gradients(std::move(fn), inputs, opt);
  CHECK_MESSAGE(report.ok, report.text);
}

}  // namespace weft::testing
