// GPT (models/gpt.h): the config and its errors, parameter names and counts, the initial weights'
// statistics, the tied head's gradient, causality, a float64 finite-difference gradient check, the
// AdamW grouping, layers swapped by precision plugins and LoRA, and fidelity against PyTorch: ten
// AdamW steps from the same weights on the same batches (goldens by scripts/golden_gpt.py).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "error_message.h"
#include "models/all.h"
#include "test_data_dir.h"

using namespace weft;
using models::GPT;
using models::GPTConfig;

namespace {

std::filesystem::path data_dir() { return models_test_data_dir(); }

GPTConfig tiny(int64_t vocab = 11, int64_t block = 8, int64_t layers = 2, int64_t heads = 2, int64_t width = 8) {
  GPTConfig c;
  c.vocab_size = vocab;
  c.block_size = block;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_embd = width;
  return c;
}

// Token ids (rows, cols) in [0, vocab), reproducible.
Tensor ids(int64_t rows, int64_t cols, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  return randint(0, vocab, {rows, cols}, TensorOptions(DType::Int64), &gen);
}

double std_of(const Tensor& t) {
  const std::vector<double> v = t.to(kFloat64).to_vector<double>();
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size()));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("GPTConfig: GPT-2 124M has 124,439,808 parameters with the tied head; a built model agrees") {
  const GPTConfig gpt2 = GPTConfig::gpt2_124m();
  CHECK(gpt2.vocab_size == 50257);
  CHECK(gpt2.block_size == 1024);
  CHECK(gpt2.num_parameters() == 124'439'808);
  CHECK(gpt2.num_parameters(false) == 124'439'808 - 1024 * 768);
  // A smaller model, built: the count from its tensors (tied weight once) matches the formula,
  // with and without biases.
  for (const bool bias : {true, false}) {
    GPTConfig c = tiny(13, 6, 3, 2, 12);
    c.bias = bias;
    GPT gpt(c);
    int64_t by_hand = 0;
    for (const Tensor& p : gpt->parameters()) by_hand += p.numel();
    CHECK(by_hand == c.num_parameters());
    CHECK(gpt->num_parameters() == c.num_parameters());
    CHECK(gpt->num_parameters(false) == c.num_parameters(false));
  }
}

TEST_CASE("GPTConfig: bad configs are refused with the field named") {
  auto fails_with = [](GPTConfig c) { return error_of([&] { GPT gpt(c); }); };
  GPTConfig c = tiny();
  c.n_head = 3;
  CHECK(fails_with(c) == "[GPTConfig] expected n_head to divide n_embd, got n_embd 8 and n_head 3");
  c = tiny();
  c.vocab_size = 0;
  CHECK(fails_with(c) == "[GPTConfig] expected vocab_size > 0, got 0");
  c = tiny();
  c.n_layer = -1;
  CHECK(fails_with(c) == "[GPTConfig] expected n_layer > 0, got -1");
  c = tiny();
  c.block_size = 0;
  CHECK(fails_with(c) == "[GPTConfig] expected block_size > 0, got 0");
  c = tiny();
  c.dropout = 1.0;
  CHECK(fails_with(c) == "[GPTConfig] expected dropout in [0, 1), got 1");
  c = tiny();
  c.layer_norm_eps = 0.0;
  CHECK(fails_with(c) == "[GPTConfig] expected layer_norm_eps > 0, got 0");
  CHECK_NOTHROW(tiny().check());
}

