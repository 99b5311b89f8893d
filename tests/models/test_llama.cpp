// Llama: RMSNorm and rotary embeddings against hand-computed values, grouped-query attention
// against the same model with its key/value heads repeated, the KV-cached forward against the
// uncached one, and the configuration's errors.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "../error_message.h"
#include "models/all.h"

using namespace weft;
using namespace weft::models;

namespace {

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.vocab_size = 53;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 40;
  c.rms_norm_eps = 1e-5;
  return c;
}

Tensor ids_of(const std::vector<int64_t>& ids, int64_t batch) {
  return from_vector(ids, {batch, static_cast<int64_t>(ids.size()) / batch}, DType::Int64);
}

}  // namespace

TEST_CASE("Llama RMSNorm: x·rsqrt(mean(x²) + eps) times the weight, by hand") {
  LlamaRMSNorm norm(2, 0.0);
  norm->weight.detach().copy_(tensor({2.0, 0.5}));
  // x = (3, 4): mean(x²) = 12.5, rsqrt = 0.28284...; times the weight (2, 0.5).
  const auto y = norm(tensor({3.0, 4.0}).reshape({1, 2})).to_vector<float>();
  const double r = 1.0 / std::sqrt(12.5);
  CHECK(y[0] == doctest::Approx(2.0 * 3.0 * r).epsilon(1e-6));
  CHECK(y[1] == doctest::Approx(0.5 * 4.0 * r).epsilon(1e-6));
}

TEST_CASE("rotary frequencies: default, linear and llama3 scaling, by hand") {
  const auto plain = rope_inverse_frequencies(8, 10000.0, {});
  REQUIRE(plain.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(plain[i] == doctest::Approx(std::pow(10000.0, -2.0 * i / 8.0)).epsilon(1e-6));

  RopeScaling linear;
  linear.type = "linear";
  linear.factor = 4.0;
  const auto scaled = rope_inverse_frequencies(8, 10000.0, linear);
  for (size_t i = 0; i < 4; ++i) CHECK(scaled[i] == doctest::Approx(plain[i] / 4.0).epsilon(1e-6));

  // llama3 with an original context of 64 and factors 1 / 4: wavelengths above 64 are divided by
  // the factor (8), those below 16 kept, those between blended by (64/wavelength − 1)/(4 − 1).
  RopeScaling llama3;
  llama3.type = "llama3";
  llama3.factor = 8.0;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position_embeddings = 64;
  const auto mixed = rope_inverse_frequencies(8, 10000.0, llama3);
  for (size_t i = 0; i < 4; ++i) {
    const double wavelength = 2.0 * std::numbers::pi / plain[i];
    double want = plain[i];
    if (wavelength > 64.0) {
      want = plain[i] / 8.0;
    } else if (wavelength >= 16.0) {
      const double smooth = (64.0 / wavelength - 1.0) / 3.0;
      want = (1.0 - smooth) * plain[i] / 8.0 + smooth * plain[i];
    }
    CAPTURE(i);
    CHECK(mixed[i] == doctest::Approx(want).epsilon(1e-5));
  }
  RopeScaling bad;
  bad.type = "yarn";
  CHECK(error_of([&] { rope_inverse_frequencies(8, 10000.0, bad); }).find("rope_type 'yarn' is not supported") !=
        std::string::npos);
}

TEST_CASE("rotary embedding rotates each (x[i], x[i + d/2]) pair by position · frequency") {
  const std::vector<float> inv{1.0f, 0.25f};
  const RopeTables t = rope_tables(from_vector(std::vector<int64_t>{3}, {1, 1}, DType::Int64), inv);
  const Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).reshape({1, 1, 1, 4});
  const auto y = apply_rope(x, t).to_vector<float>();
  for (int i = 0; i < 2; ++i) {
    const double a = 3.0 * inv[static_cast<size_t>(i)];
    const double lo = i == 0 ? 1.0 : 2.0, hi = i == 0 ? 3.0 : 4.0;
    CHECK(y[static_cast<size_t>(i)] == doctest::Approx(lo * std::cos(a) - hi * std::sin(a)).epsilon(1e-6));
    CHECK(y[static_cast<size_t>(i + 2)] == doctest::Approx(hi * std::cos(a) + lo * std::sin(a)).epsilon(1e-6));
  }
}

TEST_CASE("Llama parameter names are Hugging Face's; a tied head has no weight of its own") {
  manual_seed(1);
  LlamaConfig c = tiny_config();
  LlamaForCausalLM untied(c);
  const nn::TensorDict sd = untied->state_dict();
  CHECK(sd.contains("model.embed_tokens.weight"));
  CHECK(sd.contains("model.layers.1.self_attn.k_proj.weight"));
  CHECK(sd.at("model.layers.1.self_attn.k_proj.weight").shape() == Shape{16, 32});
  CHECK(sd.contains("model.layers.0.mlp.gate_proj.weight"));
  CHECK(sd.contains("model.layers.0.post_attention_layernorm.weight"));
  CHECK(sd.contains("model.norm.weight"));
  CHECK(sd.contains("lm_head.weight"));
  CHECK_FALSE(sd.contains("model.layers.0.self_attn.q_proj.bias"));
  c.tie_word_embeddings = true;
  LlamaForCausalLM tied(c);
  CHECK_FALSE(tied->state_dict().contains("lm_head.weight"));
  const Tensor ids = ids_of({1, 2, 3}, 1);
  const Tensor by_hand = linear(tied->model->forward(ids, tensor({0.0, 1.0, 2.0}, DType::Int64).reshape({1, 3}), nullptr),
                                tied->model->embed_tokens->weight);
  CHECK(allclose(tied(ids), by_hand, 0.0, 0.0));
}

