// Optimizers against PyTorch 1.13 (golden values from scripts/golden_optim.py), the exactness of
// a state-dict round trip, and the behaviour around the update: in-place writes, skipped
// parameters, zero_grad, low-precision state, and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "optim/golden_optim.h"
#include "optim/all.h"

using namespace weft;
namespace golden = golden_optim;

namespace {

Shape golden_shape(int p) {
  const auto& s = golden::kShapes[p];
  return s[1] == 0 ? Shape{s[0]} : Shape{s[0], s[1]};
}

// The golden parameters (or gradients) as tensors of `dtype`, from the concatenated values.
std::vector<Tensor> golden_tensors(const double* values, DType dtype) {
  std::vector<Tensor> out;
  const double* at = values;
  for (int p = 0; p < golden::kNumParams; ++p) {
    const Shape shape = golden_shape(p);
    const int64_t n = detail::shape_numel(shape);
    out.push_back(from_vector(std::vector<double>(at, at + n), shape, dtype));
    at += n;
  }
  return out;
}

std::vector<double> concat(const std::vector<Tensor>& tensors) {
  std::vector<double> out;
  for (const Tensor& t : tensors)
    for (double v : t.to_vector<double>()) out.push_back(v);
  return out;
}

template <class Options>
Options options_of(const golden::Group& g) {
  Options o;
  o.lr = g.lr;
  if constexpr (std::is_same_v<Options, optim::SGDOptions>) {
    o.momentum = g.momentum;
    o.dampening = g.dampening;
    o.nesterov = g.nesterov;
  } else {
    o.betas = {g.beta1, g.beta2};
    o.eps = g.eps;
    o.amsgrad = g.amsgrad;
  }
  o.weight_decay = g.weight_decay;
  return o;
}

template <class Opt, class Options>
std::unique_ptr<optim::Optimizer> make_typed(const golden::OptimCase& c, const std::vector<Tensor>& params) {
  const int first = c.groups[0].num_params;
  auto opt = std::make_unique<Opt>(std::vector<Tensor>(params.begin(), params.begin() + first),
                                   options_of<Options>(c.groups[0]));
  if (c.num_groups == 2)
    opt->add_param_group(std::vector<Tensor>(params.begin() + first, params.end()), options_of<Options>(c.groups[1]));
  return opt;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const golden::OptimCase& c, const std::vector<Tensor>& params) {
  const std::string kind = c.optimizer;
  if (kind == "SGD") return make_typed<optim::SGD, optim::SGDOptions>(c, params);
  if (kind == "Adam") return make_typed<optim::Adam, optim::AdamOptions>(c, params);
  return make_typed<optim::AdamW, optim::AdamWOptions>(c, params);
}

struct Run {
  std::vector<Tensor> params;
  std::unique_ptr<optim::Optimizer> opt;
  DType dtype;

  explicit Run(const golden::OptimCase& c) : dtype(dtype_from_name(c.dtype)) {
    params = golden_tensors(c.init, dtype);
    for (Tensor& p : params) p.requires_grad_();
    opt = make_optimizer(c, params);
  }
  void step(const golden::OptimCase& c, int k) {
    const std::vector<Tensor> grads = golden_tensors(c.grads[k], dtype);
    for (size_t p = 0; p < params.size(); ++p) params[p].set_grad(grads[p]);
    opt->step();
  }
};

void check_close(const std::vector<double>& got, const double* expected, double tol, const std::string& what) {
  REQUIRE(got.size() == static_cast<size_t>(golden::kNumel));
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what, " element ", i, ": got ", got[i], ", expected ", expected[i]);
    CHECK(std::abs(got[i] - expected[i]) <= tol);
  }
}

bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || std::memcmp(a[i].data_ptr(), b[i].data_ptr(), a[i].nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("optimizers match PyTorch 1.13 step by step") {
  for (const golden::OptimCase& c : golden::kOptimCases) {
    SUBCASE(c.name) {
      Run run(c);
      for (int k = 0; k < golden::kSteps; ++k) {
        run.step(c, k);
        check_close(concat(run.params), c.expected[k], 1e-6, std::string(c.name) + " step " + std::to_string(k));
      }
      for (const Tensor& p : run.params) CHECK(p.dtype() == run.dtype);
    }
  }
}

TEST_CASE("save -> load -> step continues bit for bit, in a fresh optimizer with other options") {
  for (const golden::OptimCase& c : golden::kOptimCases) {
    SUBCASE(c.name) {
      Run uninterrupted(c);
      Run saved(c);
      for (int k = 0; k < 2; ++k) {
        uninterrupted.step(c, k);
        saved.step(c, k);
      }
      const optim::OptimizerState state = saved.opt->state_dict();

      // A "new process": parameters restored from the saved values, an optimizer built with
      // different hyperparameters that the state dict must override.
      golden::OptimCase other = c;
      for (golden::Group& g : other.groups) {
        g.lr *= 3;
        g.weight_decay = 0;
        g.momentum = 0;
        g.nesterov = false;
      }
      Run resumed(other);
      for (size_t p = 0; p < resumed.params.size(); ++p) {
        NoGradGuard no_grad;
        resumed.params[p].copy_(saved.params[p]);
      }
      resumed.opt->load_state_dict(state);
      for (size_t g = 0; g < resumed.opt->num_param_groups(); ++g) CHECK(resumed.opt->lr(g) == c.groups[g].lr);

      for (int k = 2; k < golden::kSteps; ++k) {
        uninterrupted.step(c, k);
        resumed.step(c, k);
      }
      CHECK(bitwise_equal(uninterrupted.params, resumed.params));
    }
  }
}

TEST_CASE("the state dict names state tensors and scalars as documented") {
  Tensor w = zeros({2, 3}).requires_grad_();
  Tensor b = zeros({3}).requires_grad_();
  optim::Adam opt({w}, {.lr = 0.01, .amsgrad = true});
  opt.add_param_group({b}, {.lr = 0.5});
  w.set_grad(ones({2, 3}));
  opt.step();  // b has no grad: no state for it

  const optim::OptimizerState s = opt.state_dict();
  CHECK(s.scalars.at("optimizer") == "Adam");
  CHECK(s.scalars.at("param_groups.0.lr") == "0.01");
  CHECK(s.scalars.at("param_groups.0.betas") == "0.90000000000000002,0.999");
  CHECK(s.scalars.at("param_groups.0.amsgrad") == "true");
  CHECK(s.scalars.at("param_groups.1.lr") == "0.5");
  CHECK(s.scalars.at("param_groups.1.amsgrad") == "false");
  CHECK(s.scalars.at("param_groups.0.params") == "0");
  CHECK(s.scalars.at("param_groups.1.params") == "1");
  CHECK(s.scalars.at("state.0.step") == "1");
  CHECK(s.scalars.count("state.1.step") == 0);
  CHECK(s.tensors.size() == 3);
  CHECK(s.tensors.at("state.0.exp_avg").shape() == Shape{2, 3});
  CHECK(s.tensors.contains("state.0.max_exp_avg_sq"));
  // The dict holds copies: stepping again does not change it.
  const double m = s.tensors.at("state.0.exp_avg").to_vector<double>()[0];
  opt.step();
  CHECK(s.tensors.at("state.0.exp_avg").to_vector<double>()[0] == m);
  // One step of Adam from zero state with g = 1: m = 0.1.
  CHECK(m == doctest::Approx(0.1).epsilon(1e-7));
}

TEST_CASE("doubles in the state dict parse back exactly") {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.1 + 1e-17 * 3, .momentum = 1.0 / 3});
  const double lr = opt.lr(0);
  optim::SGD other({zeros({1}).requires_grad_()}, {.lr = 1});
  other.load_state_dict(opt.state_dict());
  CHECK(other.lr(0) == lr);
  CHECK(other.param_groups()[0].options.momentum == 1.0 / 3);
}

