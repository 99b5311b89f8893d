// float16 / bfloat16 gradients on float32 / float64 parameters (what FSDP's
// keep_low_precision_grads hands the optimizer): widening a narrow value is exact, so a step with
// a narrow gradient must give exactly the bits of a step with the same values held in the
// parameter's dtype, for every optimizer, option and instruction-set level; pairs that make no
// sense are refused with the dtypes named.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "optim/all.h"

using namespace weft;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(const Tensor&)>;

struct Named {
  std::string name;
  MakeOptimizer make;
};

std::vector<Named> optimizers() {
  auto one = [](const Tensor& p) { return std::vector<Tensor>{p}; };
  return {
      {"adamw", [=](const Tensor& p) { return std::make_unique<optim::AdamW>(one(p), optim::AdamWOptions{.lr = 0.01}); }},
      {"adamw_amsgrad", [=](const Tensor& p) {
         return std::make_unique<optim::AdamW>(one(p), optim::AdamWOptions{.lr = 0.01, .amsgrad = true});
       }},
      {"adam_decay", [=](const Tensor& p) {
         return std::make_unique<optim::Adam>(one(p), optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
       }},
      {"sgd", [=](const Tensor& p) { return std::make_unique<optim::SGD>(one(p), optim::SGDOptions{.lr = 0.1}); }},
      {"sgd_nesterov", [=](const Tensor& p) {
         return std::make_unique<optim::SGD>(
             one(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
       }},
  };
}

// Four steps of `make` on a parameter of `param_dtype` from `init`, with gradients grads[k]
// converted to `grad_dtype`; returns the parameter and the optimizer's state tensors.
std::vector<Tensor> run(const MakeOptimizer& make, const Tensor& init, const std::vector<Tensor>& grads,
                        DType param_dtype, DType grad_dtype) {
  Tensor p = init.to(param_dtype).clone().requires_grad_();
  auto opt = make(p);
  for (const Tensor& g : grads) {
    p.set_grad(g.to(grad_dtype));
    opt->step();
  }
  std::vector<Tensor> out{p.detach()};
  for (const auto& [key, t] : opt->state_dict().tensors) out.push_back(t);
  return out;
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || a[i].nbytes() != b[i].nbytes() ||
        std::memcmp(a[i].data_ptr(), b[i].data_ptr(), a[i].nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("a float16 / bfloat16 gradient steps a wider parameter exactly as its values held in that width") {
  // Ragged block ends (kBlock = 1024), and enough elements for the AVX2 path's masked tail.
  const int64_t n = 2 * 1024 + 13;
  const Tensor init = linspace(-1, 1, n);
  std::vector<Tensor> raw;
  for (int k = 0; k < 4; ++k) raw.push_back(randn({n}) * static_cast<double>(4 - k));
  for (const DType narrow : {kBFloat16, kFloat16}) {
    // The gradients' values, already representable in the narrow dtype.
    std::vector<Tensor> grads;
    for (const Tensor& g : raw) grads.push_back(g.to(narrow).to(kFloat64));
    for (const DType wide : {kFloat32, kFloat64})
      for (const auto& optimizer : optimizers())
        for (const CpuIsa isa : cpu_isas_supported()) {
          const std::string& name = optimizer.name;
          const MakeOptimizer& make = optimizer.make;
          CAPTURE(dtype_name(narrow));
          CAPTURE(dtype_name(wide));
          CAPTURE(name);
          CAPTURE(cpu_isa_name(isa));
          CpuIsaGuard guard(isa);
          const auto expected = run(make, init, grads, wide, wide);
          const auto got = run(make, init, grads, wide, narrow);
          CHECK(got[0].dtype() == wide);
          CHECK(same_bits(got, expected));
        }
  }
}

TEST_CASE("a bfloat16 gradient on a float32 parameter: SGD's step by hand") {
  // 0.3 is not a bfloat16; its nearest bfloat16 is 0.30078125 (0x3E9A), which the update must use.
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.5});
  p.set_grad(tensor({0.3, -4.0}, kBFloat16));
  opt.step();
  CHECK(p.dtype() == kFloat32);
  CHECK(p.grad().dtype() == kBFloat16);  // the optimizer does not replace the gradient
  const auto got = p.to_vector<float>();
  CHECK(got[0] == 1.0f - 0.5f * 0.30078125f);
  CHECK(got[1] == 0.0f);
}

TEST_CASE("gradient dtypes that do not fit the parameter are refused, naming both") {
  for (const auto& optimizer : optimizers()) {
    const std::string& name = optimizer.name;
    const MakeOptimizer& make = optimizer.make;
    CAPTURE(name);
    Tensor p = zeros({2}).requires_grad_();
    auto opt = make(p);
    p.set_grad(zeros({2}, kInt32));
    CHECK_THROWS_WITH_AS(opt->step(), doctest::Contains("float32 parameter has a int32 gradient; expected float32 "
                                                        "(or float16 / bfloat16, widened in the update)"),
                         Error);
    p.set_grad(zeros({2}, kFloat64));
    CHECK_THROWS_WITH_AS(opt->step(), doctest::Contains("float32 parameter has a float64 gradient"), Error);

    Tensor half = zeros({2}, kBFloat16).requires_grad_();
    auto opt_half = make(half);
    half.set_grad(zeros({2}, kFloat32));
    CHECK_THROWS_WITH_AS(opt_half->step(), doctest::Contains("bfloat16 parameter has a float32 gradient; expected "
                                                             "bfloat16"),
                         Error);
    half.set_grad(zeros({2}, kFloat16));
    CHECK_THROWS_WITH_AS(opt_half->step(), doctest::Contains("bfloat16 parameter has a float16 gradient"), Error);
    CHECK(equal(half.detach(), zeros({2}, kBFloat16)));  // nothing was updated
  }
}
