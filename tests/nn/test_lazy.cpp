// Lazy modules: uninitialized placeholders, materialisation on the first forward or on load,
// captured tensor and module frames, and indistinguishability from the eager twin (reference
// §6.1–6.2, cases T48–T51; T47, a lazy layer under a precision plugin, is in
// tests/precision/test_lazy_plugins.cpp).
#include <doctest/doctest.h>

#include "nn/all.h"

using namespace weft;

namespace {

struct ScaledLinearImpl : nn::LinearImpl {
  static inline bool last_forward_training = true;
  ScaledLinearImpl(int64_t in, int64_t out, bool bias) : LinearImpl(in, out, bias) {}
  Tensor forward(const Tensor& x) override {
    last_forward_training = is_training();
    return LinearImpl::forward(x) * 2.0;
  }
};

nn::ModuleFrame scaled() {
  return nn::ModuleFrame{.linear = [](int64_t in, int64_t out, bool bias) {
                           return std::make_shared<ScaledLinearImpl>(in, out, bias);
                         },
                         .layer_norm = std::nullopt};
}

std::vector<std::string> keys_of(const nn::TensorDict& dict) {
  std::vector<std::string> out;
  for (const auto& [name, t] : dict) out.push_back(name);
  return out;
}

// Uses only its first layer, so a dry run leaves the second one lazy.
struct HalfUsedImpl : nn::Module {
  nn::LazyLinear used{nullptr}, unused{nullptr};
  HalfUsedImpl() {
    used = register_module("used", nn::LazyLinear(2));
    unused = register_module("unused", nn::LazyLinear(2));
  }
  Tensor forward(const Tensor& x) override { return used(x); }
};

}  // namespace

// T49's third part (DistributedDataParallel refuses a model with uninitialized parameters) is in
// tests/distributed/test_ddp.cpp.
TEST_CASE("T49 before its first forward a lazy layer has placeholders that refuse shape, numel and data") {
  nn::LazyLinear lazy(3);
  CHECK(lazy->weight.is_uninitialized());
  CHECK(lazy->bias.is_uninitialized());
  CHECK(lazy->weight.dtype() == kFloat32);
  CHECK(lazy->weight.device() == kCPU);
  CHECK(lazy->weight.requires_grad());
  CHECK(nn::has_uninitialized_params(lazy));
  CHECK_THROWS_WITH_AS(lazy->weight.shape(),
                       "[shape] the tensor is an uninitialized parameter (a lazy module before its first forward); "
                       "run a forward pass or load_state_dict to give it a shape",
                       Error);
  CHECK_THROWS_WITH_AS(lazy->weight.numel(),
                       "[numel] the tensor is an uninitialized parameter (a lazy module before its first forward); "
                       "run a forward pass or load_state_dict to give it a shape",
                       Error);
  CHECK_THROWS_AS(lazy->weight.data_ptr(), Error);
  CHECK_THROWS_AS(add(lazy->weight, 1.0), Error);
  CHECK(lazy->in_features == 0);
  CHECK_FALSE(lazy->is_materialized());
  CHECK(lazy->type_name() == "LazyLinear");
  CHECK(lazy->to_string() == "LazyLinear(in_features=0, out_features=3, bias=true)");
  CHECK(keys_of(lazy->state_dict()) == std::vector<std::string>{"weight", "bias"});
  CHECK(lazy->state_dict().at("weight").is_uninitialized());
}

TEST_CASE("the first forward materialises exactly the eager Linear: same draws, same module") {
  const Tensor x = ones({2, 4});
  manual_seed(0);
  nn::Linear eager(4, 3);
  manual_seed(0);
  nn::LazyLinear lazy(3);
  const Tensor y = lazy(x);

  CHECK(lazy->is_materialized());
  CHECK_FALSE(nn::has_uninitialized_params(lazy));
  CHECK(lazy->weight.shape() == Shape{3, 4});
  CHECK(equal(lazy->weight, eager->weight));
  CHECK(equal(lazy->bias, eager->bias));
  CHECK(equal(y, eager(x)));
  // Not all zero (the pytorch#149691 regression).
  CHECK(lazy->weight.abs().sum().item() > 0.0);

  CHECK(lazy->type_name() == "Linear");
  CHECK(lazy->in_features == 4);
  CHECK(lazy->to_string() == eager->to_string());
  CHECK(keys_of(lazy->state_dict()) == keys_of(eager->state_dict()));
  // It is a LinearImpl, so code that looks for Linear layers finds it.
  CHECK(dynamic_cast<nn::LinearImpl*>(lazy.get()) != nullptr);
  // Later forwards use the same parameters.
  CHECK(equal(lazy(x), y));
}

TEST_CASE("handles taken before materialisation are the materialised parameters") {
  nn::LazyLinear lazy(2);
  const Tensor w = lazy->weight;
  const std::vector<Tensor> params = lazy->parameters();
  lazy(ones({1, 3})).sum().backward();
  CHECK(w.is_same(lazy->weight));
  CHECK(params[0].is_same(lazy->weight));
  CHECK(params[1].is_same(lazy->bias));
  CHECK(lazy->parameters()[0].is_same(w));
  CHECK(w.shape() == Shape{2, 3});
  REQUIRE(w.grad().defined());
  CHECK(w.grad().to_vector<float>() == std::vector<float>(6, 1.0f));
}