TEST_CASE("step updates parameters in place and bumps their version") {
  Tensor w = tensor({1, 2, 3}).requires_grad_();
  Tensor alias = w;
  const void* data = w.data_ptr();
  const uint64_t version = w.version();
  optim::SGD opt({w}, {.lr = 0.5});
  w.set_grad(tensor({2, 2, 2}));
  opt.step();
  CHECK(alias.data_ptr() == data);
  CHECK(alias.to_vector<double>() == std::vector<double>{0, 1, 2});
  CHECK(w.version() == version + 1);
}

TEST_CASE("parameters without a gradient are skipped and get no state") {
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor b = tensor({3, 4}).requires_grad_();
  optim::Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(tensor({1, 1}));
  const uint64_t b_version = b.version();
  opt.step();
  CHECK(opt.state(a) != nullptr);
  CHECK(opt.state(b) == nullptr);
  CHECK(b.to_vector<double>() == std::vector<double>{3, 4});
  CHECK(b.version() == b_version);
  // Adam's first step moves every element by lr against the gradient's sign (m̂/√v̂ = ±1).
  const auto av = a.to_vector<double>();
  CHECK(av[0] == doctest::Approx(0.9).epsilon(1e-6));
  CHECK(av[1] == doctest::Approx(1.9).epsilon(1e-6));
}

TEST_CASE("zero_grad drops or zeroes gradients") {
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor b = tensor({3}).requires_grad_();
  optim::SGD opt({a, b});
  a.set_grad(tensor({5, 6}));
  SUBCASE("set_to_none") {
    opt.zero_grad();
    CHECK_FALSE(a.grad().defined());
    CHECK_FALSE(b.grad().defined());
  }
  SUBCASE("in place") {
    Tensor grad = a.grad();
    opt.zero_grad(false);
    CHECK(a.grad().is_same(grad));
    CHECK(grad.to_vector<double>() == std::vector<double>{0, 0});
    CHECK_FALSE(b.grad().defined());
  }
}

TEST_CASE("a training loop with autograd drives a parameter to the minimum") {
  // f(w) = Σ (w - 3)², minimised at w = 3.
  Tensor w = zeros({4}).requires_grad_();
  optim::AdamW opt({w}, {.lr = 0.1, .weight_decay = 0});
  for (int i = 0; i < 300; ++i) {
    opt.zero_grad();
    (w - 3.0).pow(2).sum().backward();
    opt.step();
  }
  for (double v : w.to_vector<double>()) CHECK(v == doctest::Approx(3.0).epsilon(1e-3));
}

TEST_CASE("low-precision parameters keep float32 state and stay in their dtype") {
  for (DType dtype : {kFloat16, kBFloat16}) {
    CAPTURE(dtype);
    Tensor p = tensor({1.0, -2.0, 0.5}, dtype).requires_grad_();
    optim::Adam opt({p}, {.lr = 0.01});
    p.set_grad(tensor({0.25, 0.5, -1.0}, dtype));
    opt.step();
    CHECK(p.dtype() == dtype);
    CHECK(opt.state(p)->exp_avg.dtype() == kFloat32);
    CHECK(opt.state_dict().tensors.at("state.0.exp_avg_sq").dtype() == kFloat32);
    // First Adam step: p - lr·sign(g), rounded to the dtype.
    const Tensor expected = tensor({0.99, -2.01, 0.51}).to(dtype);
    CHECK(equal(p, expected));
  }
  Tensor p64 = tensor({1.0}, kFloat64).requires_grad_();
  optim::SGD opt64({p64}, {.lr = 0.1, .momentum = 0.9});
  p64.set_grad(tensor({1.0}, kFloat64));
  opt64.step();
  CHECK(opt64.state(p64)->momentum_buffer.dtype() == kFloat64);
  CHECK(p64.item() == 1.0 - 0.1);  // computed in double: exactly 0.9
}

