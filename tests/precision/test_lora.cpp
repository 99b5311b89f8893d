// LoRA over float and quantized Linears: the adapter's arithmetic against hand-computed values,
// its gradients against the analytic ones, merge / unmerge, PEFT-style state-dict keys, and QLoRA
// (a Linear4bit model whose adapters learn a task the frozen model gets wrong).
#include <doctest/doctest.h>

#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "precision/quant/lora.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision::quant;

TEST_CASE("LoRA: a fresh adapter changes nothing; then y = base(x) + (alpha/rank) (x Aᵀ) Bᵀ") {
  manual_seed(1);
  auto base = std::make_shared<nn::LinearImpl>(3, 2);
  LoraLinear lora(base, LoraOptions{2, 4.0, 0.0, kFloat32});
  const Tensor x = tensor({1.0, 2.0, 3.0}).reshape({1, 3});
  CHECK(equal(lora(x), base->forward(x)));
  {
    NoGradGuard g;
    lora->lora_A->weight.copy_(tensor({1.0, 0.0, 0.0, 0.0, 1.0, 1.0}).reshape({2, 3}));  // x Aᵀ = (1, 5)
    lora->lora_B->weight.copy_(tensor({1.0, 0.0, 0.5, 2.0}).reshape({2, 2}));            // (1, 5) Bᵀ = (1, 10.5)
  }
  const Tensor y = lora(x);
  const Tensor expected = add(base->forward(x), mul(tensor({1.0, 10.5}).reshape({1, 2}), 2.0));  // alpha/rank = 2
  CHECK(allclose(y, expected));
  CHECK(lora->to_string().find("LoraLinear(\n  rank=2, alpha=4, dropout=0") == 0);
}

TEST_CASE("LoRA: apply_lora freezes the base; gradients reach exactly the adapters, as the analytic rule says") {
  manual_seed(2);
  nn::Sequential model(nn::Linear(5, 4), nn::ReLU(), nn::Linear(4, 3));
  const auto wrapped = apply_lora(*model, LoraOptions{2, 2.0, 0.0, kFloat32});
  CHECK(wrapped == std::vector<std::string>{"0", "2"});
  int trainable = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const bool adapter = name.find("lora_") != std::string::npos;
    CHECK(p.requires_grad() == adapter);
    trainable += p.requires_grad();
  }
  CHECK(trainable == 4);
  auto second = std::dynamic_pointer_cast<LoraLinearImpl>((*model)[2]);
  {
    NoGradGuard g;
    second->lora_B->weight.normal_();
  }
  const Tensor x = randn({6, 5});
  const Tensor h = relu((*model)[0]->forward(x)).detach();
  const Tensor gy = randn({6, 3});
  model(x).backward(gy);
  // d/dB = s · gyᵀ (h Aᵀ),  d/dA = s · (gy B)ᵀ h
  const double s = second->scaling();
  const Tensor a = second->lora_A->weight.detach(), b = second->lora_B->weight.detach();
  CHECK(allclose(second->lora_B->weight.grad(), mul(matmul(gy.t(), matmul(h, a.t())), s), 1e-5, 1e-6));
  CHECK(allclose(second->lora_A->weight.grad(), mul(matmul(matmul(gy, b).t(), h), s), 1e-5, 1e-6));
  CHECK_FALSE(second->base_layer->weight.grad().defined());
  // Wrapping again finds nothing new.
  CHECK(apply_lora(*model).empty());
}

