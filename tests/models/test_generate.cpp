// Generation: the logits processors on hand-made rows, greedy decoding with the KV cache against
// an argmax loop over the uncached model, batches of prompts against each prompt alone, stop
// tokens, streaming, seeds, the errors that come before anything runs, and (with a GPU) the same
// generation with the model on the device.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "../cuda_test_helpers.h"
#include "../error_message.h"
#include "models/all.h"

using namespace weft;
using namespace weft::models;

namespace {

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.vocab_size = 61;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 48;
  return c;
}

// A two-layer GPT of the given sizes.
GPTConfig two_layer_gpt(int64_t vocab_size, int64_t block_size, int64_t n_head, int64_t n_embd) {
  GPTConfig c;
  c.vocab_size = vocab_size;
  c.block_size = block_size;
  c.n_layer = 2;
  c.n_head = n_head;
  c.n_embd = n_embd;
  return c;
}

// Greedy continuation by recomputing the whole sequence each step, no cache.
std::vector<int64_t> greedy_uncached(LlamaForCausalLMImpl& model, std::vector<int64_t> ids, int64_t steps) {
  NoGradGuard no_grad;
  std::vector<int64_t> out;
  for (int64_t s = 0; s < steps; ++s) {
    const Tensor logits = model.forward(from_vector(ids, {1, static_cast<int64_t>(ids.size())}, DType::Int64));
    const int64_t next = argmax(logits.select(0, 0).select(0, logits.size(1) - 1)).item<int64_t>();
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("logits processors: temperature divides, top-k keeps ties with the k-th, top-p keeps the likeliest mass") {
  SamplingOptions o;
  o.greedy = false;
  o.temperature = 2.0;
  CHECK(process_logits(tensor({1.0, 4.0}).reshape({1, 2}), o).to_vector<float>() == std::vector<float>{0.5f, 2.0f});

  o.temperature = 1.0;
  o.top_k = 2;
  const auto k = process_logits(tensor({1.0, 3.0, 2.0, 2.0}).reshape({1, 4}), o).to_vector<float>();
  CHECK(k == std::vector<float>{static_cast<float>(-kInf), 3.0f, 2.0f, 2.0f});

  // Probabilities 0.5, 0.3, 0.15, 0.05: top-p 0.7 keeps 0.5 and 0.3 (0.05 + 0.15 <= 0.3 go);
  // top-p 0.9 drops only 0.05; a tiny top-p still keeps the likeliest token.
  o.top_k = 0;
  const Tensor row = log(tensor({0.5, 0.3, 0.15, 0.05})).reshape({1, 4});
  auto kept = [&](double p) {
    o.top_p = p;
    std::vector<bool> out;
    for (float v : process_logits(row, o).to_vector<float>()) out.push_back(std::isfinite(v));
    return out;
  };
  CHECK(kept(0.7) == std::vector<bool>{true, true, false, false});
  CHECK(kept(0.9) == std::vector<bool>{true, true, true, false});
  CHECK(kept(1e-6) == std::vector<bool>{true, false, false, false});
}

TEST_CASE("sampling draws by the processed probabilities from a seeded generator") {
  SamplingOptions o;
  o.greedy = false;
  const Tensor logits = log(tensor({0.1, 0.6, 0.3})).reshape({1, 3}).expand({4000, 3});
  Generator g(7);
  const auto draws = sample_next_tokens(logits, o, g).to_vector<int64_t>();
  std::vector<double> freq(3, 0.0);
  for (int64_t d : draws) freq[static_cast<size_t>(d)] += 1.0 / 4000.0;
  // Each frequency within 4 standard deviations of its probability.
  for (size_t i = 0; i < 3; ++i) {
    const double p = std::vector<double>{0.1, 0.6, 0.3}[i];
    CHECK(std::abs(freq[i] - p) < 4.0 * std::sqrt(p * (1 - p) / 4000.0));
  }
  Generator again(7);
  CHECK(sample_next_tokens(logits, o, again).to_vector<int64_t>() == draws);
  o.top_k = 1;
  CHECK(sum(eq(sample_next_tokens(logits, o, g), 1.0)).item<int64_t>() == 4000);
}

TEST_CASE("sampling options are checked, naming the option") {
  SamplingOptions o;
  o.greedy = false;
  o.temperature = 0.0;
  CHECK(error_of([&] { o.check(10); }).find("temperature must be a positive number, got 0") != std::string::npos);
  o.temperature = 1.0;
  o.top_k = 11;
  CHECK(error_of([&] { o.check(10); }).find("top-k must be in [1, 10], got 11") != std::string::npos);
  o.top_k = -1;
  CHECK(error_of([&] { o.check(10); }).find("top-k must be in [1, V]") != std::string::npos);
  o.top_k = 0;
  for (double p : {0.0, 1.5, std::nan("")}) {
    o.top_p = p;
    CHECK(error_of([&] { o.check(10); }).find("top-p must be in (0, 1]") != std::string::npos);
  }
}

TEST_CASE("greedy generation with the KV cache equals an argmax loop over the uncached model") {
  manual_seed(11);
  LlamaForCausalLM model(tiny_config());
  GenerateOptions o;
  o.max_new_tokens = 12;
  const std::vector<int64_t> prompt{3, 14, 15, 9, 26};
  const GenerateResult r = models::generate(*model, {prompt}, o);
  CHECK(r.tokens[0] == greedy_uncached(*model, prompt, 12));
  CHECK(r.prefill_tokens == 5);
  CHECK(r.decode_tokens == 11);
  CHECK(r.kv_cache_bytes == 2 * 2 * 1 * 8 * 17 * sizeof(float));
}

TEST_CASE("bfloat16 generation with the linears' weights packed once gives the tokens and logits without") {
  manual_seed(13);
  GPT model(two_layer_gpt(97, 64, 2, 64));
  model->to(kBFloat16);
  model->requires_grad_(false);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.kv_dtype = kBFloat16;
  const std::vector<int64_t> prompt{5, 17, 33, 2, 90, 41, 8, 64, 12, 7, 3, 55};
  const GenerateResult plain = models::generate(*model, {prompt}, o);
  const Tensor ids = from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}, DType::Int64);
  NoGradGuard no_grad;
  const Tensor logits = model->forward(ids);
  set_packed_weight_limit(int64_t{1} << 30);
  const GenerateResult packed = models::generate(*model, {prompt}, o);
  const Tensor packed_logits = model->forward(ids);
  // Packed where the CPU has bfloat16 K-pair kernels: the block's four linears per layer.
  CHECK((packed_weight_bytes() > 0) == (cpu_isa() >= CpuIsa::Avx512Bf16));
  set_packed_weight_limit(0);
  CHECK(packed.tokens == plain.tokens);
  CHECK(sub(packed_logits.to(kFloat64), logits.to(kFloat64)).abs().max().item<double>() == 0.0);
}