TEST_CASE("the tensor frame at construction decides the dtype, even after the frame is gone") {
  nn::LazyLinear lazy{nullptr};
  {
    DefaultDTypeGuard f64(kFloat64);
    lazy = nn::LazyLinear(3);
  }
  CHECK(lazy->weight.dtype() == kFloat64);
  CHECK(lazy(ones({2, 5}, kFloat64)).dtype() == kFloat64);
  CHECK(lazy->weight.dtype() == kFloat64);
  CHECK(lazy->bias.dtype() == kFloat64);

  // A frame active at forward time does not matter either.
  nn::LazyLinear plain(3);
  {
    DefaultDTypeGuard f64(kFloat64);
    plain(ones({2, 5}));
  }
  CHECK(plain->weight.dtype() == kFloat32);
}

TEST_CASE("bfloat16 construction frame: placeholder and result are bfloat16") {
  nn::LazyLinear lazy{nullptr};
  {
    DefaultDTypeGuard bf16(kBFloat16);
    lazy = nn::LazyLinear(4);
  }
  CHECK(lazy->weight.dtype() == kBFloat16);
  lazy(ones({2, 3}, kBFloat16));
  CHECK(lazy->type_name() == "Linear");
  CHECK(lazy->weight.shape() == Shape{4, 3});
  CHECK(lazy->weight.dtype() == kBFloat16);
  CHECK(lazy->in_features == 3);
  CHECK(lazy->weight.abs().sum().item() > 0.0);
}

TEST_CASE("T48 to(float64) before the first forward changes what the parameters become") {
  nn::LazyLinear lazy(4);
  CHECK(lazy->weight.dtype() == kFloat32);
  lazy->to(kFloat64);
  CHECK(lazy->weight.is_uninitialized());
  CHECK(lazy->weight.dtype() == kFloat64);
  CHECK(lazy->state_dict().at("bias").dtype() == kFloat64);
  lazy(ones({2, 5}, kFloat64));
  CHECK(lazy->weight.dtype() == kFloat64);
  CHECK(lazy->weight.shape() == Shape{4, 5});
  CHECK(lazy->bias.dtype() == kFloat64);
}

TEST_CASE("a lazy layer built under a replacing module frame materialises as the replacement") {
  const Tensor x = ones({2, 4});
  manual_seed(1);
  nn::Linear eager{nullptr};
  {
    const nn::ModuleFrameGuard frame(scaled());
    eager = nn::Linear(4, 3);
  }
  manual_seed(1);
  nn::LazyLinear lazy{nullptr};
  {
    const nn::ModuleFrameGuard frame(scaled());
    lazy = nn::LazyLinear(3);
  }
  const Tensor y = lazy(x);  // the frame is gone: the captured one is used
  CHECK(lazy->type_name() == "ScaledLinear");
  CHECK(equal(lazy->weight, eager->weight));
  CHECK(equal(y, eager(x)));
  CHECK(equal(y, linear(x, lazy->weight, lazy->bias) * 2.0));
  CHECK(lazy->to_string() == "ScaledLinear(in_features=4, out_features=3, bias=true)");

  // And the other way round: built outside any frame, run inside one, it stays a plain Linear.
  nn::LazyLinear plain(3);
  {
    const nn::ModuleFrameGuard frame(scaled());
    plain(x);
  }
  CHECK(plain->type_name() == "Linear");
  CHECK(equal(plain(x), linear(x, plain->weight, plain->bias)));
}

TEST_CASE("train and eval reach the materialised twin") {
  nn::LazyLinear lazy{nullptr};
  {
    const nn::ModuleFrameGuard frame(scaled());
    lazy = nn::LazyLinear(2);
  }
  lazy->eval();
  lazy(ones({1, 2}));
  CHECK_FALSE(ScaledLinearImpl::last_forward_training);
  lazy->train();
  lazy(ones({1, 2}));
  CHECK(ScaledLinearImpl::last_forward_training);
}

TEST_CASE("a lazy layer frozen before materialising stays frozen") {
  nn::LazyLinear lazy(2);
  lazy->requires_grad_(false);
  lazy(ones({1, 3}));
  CHECK_FALSE(lazy->weight.requires_grad());
  CHECK_FALSE(lazy->bias.requires_grad());
}

TEST_CASE("skip-init at construction holds at materialisation: no random draws") {
  nn::LazyLinear lazy{nullptr};
  {
    TensorFrameGuard skip(TensorFrame{std::nullopt, std::nullopt, true});
    lazy = nn::LazyLinear(3);
  }
  manual_seed(0);
  const auto state = default_generator().state();
  lazy(ones({1, 4}));
  CHECK(default_generator().state() == state);
  CHECK(lazy->weight.shape() == Shape{3, 4});

  nn::LazyLinear normal(3);
  normal(ones({1, 4}));
  CHECK(default_generator().state() != state);
}

