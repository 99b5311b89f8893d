// Choosing the next token from a step's logits, with the logits processors of Hugging Face's
// generate in their order (transformers.md §6): temperature (divide), top-k (keep the k largest;
// ties with the k-th are kept), top-p (keep the smallest set of the most likely tokens whose
// probability reaches p, at least one), then softmax and one multinomial draw from a seeded
// generator. Greedy takes the argmax and draws nothing.
#pragma once

#include <cstdint>

#include "tensor/generator.h"
#include "tensor/ops.h"

namespace weft::models {

struct SamplingOptions {
  bool greedy = true;
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: off; else in [1, V]
  double top_p = 1.0;        // in (0, 1]; 1: off

  // Throws naming the option: temperature <= 0 or not finite, top-k outside [1, V] (0 is off),
  // top-p outside (0, 1]. `vocab_size` 0 skips the top-k bound.
  void check(int64_t vocab_size = 0) const;
};

// logits: (B, V) -> next tokens (B) int64.
Tensor sample_next_tokens(const Tensor& logits, const SamplingOptions& options, Generator& generator);

// The processed logits before the draw: temperature, top-k and top-p applied, removed tokens at
// -inf. (B, V) float32. Exposed for tests.
Tensor process_logits(const Tensor& logits, const SamplingOptions& options);

}  // namespace weft::models
