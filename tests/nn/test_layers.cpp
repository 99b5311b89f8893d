// Layers and containers: forward against hand-computed values, PyTorch's default
// initialisation in distribution, printing.
#include <doctest/doctest.h>

#include <cmath>

#include "moments.h"
#include "nn/all.h"

using namespace weft;
using testing::moments;

namespace {

void set_values(Tensor t, const std::vector<double>& values) {
  NoGradGuard no_grad;
  t.copy_(from_vector(values, t.shape()));
}

}  // namespace

TEST_CASE("Linear computes x·Wᵀ + b") {
  nn::Linear fc(3, 2);
  set_values(fc->weight, {1, 2, 3, -1, 0, 4});
  set_values(fc->bias, {0.5, -2});
  const Tensor x = tensor({1, 0, 2, -1, 1, 1}).view({2, 3});
  // Row 0: [1·1 + 0·2 + 2·3 + 0.5, 1·(−1) + 0 + 2·4 − 2] = [7.5, 5]
  // Row 1: [−1 + 2 + 3 + 0.5, 1 + 0 + 4 − 2] = [4.5, 3]
  CHECK(fc(x).to_vector<float>() == std::vector<float>{7.5f, 5.0f, 4.5f, 3.0f});
  CHECK(fc(x).shape() == Shape{2, 2});

  nn::Linear no_bias(3, 2, false);
  set_values(no_bias->weight, {1, 2, 3, -1, 0, 4});
  CHECK(no_bias(x).to_vector<float>() == std::vector<float>{7.0f, 7.0f, 4.0f, 5.0f});
  CHECK(no_bias->parameters().size() == 1);

  // Leading batch dims pass through: (2, 5, 3) -> (2, 5, 2).
  CHECK(fc(randn({2, 5, 3})).shape() == Shape{2, 5, 2});
}

TEST_CASE("Linear gradients flow to weight and bias") {
  nn::Linear fc(3, 2);
  const Tensor x = tensor({1, 2, 3}).view({1, 3});
  fc(x).sum().backward();
  // d/dW sum(xWᵀ + b) = 1·x for every output row; d/db = 1.
  CHECK(fc->weight.grad().to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  CHECK(fc->bias.grad().to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("Linear's default init is U(-1/sqrt(in), 1/sqrt(in)) for weight and bias") {
  manual_seed(1234);
  nn::Linear fc(1000, 500);
  const double bound = 1.0 / std::sqrt(1000.0);
  CHECK(fc->weight.abs().max().item() <= bound);
  CHECK(fc->weight.max().item() > 0.99 * bound);
  CHECK(fc->weight.min().item() < -0.99 * bound);
  const auto [mean, var] = moments(fc->weight);
  // 500 000 draws: the mean's standard error is ~2.6e-5, the variance's relative error ~0.13 %.
  CHECK(std::abs(mean) < 2e-4);
  CHECK(var == doctest::Approx(bound * bound / 3.0).epsilon(0.01));

  CHECK(fc->bias.abs().max().item() <= bound);
  CHECK(fc->bias.max().item() > 0.9 * bound);
  CHECK(fc->bias.min().item() < -0.9 * bound);
  CHECK(fc->weight.dtype() == kFloat32);
}

TEST_CASE("Linear draws weight then bias from the default generator") {
  manual_seed(7);
  nn::Linear fc(4, 3);
  manual_seed(7);
  const Tensor draws = rand({15}, kFloat64);  // 12 for the weight, then 3 for the bias
  const double b = 0.5;                       // 1/sqrt(4)
  const std::vector<double> u = draws.to_vector<double>();
  const std::vector<float> w = fc->weight.to_vector<float>();
  const std::vector<float> bias = fc->bias.to_vector<float>();
  for (int i = 0; i < 12; ++i) CHECK(w[i] == doctest::Approx(u[i] * 2 * b - b).epsilon(1e-6));
  for (int i = 0; i < 3; ++i) CHECK(bias[i] == doctest::Approx(u[12 + i] * 2 * b - b).epsilon(1e-6));
}

TEST_CASE("layers follow the tensor frame's default dtype") {
  DefaultDTypeGuard f64(kFloat64);
  nn::Linear fc(2, 2);
  nn::LayerNorm ln(2);
  nn::Embedding emb(3, 2);
  CHECK(fc->weight.dtype() == kFloat64);
  CHECK(fc->bias.dtype() == kFloat64);
  CHECK(ln->weight.dtype() == kFloat64);
  CHECK(emb->weight.dtype() == kFloat64);
}

TEST_CASE("Embedding looks up rows and starts N(0, 1)") {
  nn::Embedding emb(4, 2);
  set_values(emb->weight, {0, 1, 10, 11, 20, 21, 30, 31});
  const Tensor idx = from_vector<int64_t>({3, 0, 3, 2}, {2, 2});
  const Tensor y = emb(idx);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{30, 31, 0, 1, 30, 31, 20, 21});
  CHECK(emb->to_string() == "Embedding(4, 2)");

  manual_seed(99);
  nn::Embedding big(1000, 100);
  const auto [mean, var] = moments(big->weight);
  // 100 000 standard normal draws: standard errors ~0.003 (mean) and ~0.0045 (variance).
  CHECK(std::abs(mean) < 0.02);
  CHECK(var == doctest::Approx(1.0).epsilon(0.03));
}

TEST_CASE("LayerNorm normalises the trailing dims and starts as ones and zeros") {
  nn::LayerNorm ln(4);
  CHECK(ln->weight.to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(ln->bias.to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(ln->to_string() == "LayerNorm((4,), eps=1e-05, elementwise_affine=true)");

  // Row [1, 2, 3, 4]: mean 2.5, population variance 1.25.
  const Tensor x = tensor({1, 2, 3, 4}, kFloat64).view({1, 4});
  nn::LayerNorm ln64(4);
  ln64->to(kFloat64);
  set_values(ln64->weight, {1, 2, 1, 1});
  set_values(ln64->bias, {0, 0, 0, 1});
  const double s = std::sqrt(1.25 + 1e-5);
  const std::vector<double> got = ln64(x).to_vector<double>();
  const std::vector<double> want = {-1.5 / s, 2 * (-0.5 / s), 0.5 / s, 1.5 / s + 1};
  for (int i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));

  nn::LayerNorm plain(Shape{2, 3}, 1e-6, false);
  CHECK(plain->parameters().empty());
  CHECK(plain->to_string() == "LayerNorm((2, 3), eps=1e-06, elementwise_affine=false)");
  nn::LayerNorm no_bias(3, 1e-5, true, false);
  REQUIRE(no_bias->named_parameters().size() == 1);
  CHECK(no_bias->named_parameters()[0].first == "weight");
}

TEST_CASE("Dropout zeroes with probability p and rescales while training, and is the identity in eval") {
  manual_seed(3);
  nn::Dropout drop(0.25);
  const Tensor x = ones({100000});
  const std::vector<float> y = drop(x).to_vector<float>();
  int64_t zeros_seen = 0, scaled_seen = 0;
  for (float v : y) {
    zeros_seen += v == 0.0f;
    scaled_seen += v == static_cast<float>(1.0 / 0.75);
  }
  CHECK(zeros_seen + scaled_seen == 100000);
  // Binomial(100000, 0.25): standard deviation ~137.
  CHECK(std::abs(zeros_seen - 25000) < 1000);
  drop->eval();
  CHECK(equal(drop(x), x));
  CHECK(drop->to_string() == "Dropout(p=0.25)");
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), "[Dropout] p must be in [0, 1], got 1.5", Error);
}

TEST_CASE("activations compute their functions") {
  const Tensor x = tensor({-2, -0.5, 0, 0.5, 2}, kFloat64);
  const std::vector<double> v = x.to_vector<double>();
  auto check = [&](const Tensor& y, auto f) {
    const std::vector<double> got = y.to_vector<double>();
    REQUIRE(got.size() == v.size());
    for (size_t i = 0; i < v.size(); ++i) CHECK(got[i] == doctest::Approx(f(v[i])).epsilon(1e-12));
  };
  check(nn::ReLU()(x), [](double a) { return a > 0 ? a : 0.0; });
  check(nn::GELU()(x), [](double a) { return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); });
  check(nn::GELU("tanh")(x), [](double a) {
    return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
  });
  check(nn::SiLU()(x), [](double a) { return a / (1 + std::exp(-a)); });
  check(nn::Tanh()(x), [](double a) { return std::tanh(a); });
  check(nn::Sigmoid()(x), [](double a) { return 1 / (1 + std::exp(-a)); });
  CHECK(nn::Identity()(x).is_same(x));
  CHECK_THROWS_WITH_AS(nn::GELU("erf"), "[GELU] approximate must be 'none' or 'tanh', got 'erf'", Error);
  CHECK(nn::GELU()->to_string() == "GELU(approximate='none')");
  CHECK(nn::SiLU()->to_string() == "SiLU()");
}