TEST_CASE("large parameters are updated the same with one thread or several") {
  const int64_t n = 300001;  // several parallel chunks and a ragged end
  const Tensor grad = randn({n});
  const Tensor init = linspace(-1, 1, n);
  const optim::AdamOptions options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true};
  auto run = [&](int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    Tensor p = init.clone().requires_grad_();
    optim::Adam opt({p}, options);
    for (int k = 0; k < 3; ++k) {
      p.set_grad(grad * static_cast<double>(3 - k));
      opt.step();
    }
    set_num_threads(saved);
    return p;
  };
  const Tensor one = run(1), many = run(4);
  CHECK(std::memcmp(one.data_ptr(), many.data_ptr(), one.nbytes()) == 0);

  // Elements at the ends and around chunk boundaries follow Adam's formula, written out here.
  const auto p0 = init.to_vector<double>(), g = grad.to_vector<double>(), got = many.to_vector<double>();
  for (int64_t i : {int64_t{0}, n / 4 - 1, n / 4, n / 2, n - 1}) {
    double p = p0[i], m = 0, v = 0, v_max = 0;
    for (int k = 0; k < 3; ++k) {
      const double gi = g[i] * (3 - k) + options.weight_decay * p;
      m = 0.9 * m + 0.1 * gi;
      v = 0.999 * v + 0.001 * gi * gi;
      v_max = std::max(v_max, v);
      const double t = k + 1;
      p -= options.lr / (1 - std::pow(0.9, t)) * m / (std::sqrt(v_max) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8);
    }
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(p).epsilon(1e-5));
  }
}

TEST_CASE("a launch's parameters, split over threads together, are each updated as they would be alone") {
  // One step updates every parameter of a group in one pass cut into equal shares per thread
  // (for_each_param_range in optim/fused_update.h): shares begin and end inside parameters, and
  // tensors below the one-thread grain share a thread with others. Each parameter must come out as
  // an optimizer over it alone, on one thread, leaves it: sizes empty, one value, ragged, a block,
  // one past a block, past the grain; float32, bfloat16 and float64 parameters side by side.
  const std::vector<int64_t> sizes = {0, 1, 100, 1024, 1025, 5000, 40000, 70001, 3, 33000};
  const std::vector<DType> dtypes = {kFloat32, kBFloat16, kFloat64};
  auto make = [&](size_t i) { return linspace(-1, 1, sizes[i]).to(dtypes[i % dtypes.size()]).requires_grad_(); };
  auto grad = [&](size_t i, int k) {
    Generator g(10 * i + static_cast<uint64_t>(k));
    return randn({sizes[i]}, kFloat32, &g).to(dtypes[i % dtypes.size()]);
  };
  auto steps = [&](std::vector<Tensor>& params, optim::Optimizer& opt, const std::vector<size_t>& which) {
    for (int k = 0; k < 3; ++k) {
      for (size_t j = 0; j < params.size(); ++j) params[j].set_grad(grad(which[j], k));
      opt.step();
    }
  };
  auto together = [&](bool adam, int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    std::vector<Tensor> params;
    std::vector<size_t> which;
    for (size_t i = 0; i < sizes.size(); ++i) {
      params.push_back(make(i));
      which.push_back(i);
    }
    std::unique_ptr<optim::Optimizer> opt;
    if (adam) opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 0.01, .amsgrad = true});
    else opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    steps(params, *opt, which);
    set_num_threads(saved);
    return params;
  };
  for (const bool adam : {true, false}) {
    CAPTURE(adam);
    std::vector<Tensor> alone;
    {
      const int saved = num_threads();
      set_num_threads(1);
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::vector<Tensor> one = {make(i)};
        std::unique_ptr<optim::Optimizer> opt;
        if (adam) opt = std::make_unique<optim::AdamW>(one, optim::AdamWOptions{.lr = 0.01, .amsgrad = true});
        else opt = std::make_unique<optim::SGD>(one, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
        steps(one, *opt, {i});
        alone.push_back(one[0]);
      }
      set_num_threads(saved);
    }
    for (const int threads : {1, 2, 3, 4}) {
      CAPTURE(threads);
      const std::vector<Tensor> got = together(adam, threads);
      for (size_t i = 0; i < sizes.size(); ++i) {
        CAPTURE(i);
        CHECK((got[i].nbytes() == 0 || std::memcmp(got[i].data_ptr(), alone[i].data_ptr(), got[i].nbytes()) == 0));
        CHECK(equal(got[i], make(i)) == (sizes[i] == 0));  // every nonempty parameter moved
      }
    }
  }
}