TEST_CASE("GPT: parameter names are nanoGPT's / Hugging Face's checkpoint keys; the head is the embedding") {
  GPT gpt(tiny(11, 8, 1, 2, 8));
  std::vector<std::string> names;
  for (const auto& [name, t] : gpt->named_parameters()) names.push_back(name);
  const std::vector<std::string> expected = {
      "transformer.wte.weight",          "transformer.wpe.weight",          "transformer.h.0.ln_1.weight",
      "transformer.h.0.ln_1.bias",       "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
      "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight",
      "transformer.h.0.ln_2.bias",       "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias",
      "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias", "transformer.ln_f.weight",
      "transformer.ln_f.bias"};
  CHECK(names == expected);  // lm_head.weight is the same tensor, listed once under its first name
  const nn::TensorDict state = gpt->state_dict();
  REQUIRE(state.contains("lm_head.weight"));
  CHECK(state.at("lm_head.weight").data_ptr() == state.at("transformer.wte.weight").data_ptr());
  CHECK(gpt->lm_head->weight.is_same(gpt->transformer->wte->weight));
  CHECK(gpt->transformer->wte->weight.shape() == Shape{11, 8});
  CHECK(gpt->transformer->wpe->weight.shape() == Shape{8, 8});
  CHECK(gpt->block(0)->attn->c_attn->weight.shape() == Shape{24, 8});  // nn::Linear layout [out, in]
  CHECK(gpt->block(0)->mlp->c_fc->weight.shape() == Shape{32, 8});
  CHECK(gpt->block(0)->mlp->c_proj->weight.shape() == Shape{8, 32});
  CHECK(error_of([&] { gpt->block(1); }) == "[GPT] expected a block index in [0, 1), got 1");
}

TEST_CASE("GPT: shapes of logits, loss and last-position logits") {
  GPT gpt(tiny());
  const Tensor idx = ids(3, 5, 11, 1);
  const Tensor logits = gpt(idx);
  CHECK(logits.shape() == Shape{3, 5, 11});
  const Tensor last = gpt->last_logits(idx);
  CHECK(last.shape() == Shape{3, 11});
  CHECK(max_abs_diff(last, logits.select(1, 4)) < 1e-6);
  const Tensor loss = gpt->loss(idx, ids(3, 5, 11, 2));
  CHECK(loss.dim() == 0);
  // Fresh weights give near-uniform predictions: the loss is close to ln V.
  CHECK(loss.item() == doctest::Approx(std::log(11.0)).epsilon(0.02));
  // int32 ids work as int64 ones do.
  CHECK(max_abs_diff(gpt(idx.to(DType::Int32)), logits) == 0.0);
}