TEST_CASE("a batch of prompts of different lengths gives each prompt's own continuation") {
  manual_seed(12);
  LlamaForCausalLM model(tiny_config());
  GenerateOptions o;
  o.max_new_tokens = 6;
  const std::vector<std::vector<int64_t>> prompts{{1, 2, 3, 4, 5, 6}, {40}, {7, 7, 8}};
  const GenerateResult batch = models::generate(*model, prompts, o);
  for (size_t p = 0; p < prompts.size(); ++p) {
    CAPTURE(p);
    CHECK(batch.tokens[p] == models::generate(*model, {prompts[p]}, o).tokens[0]);
  }
  o.kv_dtype = kBFloat16;  // rounds keys and values; a tiny random model's argmax rarely moves
  CHECK(models::generate(*model, {prompts[0]}, o).tokens[0].size() == 6);
}

TEST_CASE("stop tokens end a sequence (kept in its output); the callback streams and can stop") {
  manual_seed(13);
  LlamaForCausalLM model(tiny_config());
  GenerateOptions o;
  o.max_new_tokens = 8;
  const std::vector<int64_t> prompt{5, 6, 7};
  const auto free_run = models::generate(*model, {prompt}, o).tokens[0];
  REQUIRE(free_run.size() == 8);
  o.stop_tokens = {free_run[2]};
  const auto stopped = models::generate(*model, {prompt}, o).tokens[0];
  const auto first = std::find(free_run.begin(), free_run.end(), free_run[2]);
  CHECK(stopped == std::vector<int64_t>(free_run.begin(), first + 1));
  model->eos_token_ids = {free_run[0]};
  CHECK(models::generate(*model, {prompt}, o).tokens[0] == std::vector<int64_t>{free_run[0]});
  o.use_eos = false;
  o.stop_tokens.clear();
  std::vector<int64_t> streamed;
  o.on_token = [&](int64_t sequence, int64_t token) {
    CHECK(sequence == 0);
    streamed.push_back(token);
    return streamed.size() < 5;
  };
  const auto cut = models::generate(*model, {prompt}, o).tokens[0];
  CHECK(streamed == cut);
  CHECK(cut == std::vector<int64_t>(free_run.begin(), free_run.begin() + 5));
}

