// Tiny language models with a tied head, the shape of a GPT's, for the tests of weight tying on
// every floor (nn, io, precision, distributed, fabric):
//
//   TiedLM      ids (int64) -> wte: Embedding(V, C) -> fc: Linear(C, C) -> tanh -> head -> (*, V)
//               where head is a TiedHead holding wte's weight (the embedding owns the tensor)
//   HeadOwnedLM ids -> emb: TiedEmbedding holding head's weight -> fc -> tanh -> head: Linear(C, V)
//               (the Linear owns the tensor, so a precision plugin that swaps Linears meets the tie)
//
// V = 7 and C = 5, odd so that flat parameters do not divide by the world size. State-dict names
// of TiedLM: wte.weight, fc.weight, fc.bias, head.weight (wte.weight and head.weight one tensor).
#pragma once

#include <cstdint>

#include "nn/all.h"

namespace weft::test {

inline constexpr int64_t kVocab = 7, kWidth = 5;

// x: (*, C) -> (*, V) = x · weightᵀ, with `weight` another module's (V, C) parameter.
struct TiedHeadImpl : nn::Module {
  Tensor weight;
  explicit TiedHeadImpl(const Tensor& w) { weight = register_parameter("weight", w); }
  Tensor forward(const Tensor& x) override { return linear(x, weight); }
};
WEFT_MODULE(TiedHead);

// ids -> rows of `weight`, another module's (V, C) parameter.
struct TiedEmbeddingImpl : nn::Module {
  Tensor weight;
  explicit TiedEmbeddingImpl(const Tensor& w) { weight = register_parameter("weight", w); }
  Tensor forward(const Tensor& ids) override { return embedding(weight, ids); }
};
WEFT_MODULE(TiedEmbedding);

struct TiedLMImpl : nn::Module {
  nn::Embedding wte{nullptr};
  nn::Linear fc{nullptr};
  TiedHead head{nullptr};

  TiedLMImpl() {
    wte = register_module("wte", nn::Embedding(kVocab, kWidth));
    fc = register_module("fc", nn::Linear(kWidth, kWidth));
    head = register_module("head", TiedHead(wte->weight));
  }
  // Through the registered children (with their hooks), so a swapped layer is the one that runs.
  Tensor forward(const Tensor& ids) override {
    const auto layers = children();
    return layers[2]->call(tanh(layers[1]->call(layers[0]->call(ids))));
  }
};
WEFT_MODULE(TiedLM);

struct HeadOwnedLMImpl : nn::Module {
  nn::Linear head{nullptr};
  TiedEmbedding emb{nullptr};
  nn::Linear fc{nullptr};

  HeadOwnedLMImpl() {
    head = register_module("head", nn::Linear(kWidth, kVocab, false));
    emb = register_module("emb", TiedEmbedding(head->weight));
    fc = register_module("fc", nn::Linear(kWidth, kWidth));
  }
  Tensor forward(const Tensor& ids) override {
    const auto layers = children();
    return layers[0]->call(tanh(layers[2]->call(layers[1]->call(ids))));
  }
};
WEFT_MODULE(HeadOwnedLM);

// A TiedLM whose every parameter is drawn from `seed`.
inline TiedLM make_tied_lm(uint64_t seed) {
  manual_seed(seed);
  return TiedLM();
}

}  // namespace weft::test