TEST_CASE("GPT: initial weights follow nanoGPT (N(0, 0.02), c_proj N(0, 0.02/sqrt(2L)), biases 0, LayerNorm 1/0)") {
  manual_seed(5);
  const GPTConfig c = tiny(512, 64, 4, 4, 128);
  GPT gpt(c);
  const double proj_std = 0.02 / std::sqrt(2.0 * 4);
  CHECK(std_of(gpt->transformer->wte->weight) == doctest::Approx(0.02).epsilon(0.03));
  CHECK(std_of(gpt->transformer->wpe->weight) == doctest::Approx(0.02).epsilon(0.03));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    CAPTURE(i);
    const auto block = gpt->block(i);
    CHECK(std_of(block->attn->c_attn->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(std_of(block->mlp->c_fc->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(std_of(block->attn->c_proj->weight) == doctest::Approx(proj_std).epsilon(0.03));
    CHECK(std_of(block->mlp->c_proj->weight) == doctest::Approx(proj_std).epsilon(0.03));
    for (const Tensor& b : {block->attn->c_attn->bias, block->attn->c_proj->bias, block->mlp->c_fc->bias,
                            block->mlp->c_proj->bias, block->ln_1->bias, block->ln_2->bias})
      CHECK(b.abs().max().item() == 0.0);
    CHECK(block->ln_1->weight.min().item() == 1.0);
    CHECK(block->ln_2->weight.max().item() == 1.0);
  }
  CHECK(gpt->transformer->ln_f->weight.min().item() == 1.0);
  // The same seed gives the same model; reset_parameters draws again.
  manual_seed(5);
  GPT again(c);
  CHECK(max_abs_diff(again->block(3)->mlp->c_proj->weight, gpt->block(3)->mlp->c_proj->weight) == 0.0);
  again->reset_parameters();
  CHECK(max_abs_diff(again->block(3)->mlp->c_proj->weight, gpt->block(3)->mlp->c_proj->weight) > 0.0);
}

TEST_CASE("GPT: the tied weight's gradient is the sum of the embedding's and the head's") {
  manual_seed(11);
  GPT tied(tiny());
  tied->to(kFloat64);
  GPT untied(tiny());
  untied->to(kFloat64);
  untied->load_state_dict(tied->state_dict());
  // Untie: a head of its own, a separate leaf holding the same values.
  Tensor head_weight = tied->transformer->wte->weight.detach().clone();
  untied->replace_module("lm_head", std::make_shared<models::TiedLMHeadImpl>(head_weight.requires_grad_()));
  CHECK(!untied->lm_head->weight.is_same(untied->transformer->wte->weight));

  const Tensor idx = ids(2, 6, 11, 3), targets = ids(2, 6, 11, 4);
  const Tensor loss_tied = tied->loss(idx, targets), loss_untied = untied->loss(idx, targets);
  CHECK(loss_tied.item() == doctest::Approx(loss_untied.item()).epsilon(1e-12));
  loss_tied.backward();
  loss_untied.backward();
  const Tensor embedding_grad = untied->transformer->wte->weight.grad();
  const Tensor head_grad = untied->lm_head->weight.grad();
  REQUIRE(embedding_grad.defined());
  REQUIRE(head_grad.defined());
  CHECK(head_grad.abs().max().item() > 0.0);
  CHECK(max_abs_diff(tied->transformer->wte->weight.grad(), embedding_grad + head_grad) < 1e-12);
  // Neither use alone accounts for it.
  CHECK(max_abs_diff(tied->transformer->wte->weight.grad(), head_grad) > 1e-6);
}

TEST_CASE("GPT: causal — changing token t leaves the logits before t unchanged") {
  manual_seed(3);
  GPT gpt(tiny());
  const Tensor idx = ids(2, 8, 11, 5);
  Tensor changed = idx.clone();
  {
    int64_t* p = changed.data<int64_t>();
    p[5] = (p[5] + 1) % 11;        // row 0, position 5
    p[8 + 5] = (p[8 + 5] + 3) % 11;  // row 1, position 5
  }
  const Tensor a = gpt(idx), b = gpt(changed);
  CHECK(max_abs_diff(a.narrow(1, 0, 5), b.narrow(1, 0, 5)) == 0.0);
  for (int64_t t = 5; t < 8; ++t) {
    CAPTURE(t);
    CHECK(max_abs_diff(a.narrow(1, t, 1), b.narrow(1, t, 1)) > 1e-6);
  }
}

TEST_CASE("GPT: bad ids and targets are refused") {
  GPTConfig c = tiny(11, 64);
  GPT gpt(c);
  CHECK(error_of([&] { gpt(ids(1, 80, 11, 1)); }) == "[GPT] sequence length 80 exceeds the context of 64 positions");
  CHECK(error_of([&] { gpt->loss(ids(1, 65, 11, 1), ids(1, 65, 11, 2)); }) ==
        "[GPT] sequence length 65 exceeds the context of 64 positions");
  CHECK(error_of([&] { gpt(zeros({2, 3})); }) == "[GPT] expected token ids of dtype int64 or int32, got float32");
  CHECK(error_of([&] { gpt(ids(1, 6, 11, 1).view({6})); }) == "[GPT] expected token ids of shape (B, T), got (6,)");
  CHECK(error_of([&] { gpt(zeros({2, 0}, TensorOptions(DType::Int64))); }) ==
        "[GPT] expected at least one sequence of at least one token, got ids of shape (2, 0)");
  CHECK(error_of([&] { gpt->loss(ids(2, 4, 11, 1), ids(2, 5, 11, 1)); }) ==
        "[GPT.loss] expected targets of the ids' shape (2, 4), got (2, 5)");
  CHECK(!error_of([&] { gpt(full({1, 3}, 11.0, TensorOptions(DType::Int64))); }).empty());  // id == V
  CHECK(!error_of([&] { gpt(full({1, 3}, -1.0, TensorOptions(DType::Int64))); }).empty());
  models::CausalSelfAttention attn(c);
  CHECK(error_of([&] { attn(zeros({2, 3, 5})); }) == "[CausalSelfAttention] expected input (B, T, 8), got (2, 3, 5)");
}

TEST_CASE("GPT: gradients of the loss match float64 central differences (tanh and erf GELU)") {
  for (const bool gelu_tanh : {true, false}) {
    CAPTURE(gelu_tanh);
    manual_seed(21);
    GPTConfig c = tiny(7, 6, 2, 2, 8);
    c.gelu_tanh = gelu_tanh;
    GPT gpt(c);
    gpt->to(kFloat64);
    // Larger weights than the init's, so every path carries a gradient well above the noise.
    {
      NoGradGuard no_grad;
      Generator gen(99);
      for (Tensor p : gpt->parameters()) p.copy_(add(mul(rand(p.shape(), kFloat64, &gen), 0.6), -0.3).add(p));
    }
    const Tensor idx = ids(2, 6, 7, 8), targets = ids(2, 6, 7, 9);
    gpt->zero_grad();
    gpt->loss(idx, targets).backward();
    const double eps = 1e-6;
    int checked = 0;
    for (const nn::NamedTensor& named : gpt->named_parameters()) {
      const std::string& name = named.first;  // not a structured binding: clang 14's CAPTURE refuses one
      const Tensor& p = named.second;
      CAPTURE(name);
      const Tensor grad = p.grad();
      REQUIRE(grad.defined());
      const std::vector<double> analytic = grad.contiguous().to_vector<double>();
      double* data = p.data<double>();
      // Every element of small tensors, an evenly spaced sample of larger ones.
      const int64_t n = p.numel(), stride = std::max<int64_t>(1, n / 24);
      for (int64_t i = 0; i < n; i += stride) {
        NoGradGuard no_grad;
        const double saved = data[i];
        data[i] = saved + eps;
        const double up = gpt->loss(idx, targets).item();
        data[i] = saved - eps;
        const double down = gpt->loss(idx, targets).item();
        data[i] = saved;
        const double numeric = (up - down) / (2 * eps);
        CAPTURE(i);
        CHECK(analytic[static_cast<size_t>(i)] == doctest::Approx(numeric).epsilon(1e-5).scale(1e-3));
        ++checked;
      }
    }
    CHECK(checked > 300);
  }
}

TEST_CASE("gpt_param_groups: weights and embeddings decayed, biases and LayerNorms not; make_gpt_adamw uses them") {
  GPT gpt(tiny(11, 8, 2, 2, 8));
  optim::AdamWOptions options;
  options.lr = 3e-4;
  options.weight_decay = 0.1;
  const auto groups = models::gpt_param_groups(*gpt, options);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].options.weight_decay == 0.1);
  CHECK(groups[1].options.weight_decay == 0.0);
  CHECK(groups[1].options.lr == 3e-4);
  CHECK(groups[0].params.size() == 2 + 4 * 2);       // wte (= lm_head), wpe, four Linear weights per block
  CHECK(groups[1].params.size() == 4 * 2 * 2 + 2);   // two LayerNorms and four biases per block, ln_f
  for (const Tensor& p : groups[0].params) CHECK(p.dim() >= 2);
  for (const Tensor& p : groups[1].params) CHECK(p.dim() == 1);
  optim::AdamW adamw = models::make_gpt_adamw(*gpt, options);
  CHECK(adamw.num_param_groups() == 2);
  // Frozen parameters are left out; nothing trainable is an error.
  gpt->transformer->wpe->weight.requires_grad_(false);
  CHECK(models::gpt_param_groups(*gpt, options)[0].params.size() == 1 + 4 * 2);
  gpt->requires_grad_(false);
  CHECK(models::gpt_param_groups(*gpt, options).empty());
  CHECK(error_of([&] { models::make_gpt_adamw(*gpt, options); }) ==
        "[make_gpt_adamw] expected parameters that require grad, the model has none");
}

TEST_CASE("GPT fidelity: ten AdamW steps from PyTorch's weights give PyTorch's losses within 1e-4") {
  const nn::TensorDict init = io::load_safetensors(data_dir() / "gpt_tiny_init.safetensors").tensors;
  const nn::TensorDict golden = io::load_safetensors(data_dir() / "gpt_tiny_golden.safetensors").tensors;
  GPT gpt(tiny(65, 16, 2, 2, 32));  // scripts/golden_gpt.py's config
  gpt->load_state_dict(init);
  CHECK(gpt->lm_head->weight.is_same(gpt->transformer->wte->weight));
  optim::AdamWOptions options;
  options.lr = 1e-2;
  options.betas = {0.9, 0.95};
  options.eps = 1e-8;
  options.weight_decay = 0.1;
  optim::AdamW adamw = models::make_gpt_adamw(*gpt, options);
  const Tensor& x = golden.at("x");
  const Tensor& y = golden.at("y");
  const std::vector<double> expected = golden.at("losses").to_vector<double>();
  REQUIRE(expected.size() == 10);
  for (int64_t step = 0; step < 10; ++step) {
    CAPTURE(step);
    const Tensor loss = gpt->loss(x.select(0, step), y.select(0, step));
    CHECK(std::abs(loss.item() - expected[static_cast<size_t>(step)]) < 1e-4);
    adamw.zero_grad();
    loss.backward();
    adamw.step();
  }
}

TEST_CASE("GPT under bitsandbytes' module_init_context: quantized Linears, the tied embedding head untouched") {
  precision::BitsandbytesPrecision plugin("nf4");
  manual_seed(8);
  std::shared_ptr<models::GPTImpl> gpt;
  {
    precision::Context ctx = plugin.module_init_context();
    gpt = std::make_shared<models::GPTImpl>(tiny(11, 8, 2, 2, 32));
  }
  const auto block = gpt->block(1);
  CHECK(std::dynamic_pointer_cast<precision::quant::Linear4bitImpl>(block->attn->c_attn.ptr()) != nullptr);
  CHECK(std::dynamic_pointer_cast<precision::quant::Linear4bitImpl>(block->mlp->c_proj.ptr()) != nullptr);
  // The head is the embedding's floating weight, in the plugin's dtype, still tied.
  CHECK(gpt->lm_head->weight.is_same(gpt->transformer->wte->weight));
  CHECK(gpt->lm_head->weight.dtype() == kBFloat16);
  // The quantized weights carry the GPT init (N(0, 0.02 / 2) for c_proj), not Linear's default.
  auto c_proj = std::dynamic_pointer_cast<precision::quant::Linear4bitImpl>(block->mlp->c_proj.ptr());
  CHECK(std_of(c_proj->dequantize_weight()) == doctest::Approx(0.01).epsilon(0.15));
  Tensor logits;
  {
    precision::Context ctx = plugin.forward_context();
    logits = plugin.convert_output(gpt->forward(ids(2, 5, 11, 1)));
  }
  CHECK(logits.shape() == Shape{2, 5, 11});
  CHECK(std::isfinite(logits.abs().max().item()));
  // convert_module finds the Linears already quantized and leaves the head alone.
  plugin.convert_module(*gpt);
  CHECK(gpt->lm_head->weight.is_same(gpt->transformer->wte->weight));

  // int8 inference layers: the GPT init quantized into int8 codes and per-row scales.
  precision::BitsandbytesPrecision int8("int8");
  std::shared_ptr<models::GPTImpl> gpt8;
  {
    precision::Context ctx = int8.module_init_context();
    gpt8 = std::make_shared<models::GPTImpl>(tiny(11, 8, 2, 2, 32));
  }
  auto proj8 = std::dynamic_pointer_cast<precision::quant::Linear8bitLtImpl>(gpt8->block(0)->mlp->c_proj.ptr());
  REQUIRE(proj8 != nullptr);
  CHECK(proj8->weight.dtype() == DType::Int8);
  const Tensor dequantized = proj8->weight.to(kFloat32) * proj8->scb().to(kFloat32).unsqueeze(1) / 127.0;
  CHECK(std_of(dequantized) == doctest::Approx(0.01).epsilon(0.1));
}

TEST_CASE("GPT under transformer-engine's module_init_context (replace_layers): FP8 Linears and LayerNorms") {
  precision::TransformerEngineOptions options;
  options.replace_layers = true;
  precision::TransformerEnginePrecision plugin(options);
  std::shared_ptr<models::GPTImpl> gpt;
  {
    precision::Context ctx = plugin.module_init_context();
    gpt = std::make_shared<models::GPTImpl>(tiny(11, 8, 2, 2, 32));
  }
  CHECK(std::dynamic_pointer_cast<precision::Fp8LinearImpl>(gpt->block(0)->attn->c_attn.ptr()) != nullptr);
  CHECK(std::dynamic_pointer_cast<precision::Fp8LinearImpl>(gpt->block(0)->mlp->c_fc.ptr()) != nullptr);
  CHECK(std::dynamic_pointer_cast<precision::TeLayerNormImpl>(gpt->block(0)->ln_1.ptr()) != nullptr);
  CHECK(std::dynamic_pointer_cast<precision::TeLayerNormImpl>(gpt->transformer->ln_f.ptr()) != nullptr);
  CHECK(gpt->lm_head->weight.is_same(gpt->transformer->wte->weight));
  CHECK(gpt->lm_head->weight.dtype() == kBFloat16);
  CHECK(std_of(gpt->block(0)->attn->c_proj->weight) == doctest::Approx(0.01).epsilon(0.1));
  Tensor loss;
  {
    precision::Context ctx = plugin.forward_context();
    loss = gpt->loss(ids(2, 8, 11, 1), ids(2, 8, 11, 2));
  }
  CHECK(std::isfinite(loss.item()));
  loss.backward();
  CHECK(gpt->transformer->wte->weight.grad().defined());
  CHECK(gpt->block(1)->attn->c_attn->weight.grad().defined());
}

TEST_CASE("GPT: forward follows layers swapped after construction (convert_module, apply_lora)") {
  manual_seed(4);
  GPT gpt(tiny(11, 8, 2, 2, 32));
  const Tensor idx = ids(2, 5, 11, 1);
  const Tensor before = gpt(idx);
  // LoRA wraps every Linear (the head is not one); B = 0, so nothing changes until B moves.
  const std::vector<std::string> wrapped = precision::quant::apply_lora(*gpt, {.rank = 2});
  CHECK(wrapped.size() == 8);
  const std::set<std::string> names(wrapped.begin(), wrapped.end());
  CHECK(names.count("transformer.h.0.attn.c_attn") == 1);
  CHECK(max_abs_diff(gpt(idx), before) < 1e-6);
  auto lora = std::dynamic_pointer_cast<precision::quant::LoraLinearImpl>(
      gpt->block(0)->mlp->named_children().front().second);
  REQUIRE(lora != nullptr);
  {
    NoGradGuard no_grad;
    lora->lora_B->weight.fill_(0.5);
  }
  CHECK(max_abs_diff(gpt(idx), before) > 1e-3);  // the forward ran through the adapter
  // The typed member is the wrapped base layer.
  CHECK(gpt->block(0)->mlp->c_fc.ptr() == lora->base_layer);
  // bitsandbytes' convert_module swaps the built-in Linears of a fresh model; the forward follows.
  manual_seed(4);
  GPT plain(tiny(11, 8, 2, 2, 32));
  precision::BitsandbytesPrecision plugin("int8-training");
  plugin.convert_module(*plain);
  CHECK(std::dynamic_pointer_cast<precision::quant::Linear8bitLtImpl>(plain->block(1)->attn->c_proj.ptr()) != nullptr);
  CHECK(plain->lm_head->weight.is_same(plain->transformer->wte->weight));
  precision::Context ctx = plugin.forward_context();
  const Tensor quantized = plugin.convert_output(plain->forward(idx));
  CHECK(max_abs_diff(quantized, before) > 0.0);   // int8 products, not the float ones
  CHECK(max_abs_diff(quantized, before) < 0.05);  // but close to them
}
