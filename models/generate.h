// generate: prompts in, continuations out, with a KV cache (transformers.md §6).
//
// The prompts are left-padded to the longest, prefilled in one forward (only the last position's
// logits are computed), then each step feeds the batch's newest tokens and appends one to every
// sequence still running. A sequence stops at an end token (the model's eos_token_ids, plus the
// caller's stop_tokens; the end token is kept in its output, as transformers does) or after
// max_new_tokens; the cache is preallocated for the longest prompt plus max_new_tokens slots.
// Sampling draws from one generator seeded with `seed`, one draw per running step of the batch,
// so the same seed gives the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/causal_lm.h"
#include "models/sampling.h"

namespace weft::models {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<int64_t> stop_tokens;  // in addition to the model's eos_token_ids
  bool use_eos = true;               // false: only stop_tokens end a sequence
  DType kv_dtype = kFloat32;         // float32 or bfloat16
  // Called for every new token of every sequence as it is chosen (streaming); returning false
  // stops that sequence.
  std::function<bool(int64_t sequence, int64_t token)> on_token;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  // per prompt, the new tokens only
  int64_t prefill_tokens = 0;                // prompt tokens processed (padding excluded)
  int64_t decode_tokens = 0;                 // tokens generated after the first of each sequence
  double prefill_seconds = 0.0;              // the prompt's forward and the first token's choice
  double decode_seconds = 0.0;               // every later step
  size_t kv_cache_bytes = 0;
};

// Throws when max_new_tokens < 1, a prompt is empty, holds an id outside [0, V), or is too long for
// the model's positions together with max_new_tokens ("prompt of 1100 tokens plus 64 new ones
// exceeds the model's 1024 positions"), or the sampling or stop tokens are out of range. generate()
// runs it first; a program that prints something before generating (a CLI echoing its prompt) runs
// it before that, so that a refused request prints nothing but the error.
void check_generate_request(const CausalLMShape& shape, const std::vector<std::vector<int64_t>>& prompts,
                            const GenerateOptions& options);

// Throws as check_generate_request does, before running anything.
GenerateResult generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options);

}  // namespace weft::models
