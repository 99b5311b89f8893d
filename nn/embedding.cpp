// Embedding layer.
#include "nn/embedding.h"

#include "nn/init.h"
#include "tensor/ops.h"

namespace weft::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings_, int64_t embedding_dim_)
    : num_embeddings(num_embeddings_), embedding_dim(embedding_dim_) {
  WEFT_CHECK(num_embeddings >= 0 && embedding_dim >= 0, "[Embedding] sizes must be non-negative, got ",
             num_embeddings, " and ", embedding_dim);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() { init::normal_(weight); }

Tensor EmbeddingImpl::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string EmbeddingImpl::extra_repr() const { return weft::detail::cat(num_embeddings, ", ", embedding_dim); }

}  // namespace weft::nn
