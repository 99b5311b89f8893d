// The logits processors and the draw, as tensor ops on (B, V) rows.
#include "models/sampling.h"

#include <cmath>
#include <limits>

#include "tensor/autograd.h"
#include "tensor/error.h"

namespace weft::models {

void SamplingOptions::check(int64_t vocab_size) const {
  if (greedy) return;
  WEFT_CHECK(std::isfinite(temperature) && temperature > 0.0, "[sampling] temperature must be a positive number, got ",
             temperature, " (use greedy decoding for temperature 0)");
  WEFT_CHECK(top_k >= 0, "[sampling] top-k must be in [1, V] (or 0 for off), got ", top_k);
  WEFT_CHECK(vocab_size == 0 || top_k <= vocab_size, "[sampling] top-k must be in [1, ", vocab_size, "], got ", top_k);
  WEFT_CHECK(top_p > 0.0 && top_p <= 1.0, "[sampling] top-p must be in (0, 1], got ", top_p);
}

Tensor process_logits(const Tensor& logits, const SamplingOptions& options) {
  WEFT_CHECK(logits.dim() == 2, "[sampling] expected logits of shape (B, V), got ", logits.shape());
  const int64_t V = logits.size(1);
  options.check(V);
  NoGradGuard no_grad;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  Tensor scores = div(logits.to(kFloat32), options.temperature);
  if (options.top_k > 0 && options.top_k < V) {
    // Everything below the k-th largest goes; ties with it stay.
    const Tensor kth = topk(scores, options.top_k, -1).values.narrow(1, options.top_k - 1, 1);
    scores = masked_fill(scores, lt(scores, kth), minus_inf);
  }
  if (options.top_p < 1.0) {
    // Ascending order: the tokens whose cumulative probability stays within 1 - p are the least
    // likely ones to remove; the most likely token (last) always stays.
    const ValuesIndices sorted = sort(scores, -1, /*descending=*/false);
    const Tensor cumulative = cumsum(softmax(sorted.values, -1), -1);
    Tensor keep_last = ones({V}, kFloat32);
    keep_last.narrow(0, V - 1, 1).fill_(0.0);
    const Tensor remove_sorted = mul(le(cumulative, 1.0 - options.top_p).to(kFloat32), keep_last);
    const Tensor remove = scatter_add(zeros_like(scores), 1, sorted.indices, remove_sorted);
    scores = masked_fill(scores, gt(remove, 0.5), minus_inf);
  }
  return scores;
}

Tensor sample_next_tokens(const Tensor& logits, const SamplingOptions& options, Generator& generator) {
  WEFT_CHECK(logits.dim() == 2, "[sampling] expected logits of shape (B, V), got ", logits.shape());
  NoGradGuard no_grad;
  if (options.greedy) return argmax(logits, 1);
  const Tensor probs = softmax(process_logits(logits, options), -1);
  return multinomial(probs, 1, /*replacement=*/false, &generator).squeeze(1);
}

}  // namespace weft::models