TEST_CASE("Adam and AdamW give the same bits at every instruction-set level") {
  // The AVX2 and AVX-512 kernels perform the scalar path's operations in the same order
  // (optim/adam.cpp), so the results must match exactly: ragged block ends, amsgrad (NaN-free max),
  // both decays, a bfloat16 parameter (widened to float32 blocks) and a float64 one.
  const int64_t n = 2 * 1024 + 13;
  const Tensor grad = randn({n}), init = linspace(-1, 1, n);
  auto run = [&](CpuIsa isa, bool decoupled, bool amsgrad, DType dtype) {
    CpuIsaGuard guard(isa);
    Tensor p = init.to(dtype).clone().requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled) opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions{.lr = 0.01, .amsgrad = amsgrad});
    else opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = amsgrad});
    for (int k = 0; k < 4; ++k) {
      p.set_grad((grad * static_cast<double>(4 - k)).to(dtype));
      opt->step();
    }
    return p;
  };
  for (const bool decoupled : {false, true})
    for (const bool amsgrad : {false, true})
      for (const DType dtype : {kFloat32, kBFloat16, kFloat64}) {
        const Tensor reference = run(CpuIsa::Scalar, decoupled, amsgrad, dtype);
        for (const CpuIsa isa : cpu_isas_supported()) {
          CAPTURE(cpu_isa_name(isa));
          CAPTURE(decoupled);
          CAPTURE(amsgrad);
          CAPTURE(dtype);
          const Tensor got = run(isa, decoupled, amsgrad, dtype);
          CHECK(std::memcmp(got.data_ptr(), reference.data_ptr(), got.nbytes()) == 0);
        }
      }
}

namespace {

// Tensors (parameter, then optimizer state) with exactly the same bits as the reference's.
void check_same_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& reference) {
  REQUIRE(got.size() == reference.size());
  for (size_t t = 0; t < got.size(); ++t) {
    CAPTURE(t);
    CHECK(std::memcmp(got[t].data_ptr(), reference[t].data_ptr(), got[t].nbytes()) == 0);
  }
}

bool is_denormal(float x) { return x != 0.0f && std::fabs(x) < std::ldexp(1.0f, -126); }

}  // namespace

TEST_CASE("moments that decay into denormals give the scalar path's bits at every level") {
  // Note [Denormal moments] (optim/update_avx2.cpp): vectors with a tiny lane compute through
  // float64 and must round exactly as float32 does. The gradient goes to zero after the first step,
  // and with these betas m and v fall through the tiny range into denormals within the run;
  // other elements start tiny or denormal (gradients whose squares underflow, parameters), and one
  // NaN gradient shares a vector with tiny lanes. Every step is compared, parameter and moments.
  const float denormal = std::ldexp(1.0f, -140), smallest = std::ldexp(1.0f, -149);
  std::vector<float> p0(203), g0(203);
  for (size_t i = 0; i < p0.size(); ++i) {
    p0[i] = 0.5f - 0.004f * static_cast<float>(i);
    g0[i] = std::ldexp(1.0f + 0.01f * static_cast<float>(i % 17), -static_cast<int>(i % 160));
    if (i % 3 == 1) g0[i] = -g0[i];
  }
  p0[7] = denormal, p0[8] = smallest, p0[9] = -std::ldexp(1.0f, -110), p0[10] = 0.0f;
  g0[11] = std::nanf(""), g0[12] = 1e-30f, g0[13] = -denormal, g0[14] = 0.0f;
  const Tensor init = from_vector(p0, {203}), grad = from_vector(g0, {203});
  const std::vector<int> zero_after{1, 400};  // steps with the first gradient, then zeros
  auto run = [&](CpuIsa isa, bool decoupled, bool amsgrad, int steps) {
    CpuIsaGuard guard(isa);
    Tensor p = init.clone().requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    const std::pair<double, double> betas{0.5, 0.7};
    if (decoupled)
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p},
                                           optim::AdamWOptions{.lr = 0.01, .betas = betas, .amsgrad = amsgrad});
    else
      opt = std::make_unique<optim::Adam>(
          std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.01, .betas = betas, .weight_decay = 0.1, .amsgrad = amsgrad});
    for (int k = 0; k < steps; ++k) {
      p.set_grad(k == 0 ? grad : zeros({203}));
      opt->step();
    }
    const optim::OptimizerState state = opt->state_dict();
    return std::vector<Tensor>{p.detach(), state.tensors.at("state.0.exp_avg"), state.tensors.at("state.0.exp_avg_sq")};
  };
  for (const bool decoupled : {false, true})
    for (const bool amsgrad : {false, true})
      for (const int steps : {1, 2, 60, 130, 220, 400}) {
        const auto reference = run(CpuIsa::Scalar, decoupled, amsgrad, steps);
        if (decoupled && steps == 130) {  // by now the moments are in the denormal range (Adam's
                                          // coupled decay keeps feeding them 0.1·p)
          const auto m = reference[1].to_vector<float>(), v = reference[2].to_vector<float>();
          CHECK(std::count_if(m.begin(), m.end(), is_denormal) > 10);
          CHECK(std::count_if(v.begin(), v.end(), is_denormal) > 10);
        }
        for (const CpuIsa isa : cpu_isas_supported()) {
          CAPTURE(cpu_isa_name(isa));
          CAPTURE(decoupled);
          CAPTURE(amsgrad);
          CAPTURE(steps);
          const auto got = run(isa, decoupled, amsgrad, steps);
          check_same_bits(got, reference);
        }
      }
}