TEST_CASE("sampled generation: the same seed gives the same tokens") {
  manual_seed(14);
  LlamaForCausalLM model(tiny_config());
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.sampling.greedy = false;
  o.sampling.temperature = 1.5;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.95;
  o.seed = 99;
  const auto a = models::generate(*model, {{1, 2}}, o).tokens[0];
  CHECK(models::generate(*model, {{1, 2}}, o).tokens[0] == a);
  o.seed = 100;
  CHECK(models::generate(*model, {{1, 2}}, o).tokens[0] != a);
}

TEST_CASE("generate refuses bad prompts and options before running") {
  LlamaForCausalLM model(tiny_config());
  GenerateOptions o;
  o.max_new_tokens = 10;
  CHECK(error_of([&] { models::generate(*model, {{}}, o); }).find("prompt 0 is empty") != std::string::npos);
  CHECK(error_of([&] { models::generate(*model, {{1, 61}}, o); }).find("holds token id 61, outside the vocabulary [0, 61)") !=
        std::string::npos);
  CHECK(error_of([&] { models::generate(*model, {std::vector<int64_t>(40, 1)}, o); })
            .find("prompt 0 of 40 tokens plus 10 new ones exceeds the model's 48 positions") != std::string::npos);
  o.sampling.greedy = false;
  o.sampling.temperature = -1.0;
  CHECK(error_of([&] { models::generate(*model, {{1}}, o); }).find("temperature must be a positive number") !=
        std::string::npos);
  // The same checks without running anything, for a program that prints before it generates.
  CHECK(error_of([&] { check_generate_request(model->lm_shape(), {{1}}, o); }).find("temperature must be a positive number") !=
        std::string::npos);
  o.sampling.greedy = true;
  CHECK_NOTHROW(check_generate_request(model->lm_shape(), {{1}}, o));
}

TEST_CASE("generation with the model on cuda gives the cpu's tokens: a batch, greedy and sampled" *
          doctest::skip(test::kNoGpu)) {
  manual_seed(15);
  LlamaForCausalLM llama(tiny_config());
  GPT gpt(two_layer_gpt(61, 48, 4, 32));
  const std::vector<std::vector<int64_t>> prompts{{1, 2, 3, 4, 5, 6}, {40}, {7, 7, 8}};
  for (CausalLM* model : {static_cast<CausalLM*>(llama.get()), static_cast<CausalLM*>(gpt.get())}) {
    GenerateOptions o;
    o.max_new_tokens = 8;
    o.use_eos = false;
    const GenerateResult greedy_cpu = models::generate(*model, prompts, o);
    o.sampling.greedy = false;
    o.seed = 3;
    const GenerateResult sampled_cpu = models::generate(*model, prompts, o);
    model->to(test::kGpu);
    // The tokens are chosen on the CPU from the device's logits, so a seed draws the same tokens.
    const GenerateResult sampled_gpu = models::generate(*model, prompts, o);
    o.sampling.greedy = true;
    const GenerateResult greedy_gpu = models::generate(*model, prompts, o);
    CHECK(greedy_gpu.tokens == greedy_cpu.tokens);
    CHECK(sampled_gpu.tokens == sampled_cpu.tokens);
    CHECK(greedy_gpu.kv_cache_bytes == greedy_cpu.kv_cache_bytes);
    for (const Tensor& p : model->parameters()) CHECK(p.device() == test::kGpu);
  }
}
