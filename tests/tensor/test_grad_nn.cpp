// Finite-difference gradient checks of tensor/nn_functional.cpp: softmax and log_softmax over
// every dim, the losses with each reduction and option, embedding, layer_norm and dropout (its
// mask fixed by re-seeding the Generator for every evaluation). gradcheck repeats each with
// non-contiguous leaves.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace weft;
using testing::arg;
using testing::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

const Reduction kReductions[] = {Reduction::Mean, Reduction::Sum, Reduction::None};

}  // namespace

TEST_CASE("grad: softmax and log_softmax over each dim") {
  for (int64_t dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    gradcheck([dim](const Inputs& in) { return softmax(in[0], dim); }, {arg({2, 3, 4}, 1, -2, 2)});
    gradcheck([dim](const Inputs& in) { return log_softmax(in[0], dim); }, {arg({2, 3, 4}, 2, -2, 2)});
  }
  gradcheck([](const Inputs& in) { return in[0].softmax(0); }, {arg({4}, 3)});
  gradcheck([](const Inputs& in) { return in[0].log_softmax(-1); }, {arg({3, 2}, 4)});
}

TEST_CASE("grad: softmax of a 0-d tensor is constant") {
  gradcheck([](const Inputs& in) { return add(softmax(in[0], 0), log_softmax(in[0], 0)); }, {arg({}, 5)});
}

TEST_CASE("grad: cross_entropy with each reduction") {
  const Tensor target = tensor({2, 0, 1}, kInt64);
  for (Reduction r : kReductions) {
    CAPTURE(static_cast<int>(r));
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target, r); }, {arg({3, 4}, 6, -2, 2)});
  }
}

TEST_CASE("grad: cross_entropy with label smoothing, ignore_index and class weights") {
  const Tensor target = tensor({2, 0, 3, 1}, kInt64);
  const Tensor ignored = tensor({2, -100, 3, 1}, kInt64);
  const Tensor custom_ignored = tensor({2, 0, 3, 0}, kInt64);
  const Tensor weight = tensor({0.5, 2.0, 1.0, 1.5}, kFloat64);
  for (Reduction r : kReductions) {
    CAPTURE(static_cast<int>(r));
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target, r, -100, 0.1); }, {arg({4, 4}, 7, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], ignored, r); }, {arg({4, 4}, 8, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], custom_ignored, r, 0); }, {arg({4, 4}, 9, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target, r, -100, 0.0, weight); },
              {arg({4, 4}, 10, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], ignored, r, -100, 0.2, weight); },
              {arg({4, 4}, 11, -2, 2)});
  }
}

TEST_CASE("grad: cross_entropy over (N, C, d) inputs and a (C) input") {
  const Tensor target = tensor({0, 2, 1, 1, 0, 2}, kInt64).view({2, 3});
  const Tensor target_2d = tensor({0, 2, 1, 1, 0, 2, 2, 1}, kInt64).view({2, 2, 2});
  const Tensor weight = tensor({0.5, 2.0, 1.0}, kFloat64);
  for (Reduction r : kReductions) {
    CAPTURE(static_cast<int>(r));
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target, r); }, {arg({2, 3, 3}, 12, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target, r, 1, 0.1, weight); },
              {arg({2, 3, 3}, 13, -2, 2)});
    gradcheck([&](const Inputs& in) { return cross_entropy(in[0], target_2d, r); }, {arg({2, 3, 2, 2}, 14, -2, 2)});
  }
  gradcheck([](const Inputs& in) { return cross_entropy(in[0], scalar_tensor(1, kInt64)); }, {arg({3}, 15)});
}

