// Embedding: a lookup table from integer indices to rows of `weight`.
//
// weight: (num_embeddings, embedding_dim) ~ N(0, 1), PyTorch's default. Indices of any shape give
// (*indices.shape, embedding_dim); out-of-range indices are an error of the embedding op.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_embeddings;
  int64_t embedding_dim;
  Tensor weight;
};

WEFT_MODULE(Embedding);

}  // namespace weft::nn