TEST_CASE("LoRA: merge folds the adapter into a float base and unmerge takes it out; quantized bases refuse") {
  manual_seed(3);
  auto base = std::make_shared<nn::LinearImpl>(8, 6);
  const Tensor w0 = base->weight.clone();
  LoraLinear lora(base, LoraOptions{4, 8.0, 0.0, kFloat32});
  {
    NoGradGuard g;
    lora->lora_B->weight.normal_();
  }
  const Tensor x = randn({3, 8});
  const Tensor before = lora(x).detach();
  lora->merge();
  CHECK(lora->merged());
  CHECK(allclose(lora(x), before, 1e-5, 1e-5));
  CHECK_FALSE(allclose(base->weight, w0));
  lora->unmerge();
  CHECK(allclose(base->weight, w0, 1e-6, 1e-6));
  CHECK(allclose(lora(x), before, 1e-5, 1e-5));
  CHECK_THROWS_WITH_AS(lora->unmerge(), doctest::Contains("not merged"), Error);
  LoraLinear quantized(std::make_shared<Linear4bitImpl>(64, 8), LoraOptions{});
  CHECK_THROWS_WITH_AS(quantized->merge(), doctest::Contains("a Linear4bit base would have to be quantized again"),
                       Error);
  CHECK_THROWS_WITH_AS(LoraLinear(base, LoraOptions{0, 1.0, 0.0, kFloat32}), doctest::Contains("rank must be at least 1"),
                       Error);
}

TEST_CASE("LoRA over a quantized base: PEFT-style keys with the base's statistics; round trip") {
  manual_seed(4);
  nn::Sequential model(std::make_shared<Linear4bitImpl>(64, 16, true, Linear4bitOptions{QuantKind::NF4, true, 64, {}}));
  apply_lora(*model, LoraOptions{4, 8.0, 0.0, kFloat32});
  std::vector<std::string> keys;
  for (const auto& [k, v] : model->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.base_layer.weight", "0.base_layer.bias", "0.base_layer.weight.absmax",
                                         "0.base_layer.weight.quant_map", "0.base_layer.weight.nested_absmax",
                                         "0.base_layer.weight.nested_quant_map",
                                         "0.base_layer.weight.quant_state.bitsandbytes__nf4", "0.lora_A.weight",
                                         "0.lora_B.weight"});
  nn::Sequential other(std::make_shared<Linear4bitImpl>(64, 16));
  apply_lora(*other, LoraOptions{4, 8.0, 0.0, kFloat32});
  other->load_state_dict(model->state_dict());
  const Tensor x = randn({2, 64});
  CHECK(equal(other(x), model(x)));
}

TEST_CASE("QLoRA: adapters on frozen 4-bit and int8 layers learn what the frozen model gets wrong") {
  // A frozen two-layer model and a target that differs from it by a low-rank map: training only
  // the adapters (through the second layer's frozen weights) must close most of the gap.
  for (const bool four_bit : {true, false}) {
    CAPTURE(four_bit);
    manual_seed(5);
    nn::Sequential teacher(nn::Linear(64, 64), nn::Tanh(), nn::Linear(64, 8));
    std::shared_ptr<nn::LinearImpl> first, second;
    if (four_bit) {
      first = Linear4bitImpl::from_linear(*teacher->at<nn::LinearImpl>(0), {QuantKind::NF4, true, 64, kFloat32});
      second = Linear4bitImpl::from_linear(*teacher->at<nn::LinearImpl>(2), {QuantKind::NF4, true, 64, kFloat32});
    } else {
      first = Linear8bitLtImpl::from_linear(*teacher->at<nn::LinearImpl>(0), {});
      second = Linear8bitLtImpl::from_linear(*teacher->at<nn::LinearImpl>(2), {});
    }
    nn::Sequential student(first, nn::Tanh(), second);
    {
      NoGradGuard g;
      Tensor w = teacher->at<nn::LinearImpl>(0)->weight;
      w.add_(mul(matmul(randn({64, 2}), randn({2, 64})), 0.05));  // the teacher drifts by rank 2
    }
    apply_lora(*student, LoraOptions{4, 8.0, 0.0, kFloat32}, [](const std::string& name) { return name == "0"; });
    std::vector<Tensor> trainable;
    for (const Tensor& p : student->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    CHECK(trainable.size() == 2);
    optim::AdamW optimizer(trainable, {.lr = 1e-2, .weight_decay = 0.0});
    const Tensor x = randn({128, 64});
    const Tensor target = teacher(x).detach();
    auto loss_now = [&] {
      NoGradGuard g;
      return mse_loss(student(x), target).item<double>();
    };
    const double initial = loss_now();
    for (int step = 0; step < 120; ++step) {
      optimizer.zero_grad();
      mse_loss(student(x), target).backward();
      optimizer.step();
    }
    CHECK(loss_now() < 0.3 * initial);
  }
}
