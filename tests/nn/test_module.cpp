// Module base: registries and dotted names, holders, modes, in-place conversions, state dicts
// and printing.
#include <doctest/doctest.h>

#include <sstream>

#include "nn/all.h"

using namespace weft;

namespace {

// Two Linear children, a persistent float buffer, a persistent integer buffer and a scratch
// buffer that state_dict must leave out.
struct BlockImpl : nn::Module {
  nn::Linear fc1{nullptr};
  nn::Linear fc2{nullptr};
  Tensor scale, steps, scratch;

  BlockImpl() {
    fc1 = register_module("fc1", nn::Linear(4, 3));
    fc2 = register_module("fc2", nn::Linear(3, 2, false));
    scale = register_buffer("scale", ones({2}));
    steps = register_buffer("steps", zeros({1}, kInt64));
    scratch = register_buffer("scratch", zeros({2}), false);
  }
  Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()) * scale; }
};
WEFT_MODULE(Block);

struct NetImpl : nn::Module {
  Block encoder;
  nn::Sequential head{nullptr};

  NetImpl() {
    encoder = register_module("encoder", Block());
    head = register_module("head", nn::Sequential(nn::GELU("tanh"), nn::Dropout(0.1)));
  }
  Tensor forward(const Tensor& x) override { return head(encoder(x)); }
};
WEFT_MODULE(Net);

struct BadNameImpl : nn::Module {
  explicit BadNameImpl(const std::string& name) { register_parameter(name, zeros({1})); }
};

struct TwiceImpl : nn::Module {
  TwiceImpl() {
    register_parameter("w", zeros({1}));
    register_buffer("w", zeros({1}));
  }
};

std::vector<std::string> names_of(const std::vector<nn::NamedTensor>& items) {
  std::vector<std::string> out;
  for (const auto& [name, t] : items) out.push_back(name);
  return out;
}

std::vector<std::string> keys_of(const nn::TensorDict& dict) {
  std::vector<std::string> out;
  for (const auto& [name, t] : dict) out.push_back(name);
  return out;
}

nn::Sequential mlp() { return nn::Sequential(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 10)); }

}  // namespace

TEST_CASE("parameters, buffers and children are listed in registration order with dotted names") {
  Net net;
  CHECK(names_of(net->named_parameters()) ==
        std::vector<std::string>{"encoder.fc1.weight", "encoder.fc1.bias", "encoder.fc2.weight"});
  CHECK(names_of(net->named_buffers()) ==
        std::vector<std::string>{"encoder.scale", "encoder.steps", "encoder.scratch"});
  CHECK(names_of(net->encoder->named_parameters(false)).empty());
  CHECK(names_of(net->encoder->named_buffers(false)) == std::vector<std::string>{"scale", "steps", "scratch"});

  std::vector<std::string> module_names;
  for (const auto& [name, m] : net->named_modules()) module_names.push_back(name);
  CHECK(module_names == std::vector<std::string>{"", "encoder", "encoder.fc1", "encoder.fc2", "head", "head.0",
                                                 "head.1"});
  CHECK(net->named_modules()[0].second.get() == net.get());

  const auto children = net->named_children();
  REQUIRE(children.size() == 2);
  CHECK(children[0].first == "encoder");
  CHECK(children[0].second.get() == net->encoder.get());
  CHECK(net->children()[1].get() == net->head.get());

  // parameters() are the very handles the layers use, so an optimizer updates the layers.
  const auto params = net->parameters();
  REQUIRE(params.size() == 3);
  CHECK(params[0].is_same(net->encoder->fc1->weight));
  CHECK(params[1].is_same(net->encoder->fc1->bias));
  CHECK(params[2].is_same(net->encoder->fc2->weight));
  for (const auto& p : params) CHECK(p.requires_grad());
  CHECK(net->encoder->fc2->bias.defined() == false);
}

