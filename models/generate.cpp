// generate: left-pad, prefill, then one token per step for every running sequence.
#include "models/generate.h"

#include <algorithm>
#include <chrono>

#include "tensor/autograd.h"
#include "tensor/error.h"

namespace weft::models {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The device of the model's weights: its cache and each step's ids go there, and each step's
// logits come back to the CPU, where the tokens are chosen (one row of V floats per sequence, so
// the choice is the CPU's generator's on every device and a seed means the same on each).
Device device_of(const nn::Module& model) {
  const std::vector<Tensor> parameters = model.parameters();
  return parameters.empty() ? Device(kCPU) : parameters.front().device();
}

}  // namespace

void check_generate_request(const CausalLMShape& shape, const std::vector<std::vector<int64_t>>& prompts,
                            const GenerateOptions& options) {
  WEFT_CHECK(!prompts.empty(), "[generate] expected at least one prompt");
  WEFT_CHECK(options.max_new_tokens >= 1, "[generate] max_new_tokens must be at least 1, got ", options.max_new_tokens);
  WEFT_CHECK(options.kv_dtype == kFloat32 || options.kv_dtype == kBFloat16,
             "[generate] the KV cache is float32 or bfloat16, got ", options.kv_dtype);
  options.sampling.check(shape.vocab_size);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& prompt = prompts[p];
    WEFT_CHECK(!prompt.empty(), "[generate] prompt ", p, " is empty: generation starts from at least one token");
    for (int64_t id : prompt)
      WEFT_CHECK(id >= 0 && id < shape.vocab_size, "[generate] prompt ", p, " holds token id ", id,
                 ", outside the vocabulary [0, ", shape.vocab_size, ")");
    const int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
    WEFT_CHECK(needed <= shape.max_positions, "[generate] prompt ", p, " of ", prompt.size(), " tokens plus ",
               options.max_new_tokens, " new ones exceeds the model's ", shape.max_positions, " positions");
  }
  for (int64_t id : options.stop_tokens)
    WEFT_CHECK(id >= 0 && id < shape.vocab_size, "[generate] stop token ", id, " is outside the vocabulary [0, ",
               shape.vocab_size, ")");
}

GenerateResult generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options) {
  const CausalLMShape shape = model.lm_shape();
  check_generate_request(shape, prompts, options);
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();

  const int64_t B = static_cast<int64_t>(prompts.size());
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  std::vector<int64_t> stop = options.stop_tokens;
  if (options.use_eos) stop.insert(stop.end(), model.eos_token_ids.begin(), model.eos_token_ids.end());

  const Device device = device_of(model);
  KVCache cache({shape.n_layer, B, shape.n_kv_head, shape.head_dim, longest + options.max_new_tokens}, options.kv_dtype,
                device);
  std::vector<int64_t> padding(static_cast<size_t>(B));
  std::vector<int64_t> ids(static_cast<size_t>(B * longest), 0);
  GenerateResult result;
  result.tokens.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<size_t>(b)];
    padding[static_cast<size_t>(b)] = longest - static_cast<int64_t>(p.size());
    std::copy(p.begin(), p.end(), ids.begin() + b * longest + padding[static_cast<size_t>(b)]);
    result.prefill_tokens += static_cast<int64_t>(p.size());
  }
  cache.set_padding(padding);
  result.kv_cache_bytes = cache.nbytes();

  Generator generator(options.seed);
  std::vector<bool> running(static_cast<size_t>(B), true);
  // Appends each running sequence's choice; returns whether any still runs.
  auto take = [&](const Tensor& next) {
    const std::vector<int64_t> chosen = next.to_vector<int64_t>();
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      if (!running[static_cast<size_t>(b)]) continue;
      const int64_t token = chosen[static_cast<size_t>(b)];
      auto& out = result.tokens[static_cast<size_t>(b)];
      out.push_back(token);
      bool go_on = static_cast<int64_t>(out.size()) < options.max_new_tokens &&
                   std::find(stop.begin(), stop.end(), token) == stop.end();
      if (options.on_token && !options.on_token(b, token)) go_on = false;
      running[static_cast<size_t>(b)] = go_on;
      any = any || go_on;
    }
    return any;
  };

  auto start = std::chrono::steady_clock::now();
  Tensor logits = model.forward_cached(from_vector(ids, {B, longest}, DType::Int64).to(device), cache,
                                       /*last_only=*/true);
  Tensor next = sample_next_tokens(logits.select(1, logits.size(1) - 1).to(kCPU), options.sampling, generator);
  bool any = take(next);
  result.prefill_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  while (any) {
    // A finished sequence keeps being fed its last token (its row is computed and ignored), so
    // the batch stays one rectangular step.
    logits = model.forward_cached(next.unsqueeze(1).to(device), cache, /*last_only=*/true);
    next = sample_next_tokens(logits.select(1, 0).to(kCPU), options.sampling, generator);
    for (int64_t b = 0; b < B; ++b)
      if (running[static_cast<size_t>(b)]) ++result.decode_tokens;
    any = take(next);
  }
  result.decode_seconds = seconds_since(start);
  model.train(was_training);
  return result;
}

}  // namespace weft::models