TEST_CASE("grad: nll_loss with each reduction, ignore_index and weights") {
  const Tensor target = tensor({1, -100, 0, 2}, kInt64);
  const Tensor weight = tensor({0.5, 2.0, 1.5}, kFloat64);
  for (Reduction r : kReductions) {
    CAPTURE(static_cast<int>(r));
    gradcheck([&](const Inputs& in) { return nll_loss(in[0], target, r); }, {arg({4, 3}, 16)});
    gradcheck([&](const Inputs& in) { return nll_loss(in[0], target, r, -100, weight); }, {arg({4, 3}, 17)});
    gradcheck([&](const Inputs& in) { return nll_loss(log_softmax(in[0], 1), tensor({2, 0}, kInt32), r); },
              {arg({2, 3}, 18)});
  }
  const Tensor target_nd = tensor({0, 2, 1, 1, 0, 2}, kInt64).view({2, 3});
  gradcheck([&](const Inputs& in) { return nll_loss(in[0], target_nd, Reduction::Mean, 2, weight); },
            {arg({2, 3, 3}, 19)});
}

TEST_CASE("grad: mse_loss with each reduction, for input and target") {
  for (Reduction r : kReductions) {
    CAPTURE(static_cast<int>(r));
    gradcheck([r](const Inputs& in) { return mse_loss(in[0], in[1], r); }, {arg({2, 3}, 20), arg({2, 3}, 21)});
    gradcheck([r](const Inputs& in) { return mse_loss(in[0], in[1], r); },
              {arg({4}, 22), testing::uniform({4}, -1, 1, 23)});
  }
}

TEST_CASE("grad: embedding with repeated indices") {
  const Tensor indices = tensor({1, 3, 1, 0, 1, 3}, kInt64).view({2, 3});
  gradcheck([&](const Inputs& in) { return embedding(in[0], indices); }, {arg({5, 2}, 24)});
  gradcheck([](const Inputs& in) { return embedding(in[0], tensor({2, 2}, kInt32)); }, {arg({3, 4}, 25)});
  // A row used three times gets three gradients; an unused row gets zeros.
  Tensor w = testing::uniform({4, 2}, -1, 1, 26).requires_grad_();
  embedding(w, indices).sum().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 1, 3, 3, 0, 0, 2, 2});
}

TEST_CASE("grad: layer_norm with and without weight and bias") {
  gradcheck([](const Inputs& in) { return layer_norm(in[0], {4}); }, {arg({3, 4}, 27)});
  gradcheck([](const Inputs& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
            {arg({3, 4}, 28), arg({4}, 29), arg({4}, 30)});
  gradcheck([](const Inputs& in) { return layer_norm(in[0], {3, 2}, in[1], in[2]); },
            {arg({2, 3, 2}, 31), arg({3, 2}, 32), arg({3, 2}, 33)});
  gradcheck([](const Inputs& in) { return layer_norm(in[0], {3}, in[1]); }, {arg({2, 2, 3}, 34), arg({3}, 35)});
  gradcheck([](const Inputs& in) { return layer_norm(in[0], {3}, Tensor(), in[1], 0.1); },
            {arg({2, 3}, 36), arg({3}, 37)});
}

TEST_CASE("grad: dropout in training mode with a fixed mask") {
  for (double p : {0.3, 0.5}) {
    CAPTURE(p);
    gradcheck([p](const Inputs& in) {
      Generator gen(42);  // the same mask on every evaluation
      return dropout(in[0], p, /*training=*/true, &gen);
    }, {arg({4, 5}, 38)});
  }
  // The mask really drops something, and the kept elements are scaled by 1/(1-p).
  Tensor x = ones({4, 5}, kFloat64).requires_grad_();
  Generator gen(42);
  dropout(x, 0.5, true, &gen).sum().backward();
  const auto g = x.grad().to_vector<double>();
  int kept = 0;
  for (double v : g) {
    CHECK((v == 0.0 || v == 2.0));
    kept += v == 2.0;
  }
  CHECK(kept > 0);
  CHECK(kept < 20);
  gradcheck([](const Inputs& in) { return dropout(in[0], 1.0, true); }, {arg({3}, 39)});
  gradcheck([](const Inputs& in) { return add(dropout(in[0], 0.5, /*training=*/false), 0.0); }, {arg({3}, 40)});
}