TEST_CASE("Sequential names its children 0, 1, 2 and chains their forwards") {
  nn::Sequential seq = mlp();
  CHECK(names_of(seq->named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq->size() == 3);
  CHECK(seq->at<nn::LinearImpl>(2)->out_features == 10);
  CHECK_THROWS_WITH_AS(seq->at<nn::LinearImpl>(1), "[Sequential] entry '1' is a ReLU, not the requested type",
                       Error);
  CHECK_THROWS_WITH_AS((*seq)[3], "[Sequential] index 3 is out of range for 3 modules", Error);

  const Tensor x = randn({2, 784});
  auto fc0 = seq->at<nn::LinearImpl>(0);
  auto fc2 = seq->at<nn::LinearImpl>(2);
  const Tensor expected = linear(relu(linear(x, fc0->weight, fc0->bias)), fc2->weight, fc2->bias);
  CHECK(equal(seq(x), expected));
}

TEST_CASE("a module shared twice is one module: parameters once, state_dict under both names") {
  nn::Linear fc(2, 2);
  nn::Sequential seq(fc, fc);
  CHECK(seq->parameters().size() == 2);
  CHECK(seq->named_modules().size() == 2);
  CHECK(keys_of(seq->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
}

TEST_CASE("registration rejects dotted, empty and duplicate names") {
  CHECK_THROWS_WITH_AS(std::make_shared<BadNameImpl>("a.b"),
                       "[register_parameter] the name must not contain '.', got 'a.b'", Error);
  CHECK_THROWS_WITH_AS(std::make_shared<BadNameImpl>(""), "[register_parameter] the name must not be empty", Error);
  CHECK_THROWS_WITH_AS(std::make_shared<TwiceImpl>(),
                       "[register_buffer] Twice already has a parameter, buffer or module named 'w'", Error);
}

TEST_CASE("holders share their module, call forward, and refuse to be used empty") {
  nn::Linear a(3, 2);
  nn::Linear b = a;
  CHECK(b.get() == a.get());
  CHECK(b->weight.is_same(a->weight));
  nn::Linear empty_holder{nullptr};
  CHECK(empty_holder.is_empty());
  CHECK_FALSE(static_cast<bool>(empty_holder));
  CHECK_THROWS_WITH_AS(static_cast<void>(empty_holder->in_features), "[ModuleHolder] the module holder is empty (built from nullptr)",
                       Error);
  const Tensor x = ones({1, 3});
  CHECK(equal(a(x), a->forward(x)));
  nn::ReLU relu_layer;  // default-constructible layers build their Impl
  CHECK_FALSE(relu_layer.is_empty());
}

TEST_CASE("forward hooks run around forward when a module is called, in order, and can be removed") {
  nn::Linear fc(3, 2);
  nn::Sequential seq(fc, nn::ReLU());
  std::vector<std::string> events;
  const size_t pre = fc->register_forward_pre_hook([&](nn::Module& m) { events.push_back("pre " + m.type_name()); });
  fc->register_forward_hook([&](nn::Module&, const Tensor& out) {
    events.push_back("post");
    return mul(out, 2.0);  // a hook may replace the output
  });
  const size_t second = fc->register_forward_hook([&](nn::Module&, const Tensor& out) {
    events.push_back("second post");
    return out;
  });
  const Tensor x = ones({1, 3});
  const Tensor plain = fc->forward(x);  // calling forward directly skips the hooks
  CHECK(events.empty());
  CHECK(equal(fc(x), mul(plain, 2.0)));
  CHECK(events == std::vector<std::string>{"pre Linear", "post", "second post"});
  events.clear();
  CHECK(equal(seq(x), relu(mul(plain, 2.0))));  // containers call their modules through the hooks
  CHECK(events.size() == 3);
  fc->remove_forward_hook(pre);
  fc->remove_forward_hook(second);
  events.clear();
  fc(x);
  CHECK(events == std::vector<std::string>{"post"});
}

TEST_CASE("apply visits children before their parent") {
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  std::vector<std::string> order;
  seq->apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  CHECK(order == std::vector<std::string>{"Linear", "ReLU", "Sequential"});

  // The common use: a custom initialisation of every Linear.
  seq->apply([](nn::Module& m) {
    if (auto* fc = dynamic_cast<nn::LinearImpl*>(&m)) nn::init::constant_(fc->weight, 0.5);
  });
  CHECK(seq->at<nn::LinearImpl>(0)->weight.to_vector<float>() == std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f});
}

TEST_CASE("train and eval reach every descendant") {
  Net net;
  CHECK(net->is_training());
  net->eval();
  for (const auto& m : net->modules()) CHECK_FALSE(m->is_training());
  // Dropout in eval mode is the identity.
  const Tensor x = randn({3, 4});
  CHECK(equal(net(x), net->head->at<nn::Module>(0)->forward(net->encoder(x))));
  net->train();
  for (const auto& m : net->modules()) CHECK(m->is_training());
}

TEST_CASE("to(dtype) converts floating parameters, buffers and grads in place; integer buffers stay") {
  Block block;
  const Tensor w = block->fc1->weight;  // a handle taken before the conversion
  const std::vector<double> before = w.to_vector<double>();
  block(randn({2, 4})).sum().backward();
  REQUIRE(w.grad().defined());

  block->to(kFloat64);
  CHECK(w.is_same(block->fc1->weight));
  CHECK(w.dtype() == kFloat64);
  CHECK(w.to_vector<double>() == before);  // float32 -> float64 is exact
  CHECK(w.grad().dtype() == kFloat64);
  CHECK(w.requires_grad());
  CHECK(block->fc2->weight.dtype() == kFloat64);
  CHECK(block->scale.dtype() == kFloat64);
  CHECK(block->scratch.dtype() == kFloat64);
  CHECK(block->steps.dtype() == kInt64);
  block(randn({2, 4}, kFloat64)).sum().backward();  // gradients keep accumulating, now in float64
  CHECK(w.grad().dtype() == kFloat64);

  CHECK_THROWS_WITH_AS(block->to(kInt32), "[Module::to] expected a floating dtype, got int32", Error);
}

TEST_CASE("to(dtype) leaves keep_dtype buffers alone; they still go into state_dict") {
  struct MetaImpl : nn::Module {
    Tensor weight, scale;
    MetaImpl() {
      weight = register_parameter("weight", ones({2}));
      scale = register_buffer("scale", full({1}, 0.1), true, /*keep_dtype=*/true);
    }
  };
  nn::Sequential model(std::make_shared<MetaImpl>());
  model->to(kBFloat16);
  const auto state = model->state_dict();
  CHECK(state.at("0.weight").dtype() == kBFloat16);
  CHECK(state.at("0.scale").dtype() == kFloat32);
  CHECK(state.at("0.scale").item<float>() == 0.1f);
}

TEST_CASE("to(device) keeps the handles") {
  Block block;
  const Tensor w = block->fc1->weight;
  block->to(kCPU);
  CHECK(w.is_same(block->fc1->weight));
  CHECK(w.device() == kCPU);
  CHECK(block->steps.device() == kCPU);
}

TEST_CASE("zero_grad sets gradients to none or to zeros; requires_grad_ freezes") {
  nn::Linear fc(3, 2);
  fc(ones({1, 3})).sum().backward();
  REQUIRE(fc->weight.grad().defined());
  fc->zero_grad(false);
  CHECK(fc->weight.grad().defined());
  CHECK(fc->weight.grad().to_vector<float>() == std::vector<float>(6, 0.0f));
  fc->zero_grad();
  CHECK_FALSE(fc->weight.grad().defined());
  CHECK_FALSE(fc->bias.grad().defined());

  fc->requires_grad_(false);
  CHECK_FALSE(fc->weight.requires_grad());
  CHECK_FALSE(fc->bias.requires_grad());
  CHECK_FALSE(fc(ones({1, 3})).requires_grad());
  fc->requires_grad_();
  CHECK(fc(ones({1, 3})).requires_grad());
}

TEST_CASE("state_dict holds parameters and persistent buffers, module by module") {
  Block block;
  const nn::TensorDict state = block->state_dict();
  CHECK(keys_of(state) == std::vector<std::string>{"scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight"});
  // Detached aliases: the same memory, no autograd.
  CHECK(state.at("fc1.weight").data_ptr() == block->fc1->weight.data_ptr());
  CHECK_FALSE(state.at("fc1.weight").requires_grad());
  CHECK_FALSE(state.at("fc1.weight").is_same(block->fc1->weight));

  Net net;
  CHECK(keys_of(net->state_dict()) == std::vector<std::string>{"encoder.scale", "encoder.steps",
                                                               "encoder.fc1.weight", "encoder.fc1.bias",
                                                               "encoder.fc2.weight"});
}

TEST_CASE("load_state_dict copies values into the existing handles") {
  nn::Sequential source = mlp();
  nn::Sequential target = mlp();
  const Tensor w = target->at<nn::LinearImpl>(0)->weight;
  const auto result = target->load_state_dict(source->state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  CHECK(w.is_same(target->at<nn::LinearImpl>(0)->weight));
  for (const auto& [name, t] : source->state_dict()) CHECK(equal(target->state_dict().at(name), t));
  // A copy, not an alias: changing the source later leaves the target alone.
  NoGradGuard no_grad;
  source->at<nn::LinearImpl>(0)->weight.fill_(3.0);
  CHECK(w.to_vector<float>()[0] != 3.0f);
}

TEST_CASE("loading a module's own state dict changes nothing") {
  nn::Linear fc(3, 2);
  const std::vector<float> before = fc->weight.to_vector<float>();
  fc->load_state_dict(fc->state_dict());
  CHECK(fc->weight.to_vector<float>() == before);
}

TEST_CASE("load_state_dict converts dtypes") {
  nn::Linear source(2, 2);
  nn::Linear target(2, 2);
  source->to(kFloat64);
  target->load_state_dict(source->state_dict());
  CHECK(target->weight.dtype() == kFloat32);
  CHECK(allclose(target->weight.to(kFloat64), source->weight, 1e-7, 0.0));
}

TEST_CASE("a strict load names every missing, unexpected and mis-shaped key in one error, and copies nothing") {
  nn::Linear fc0(4, 3);
  nn::Sequential model(fc0, nn::ReLU(), nn::Linear(3, 2));
  const std::vector<float> before = fc0->weight.to_vector<float>();

  nn::TensorDict state;
  state.insert("0.weight", zeros({4, 3}));  // transposed
  state.insert("0.bias", zeros({3}));
  state.insert("2.weight", zeros({2, 3}));
  state.insert("3.weight", zeros({2, 2}));
  CHECK_THROWS_WITH_AS(model->load_state_dict(state),
                       "[load_state_dict] cannot load the state dict into Sequential:\n"
                       "  missing keys: '2.bias'\n"
                       "  unexpected keys: '3.weight'\n"
                       "  shape mismatch for '0.weight': the module has (3, 4), the state dict has (4, 3)",
                       Error);
  CHECK(fc0->weight.to_vector<float>() == before);
  CHECK(fc0->bias.to_vector<float>() != std::vector<float>(3, 0.0f));
}

TEST_CASE("a non-strict load reports missing and unexpected keys, loads the rest, still refuses bad shapes") {
  nn::Sequential model(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  nn::TensorDict state;
  state.insert("0.weight", full({3, 4}, 0.25));
  state.insert("extra", zeros({1}));
  const auto result = model->load_state_dict(state, false);
  CHECK(result.missing_keys == std::vector<std::string>{"0.bias", "2.weight", "2.bias"});
  CHECK(result.unexpected_keys == std::vector<std::string>{"extra"});
  CHECK(model->at<nn::LinearImpl>(0)->weight.to_vector<float>() == std::vector<float>(12, 0.25f));

  nn::TensorDict bad;
  bad.insert("0.bias", zeros({4}));
  CHECK_THROWS_WITH_AS(model->load_state_dict(bad, false),
                       "[load_state_dict] cannot load the state dict into Sequential:\n"
                       "  shape mismatch for '0.bias': the module has (3,), the state dict has (4,)",
                       Error);
}

TEST_CASE("printing matches PyTorch's layout") {
  CHECK(mlp()->to_string() ==
        "Sequential(\n"
        "  (0): Linear(in_features=784, out_features=512, bias=true)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=512, out_features=10, bias=true)\n"
        ")");

  std::ostringstream os;
  os << Net();
  CHECK(os.str() ==
        "Net(\n"
        "  (encoder): Block(\n"
        "    (fc1): Linear(in_features=4, out_features=3, bias=true)\n"
        "    (fc2): Linear(in_features=3, out_features=2, bias=false)\n"
        "  )\n"
        "  (head): Sequential(\n"
        "    (0): GELU(approximate='tanh')\n"
        "    (1): Dropout(p=0.1)\n"
        "  )\n"
        ")");

  CHECK(nn::Sequential()->to_string() == "Sequential()");
}

TEST_CASE("a module that is not owned by a shared_ptr can still be walked") {
  BlockImpl block;
  const auto modules = block.named_modules();
  REQUIRE(modules.size() == 3);
  CHECK(modules[0].second.get() == &block);
  CHECK(block.parameters().size() == 3);
}

TEST_CASE("the default forward explains that the module takes something else") {
  nn::ModuleList list(nn::Linear(2, 2));
  CHECK_THROWS_WITH_AS(list->forward(ones({1, 2})),
                       "[forward] ModuleList has no forward(Tensor); call the forward it defines", Error);
}