TEST_CASE("Flatten keeps the batch dim by default") {
  const Tensor x = randn({2, 3, 4, 5});
  CHECK(nn::Flatten()(x).shape() == Shape{2, 60});
  CHECK(nn::Flatten(0, 1)(x).shape() == Shape{6, 4, 5});
  CHECK(equal(nn::Flatten()(x), x.view({2, 60})));
  CHECK(nn::Flatten()->to_string() == "Flatten(start_dim=1, end_dim=-1)");
}

TEST_CASE("ModuleList and ModuleDict hold modules in order without a forward of their own") {
  nn::ModuleList list;
  for (int i = 1; i <= 3; ++i) list->push_back(nn::Linear(i, i + 1));
  CHECK(list->size() == 3);
  int64_t expected_in = 1;
  for (const auto& m : *list) CHECK(std::dynamic_pointer_cast<nn::LinearImpl>(m)->in_features == expected_in++);
  CHECK(list->at<nn::LinearImpl>(1)->out_features == 3);
  CHECK(list->named_parameters()[2].first == "1.weight");
  CHECK(list->to_string() ==
        "ModuleList(\n"
        "  (0): Linear(in_features=1, out_features=2, bias=true)\n"
        "  (1): Linear(in_features=2, out_features=3, bias=true)\n"
        "  (2): Linear(in_features=3, out_features=4, bias=true)\n"
        ")");

  nn::ModuleDict dict;
  dict->insert("proj", nn::Linear(2, 2));
  dict->insert("act", nn::ReLU());
  CHECK(dict->keys() == std::vector<std::string>{"proj", "act"});
  CHECK(dict->contains("act"));
  CHECK_FALSE(dict->contains("norm"));
  CHECK(dict->at<nn::LinearImpl>("proj")->in_features == 2);
  CHECK_THROWS_WITH_AS((*dict)["norm"], "[ModuleDict] no module named 'norm'", Error);
  CHECK(dict->named_parameters()[0].first == "proj.weight");
  CHECK(dict->to_string() ==
        "ModuleDict(\n"
        "  (proj): Linear(in_features=2, out_features=2, bias=true)\n"
        "  (act): ReLU()\n"
        ")");
}