// Policy (README, "Design notes"): loading finalises the lazy layer at once, as pytorch#184698
// does, instead of leaving a LazyLinear with in_features == 0 until a forward (torch <= 2.7).
TEST_CASE("T50 loading an eager layer's state into a lazy one materialises and finalises it with those values") {
  nn::Linear eager(3, 4);
  nn::LazyLinear lazy(4);
  const Tensor w = lazy->weight;
  lazy->load_state_dict(eager->state_dict());
  CHECK(lazy->is_materialized());
  CHECK(lazy->type_name() == "Linear");
  CHECK(lazy->in_features == 3);
  CHECK(w.is_same(lazy->weight));
  CHECK(lazy->weight.shape() == Shape{4, 3});
  CHECK(equal(lazy->weight, eager->weight));
  CHECK(equal(lazy->bias, eager->bias));
  CHECK(lazy->to_string() == eager->to_string());

  // Nested in a container too.
  nn::Sequential eager_seq(nn::Linear(5, 2), nn::ReLU());
  nn::Sequential lazy_seq(nn::LazyLinear(2), nn::ReLU());
  lazy_seq->load_state_dict(eager_seq->state_dict());
  CHECK(lazy_seq->to_string() == eager_seq->to_string());
  CHECK(equal(lazy_seq->at<nn::LinearImpl>(0)->weight, eager_seq->at<nn::LinearImpl>(0)->weight));
}

TEST_CASE("a lazy layer that cannot infer its shape from the state dict says so by name") {
  nn::LazyLinear lazy(4);
  nn::TensorDict wrong;
  wrong.insert("weight", zeros({5, 3}));  // out_features 5, not 4
  wrong.insert("bias", zeros({4}));
  CHECK_THROWS_WITH_AS(lazy->load_state_dict(wrong),
                       "[load_state_dict] cannot load the state dict into LazyLinear:\n"
                       "  'weight' is uninitialized in the module and its shape could not be inferred from the "
                       "state dict's (5, 3)\n"
                       "  'bias' is uninitialized in the module and its shape could not be inferred from the "
                       "state dict's (4,)",
                       Error);
  CHECK_FALSE(lazy->is_materialized());
}

TEST_CASE("T51 the state of an unmaterialised lazy layer cannot be loaded into an eager one") {
  nn::Linear eager(3, 4);
  const Tensor before = eager->weight.clone();
  CHECK_THROWS_WITH_AS(eager->load_state_dict(nn::LazyLinear(4)->state_dict()),
                       "[load_state_dict] cannot load the state dict into Linear:\n"
                       "  'weight' is uninitialized in the state dict (it comes from a lazy module that has not run "
                       "forward); run a forward pass on the source module first\n"
                       "  'bias' is uninitialized in the state dict (it comes from a lazy module that has not run "
                       "forward); run a forward pass on the source module first",
                       Error);
  CHECK(equal(eager->weight, before));
}

TEST_CASE("lazy into lazy is allowed and stays lazy") {
  nn::LazyLinear a(4);
  nn::LazyLinear b(4);
  b->load_state_dict(a->state_dict());
  CHECK_FALSE(b->is_materialized());
  CHECK(nn::has_uninitialized_params(b));
}

TEST_CASE("materialize() dry-runs a whole model without autograd") {
  nn::Sequential seq(nn::LazyLinear(8), nn::ReLU(), nn::LazyLinear(2));
  CHECK(nn::has_uninitialized_params(seq));
  nn::materialize(seq, ones({1, 5}).requires_grad_());
  CHECK_FALSE(nn::has_uninitialized_params(seq));
  CHECK(seq->at<nn::LinearImpl>(0)->weight.shape() == Shape{8, 5});
  CHECK(seq->at<nn::LinearImpl>(2)->weight.shape() == Shape{2, 8});
  CHECK(seq->to_string() ==
        "Sequential(\n"
        "  (0): Linear(in_features=5, out_features=8, bias=true)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=8, out_features=2, bias=true)\n"
        ")");
  CHECK(seq->parameters().size() == 4);
  for (const auto& p : seq->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("materialize() names the parameters a dry run left uninitialized") {
  auto model = std::make_shared<HalfUsedImpl>();
  CHECK_THROWS_WITH_AS(nn::materialize(*model, ones({1, 3})),
                       "[materialize] HalfUsed still has uninitialized parameters after the dry run: "
                       "'unused.weight', 'unused.bias'; they are not on the forward path of the example input",
                       Error);
}

TEST_CASE("a replacing factory must return the module it constructs first") {
  nn::ModuleFrame indirect{.linear = [](int64_t in, int64_t out, bool bias) {
                             auto scratch = std::make_shared<nn::ReLUImpl>();
                             return std::make_shared<nn::LinearImpl>(in, out, bias);
                           },
                           .layer_norm = std::nullopt};
  nn::LazyLinear lazy{nullptr};
  {
    const nn::ModuleFrameGuard frame(indirect);
    lazy = nn::LazyLinear(2);
  }
  CHECK_THROWS_WITH_AS(lazy(ones({1, 3})),
                       "[LazyLinear] the module frame's Linear factory must return the first module it constructs "
                       "(that module adopts the lazy parameters)",
                       Error);
}