TEST_CASE("SGD gives the same bits at every instruction-set level, denormal momentum included") {
  // The AVX2 and AVX-512 kernels (optim/update_avx2.cpp, update_avx512.cpp) against the scalar
  // path: momentum with and without dampening and Nesterov, weight decay, a bfloat16 parameter,
  // ragged ends, and (Note [Denormal moments]) gradients that stop after the first step, so the
  // buffers decay through the denormal range (μ = 0.7 sticks at the smallest denormals, μ = 0.5 reaches zero).
  const float denormal = std::ldexp(1.0f, -140);
  std::vector<float> p0(1037), g0(1037);
  for (size_t i = 0; i < p0.size(); ++i) {
    p0[i] = 0.5f - 0.001f * static_cast<float>(i);
    g0[i] = std::ldexp(1.0f + 0.01f * static_cast<float>(i % 17), -static_cast<int>(i % 150));
    if (i % 3 == 1) g0[i] = -g0[i];
  }
  p0[7] = denormal, p0[9] = -std::ldexp(1.0f, -110), g0[11] = std::nanf(""), g0[13] = -denormal, g0[14] = 0.0f;
  const Tensor init = from_vector(p0, {1037}), grad = from_vector(g0, {1037});
  struct Config {
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  auto run = [&](CpuIsa isa, const Config& c, DType dtype, int steps) {
    CpuIsaGuard guard(isa);
    Tensor p = init.to(dtype).clone().requires_grad_();
    optim::SGD opt({p}, {.lr = 0.01, .momentum = c.momentum, .dampening = c.dampening,
                         .weight_decay = c.weight_decay, .nesterov = c.nesterov});
    for (int k = 0; k < steps; ++k) {
      p.set_grad((k == 0 ? grad : zeros({1037})).to(dtype));
      opt.step();
    }
    const optim::OptimizerState state = opt.state_dict();
    std::vector<Tensor> out{p.detach()};
    if (c.momentum != 0.0) out.push_back(state.tensors.at("state.0.momentum_buffer"));
    return out;
  };
  for (const Config& c : {Config{0.0, 0.0, 0.0, false}, Config{0.7, 0.0, 0.0, false}, Config{0.5, 0.3, 0.0, false},
                          Config{0.7, 0.0, 0.1, true}, Config{0.7, 0.0, 0.0, true}})
    for (const DType dtype : {kFloat32, kBFloat16})
      for (const int steps : {1, 2, 130, 260}) {
        const auto reference = run(CpuIsa::Scalar, c, dtype, steps);
        if (c.momentum == 0.7 && c.weight_decay == 0.0 && dtype == kFloat32 && steps == 260) {
          const auto buf = reference[1].to_vector<float>();
          CHECK(std::count_if(buf.begin(), buf.end(), is_denormal) > 100);
        }
        for (const CpuIsa isa : cpu_isas_supported()) {
          CAPTURE(cpu_isa_name(isa));
          CAPTURE(c.momentum);
          CAPTURE(c.nesterov);
          CAPTURE(c.weight_decay);
          CAPTURE(dtype);
          CAPTURE(steps);
          const auto got = run(isa, c, dtype, steps);
          check_same_bits(got, reference);
        }
      }
}

TEST_CASE("option checks follow PyTorch's") {
  Tensor p = zeros({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = 0.1, .nesterov = true}),
                       doctest::Contains("Nesterov momentum requires a momentum and zero dampening"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                       doctest::Contains("zero dampening"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = -1}), doctest::Contains("invalid learning rate"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.momentum = -0.5}), doctest::Contains("invalid momentum"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, {.betas = {0.9, 1.0}}), doctest::Contains("beta parameter at index 1"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({p}, {.eps = -1}), doctest::Contains("[AdamW] invalid epsilon"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, {.weight_decay = -1}), doctest::Contains("invalid weight_decay"), Error);
  CHECK(optim::AdamW({p}, {.lr = 3e-4}).param_groups()[0].options.weight_decay == 1e-2);
  CHECK(optim::Adam({p}).param_groups()[0].options.weight_decay == 0.0);
}