TEST_CASE("grouped-query attention equals the model whose key/value heads are repeated") {
  manual_seed(2);
  const LlamaConfig gqa_config = tiny_config();
  LlamaForCausalLM gqa(gqa_config);
  LlamaConfig full_config = gqa_config;
  full_config.num_key_value_heads = full_config.num_attention_heads;
  LlamaForCausalLM full(full_config);
  // Each key/value head's rows repeated for the two query heads that share it.
  const int64_t hd = gqa_config.resolved_head_dim(), group = 2, C = gqa_config.hidden_size;
  nn::TensorDict repeated;
  for (const auto& [key, t] : gqa->state_dict()) {
    const bool kv = key.find("k_proj") != std::string::npos || key.find("v_proj") != std::string::npos;
    repeated.insert(key, kv ? t.reshape({gqa_config.num_key_value_heads, 1, hd, C})
                                  .expand({gqa_config.num_key_value_heads, group, hd, C})
                                  .reshape({-1, C})
                            : t);
  }
  full->load_state_dict(repeated);
  const Tensor ids = ids_of({5, 9, 2, 44, 7, 1, 30, 30}, 2);
  CHECK(allclose(gqa(ids), full(ids), 1e-5, 1e-6));
}

TEST_CASE("the KV-cached forward equals the uncached one within float32 rounding, float32 and bfloat16 cache") {
  manual_seed(3);
  LlamaForCausalLM model(tiny_config());
  model->eval();
  NoGradGuard no_grad;
  const std::vector<int64_t> tokens{4, 8, 15, 16, 23, 42, 3, 1, 0, 52};
  const Tensor full = model(ids_of(tokens, 1));  // (1, 10, V)
  for (DType cache_dtype : {kFloat32, kBFloat16}) {
    CAPTURE(cache_dtype);
    KVCache cache({2, 1, 2, 8, 16}, cache_dtype);
    // A prefill of 4 tokens, a chunk of 3, then one token at a time.
    std::vector<Tensor> parts;
    parts.push_back(model->forward_cached(ids_of({4, 8, 15, 16}, 1), cache));
    parts.push_back(model->forward_cached(ids_of({23, 42, 3}, 1), cache));
    for (int64_t t : {1, 0, 52}) parts.push_back(model->forward_cached(ids_of({t}, 1), cache));
    CHECK(cache.length() == 10);
    const Tensor cached = cat(parts, 1);
    const double tol = cache_dtype == kFloat32 ? 1e-5 : 2e-2;
    CHECK(allclose(cached, full, tol, tol));
  }
  KVCache small({2, 1, 2, 8, 4});
  CHECK(error_of([&] { model->forward_cached(ids_of(tokens, 1), small); })
            .find("10 more tokens after 0 do not fit in the cache's 4 slots") != std::string::npos);
}

TEST_CASE("left-padded prompts in one batch give each prompt's own logits") {
  manual_seed(4);
  LlamaForCausalLM model(tiny_config());
  NoGradGuard no_grad;
  const Tensor alone = model(ids_of({7, 3}, 1));
  KVCache cache({2, 2, 2, 8, 8});
  cache.set_padding({0, 2});
  // Sequence 1 is [pad, pad, 7, 3]; its last logits must equal the prompt's alone.
  const Tensor batch = model->forward_cached(ids_of({11, 12, 13, 14, 0, 0, 7, 3}, 2), cache, /*last_only=*/true);
  CHECK(allclose(batch.select(0, 1).select(0, 0), alone.select(0, 0).select(0, 1), 1e-5, 1e-6));
  const Tensor next = model->forward_cached(ids_of({20, 20}, 2), cache);
  const Tensor want = model(ids_of({7, 3, 20}, 1));
  CHECK(allclose(next.select(0, 1).select(0, 0), want.select(0, 0).select(0, 2), 1e-5, 1e-6));
}

TEST_CASE("Llama config errors name the key") {
  LlamaConfig c = tiny_config();
  c.num_key_value_heads = 3;
  CHECK(error_of([&] { c.check(); }).find("num_key_value_heads (3) must divide num_attention_heads (4)") !=
        std::string::npos);
  c = tiny_config();
  c.rms_norm_eps = 0.0;
  CHECK(error_of([&] { c.check(); }).find("rms_norm_eps must be positive") != std::string::npos);
  c = tiny_config();
  c.hidden_size = 30;
  CHECK(error_of([&] { c.check(); }).find("num_attention_heads (4) must divide hidden_size (30)") != std::string::npos);
  LlamaForCausalLM model(tiny_config());
  CHECK(error_of([&] { model(ids_of(std::vector<int64_t>(41, 1), 1)); })
            .find("sequence length 41 exceeds the model's 40 positions") != std::string::npos);
}
