// CausalLM: what generation needs of a decoder-only language model (GPT, Llama): its sizes, and
// a forward that runs a step of new tokens against a KV cache.
#pragma once

#include <cstdint>
#include <vector>

#include "models/kv_cache.h"
#include "nn/module.h"

namespace weft::models {

struct CausalLMShape {
  int64_t vocab_size = 0;
  int64_t n_layer = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t max_positions = 0;  // the longest sequence the model's positions allow
};

class CausalLM : public nn::Module {
 public:
  virtual CausalLMShape lm_shape() const = 0;
  // ids: (B, T) integer tokens, the cache's next T slots (cache.begin_step(T) is the model's
  // to call, as is end_step) -> logits (B, T, V), or (B, 1, V) for the last slot only when
  // `last_only` (a prefill needs no more, and the head is the largest product of a small model).
  virtual Tensor forward_cached(const Tensor& ids, KVCache& cache, bool last_only = false) = 0;

  // Tokens that end a sequence (the config's eos_token_id); generation adds the user's own.
  std::vector<int64_t> eos_token_ids;
};

}  // namespace weft::models