TEST_CASE("parameter groups are checked") {
  Tensor a = zeros({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(optim::SGD({}), doctest::Contains("at least one parameter"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({a, a}), doctest::Contains("appears twice"), Error);
  optim::SGD opt({a});
  CHECK_THROWS_WITH_AS(opt.add_param_group({a}), doctest::Contains("more than one parameter group"), Error);
  CHECK_THROWS_WITH_AS(opt.add_param_group({zeros({2}, kInt64)}), doctest::Contains("got int64"), Error);
  CHECK_THROWS_WITH_AS(opt.add_param_group({a * 2.0}), doctest::Contains("leaf tensors"), Error);
  Tensor b = zeros({3}).requires_grad_();
  opt.add_param_group({b}, {.lr = 0.5});
  CHECK(opt.num_param_groups() == 2);
  CHECK(opt.lr(1) == 0.5);
  CHECK(opt.param_groups()[0].options.lr == opt.defaults().lr);
  CHECK_THROWS_WITH_AS(opt.lr(2), doctest::Contains("no parameter group 2"), Error);
}

TEST_CASE("a gradient of another dtype or a non-contiguous parameter is refused") {
  Tensor p = zeros({2}).requires_grad_();
  optim::SGD opt({p});
  p.set_grad(zeros({2}, kFloat64));
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("float32 parameter has a float64 gradient"), Error);

  Tensor base = zeros({3, 2});
  Tensor strided = base.t().requires_grad_();
  optim::SGD opt2({strided});
  strided.set_grad(zeros({2, 3}));
  CHECK_THROWS_WITH_AS(opt2.step(), doctest::Contains("must be contiguous"), Error);
}

TEST_CASE("load_state_dict validates before it changes anything") {
  Tensor w = zeros({2, 2}).requires_grad_();
  Tensor b = zeros({2}).requires_grad_();
  optim::SGD source({w, b}, {.lr = 0.1, .momentum = 0.9});
  w.set_grad(ones({2, 2}));
  b.set_grad(ones({2}));
  source.step();
  const optim::OptimizerState good = source.state_dict();

  Tensor w2 = zeros({2, 2}).requires_grad_();
  Tensor b2 = zeros({2}).requires_grad_();
  optim::SGD target({w2, b2}, {.lr = 0.7});
  auto expect_refused = [&](const optim::OptimizerState& bad, const std::string& message) {
    CHECK_THROWS_WITH_AS(target.load_state_dict(bad), doctest::Contains(message.c_str()), Error);
    CHECK(target.lr(0) == 0.7);
    CHECK(target.state(w2) == nullptr);
  };

  SUBCASE("another optimizer's dict") {
    optim::Adam adam({zeros({1}).requires_grad_()});
    expect_refused(adam.state_dict(), "expected a state dict saved by SGD, got one saved by Adam");
  }
  SUBCASE("group count") {
    optim::OptimizerState bad = good;
    bad.scalars["param_groups.1.params"] = "2";
    for (const char* f : {"lr", "momentum", "dampening", "weight_decay", "nesterov"})
      bad.scalars[std::string("param_groups.1.") + f] = good.scalars.at(std::string("param_groups.0.") + f);
    expect_refused(bad, "the optimizer has 1 parameter groups, the state dict has 2");
  }
  SUBCASE("parameter count") {
    optim::OptimizerState bad = good;
    bad.scalars["param_groups.0.params"] = "0";
    expect_refused(bad, "has 2 parameters, the state dict's has 1");
  }
  SUBCASE("shape") {
    optim::OptimizerState bad;
    bad.scalars = good.scalars;
    bad.tensors.insert("state.0.momentum_buffer", zeros({4}));
    expect_refused(bad, "'state.0.momentum_buffer' has shape (4,), but its parameter has shape (2, 2)");
  }
  SUBCASE("missing option") {
    optim::OptimizerState bad = good;
    bad.scalars.erase("param_groups.0.momentum");
    expect_refused(bad, "no 'param_groups.0.momentum'");
  }
  SUBCASE("unknown entries") {
    optim::OptimizerState bad = good;
    bad.scalars["param_groups.0.betas"] = "0.9,0.99";
    expect_refused(bad, "unknown option 'param_groups.0.betas'");
    optim::OptimizerState bad2;
    bad2.scalars = good.scalars;
    bad2.tensors.insert("state.0.exp_avg", zeros({2, 2}));
    expect_refused(bad2, "unknown state entry 'state.0.exp_avg'");
    optim::OptimizerState bad3 = good;
    bad3.scalars["state.7.step"] = "1";
    expect_refused(bad3, "names parameter 7");
  }
  SUBCASE("malformed values") {
    optim::OptimizerState bad = good;
    bad.scalars["param_groups.0.lr"] = "fast";
    expect_refused(bad, "'param_groups.0.lr': expected a number, got 'fast'");
    optim::OptimizerState bad2 = good;
    bad2.scalars["param_groups.0.momentum"] = "-1";
    expect_refused(bad2, "invalid momentum");
  }
  SUBCASE("values a step would turn into inf or NaN, named by key") {
    optim::OptimizerState bad = good;
    bad.scalars["param_groups.0.lr"] = "inf";
    expect_refused(bad, "[SGD.load_state_dict] 'param_groups.0.lr' must be a finite number, got inf");
    optim::OptimizerState bad2;
    bad2.scalars = good.scalars;
    for (const auto& [name, t] : good.tensors)
      bad2.tensors.insert(name, name == "state.1.momentum_buffer" ? full({2}, std::nan("")) : t);
    expect_refused(bad2, "[SGD.load_state_dict] 'state.1.momentum_buffer' holds 2 inf or NaN value(s)");
  }

  SUBCASE("a good dict loads, converting state to the state dtype") {
    optim::OptimizerState with_f64;
    with_f64.scalars = good.scalars;
    for (const auto& [name, t] : good.tensors) with_f64.tensors.insert(name, t.to(kFloat64));
    target.load_state_dict(with_f64);
    CHECK(target.lr(0) == 0.1);
    REQUIRE(target.state(w2) != nullptr);
    CHECK(target.state(w2)->momentum_buffer.dtype() == kFloat32);
    CHECK(equal(target.state(w2)->momentum_buffer, ones({2, 2})));
    // The optimizer does not alias the caller's tensors.
    w2.set_grad(ones({2, 2}));
    target.step();
    CHECK(equal(good.tensors.at("state.0.momentum_buffer"), ones({2, 2})));
  }
}
