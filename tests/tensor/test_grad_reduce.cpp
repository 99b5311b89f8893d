// Finite-difference gradient checks of the reductions (tensor/reduce.cpp): over all dims, one
// dim, several dims, with and without keepdim. gradcheck repeats each with non-contiguous leaves.
#include <doctest/doctest.h>

#include <limits>

#include "gradcheck.h"

using namespace weft;
using testing::arg;
using testing::arg_away_from_zero;
using testing::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

// The dim sets every reduction is checked over, for a 3-D input.
const std::vector<Shape> kDimSets = {{}, {0}, {1}, {-1}, {0, 2}, {2, 0, 1}};

}  // namespace

TEST_CASE("grad: sum and mean over dim sets, with and without keepdim") {
  for (const Shape& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      CAPTURE(dims);
      CAPTURE(keepdim);
      gradcheck([&](const Inputs& in) { return sum(in[0], dims, keepdim); }, {arg({2, 3, 4}, 1)});
      gradcheck([&](const Inputs& in) { return mean(in[0], dims, keepdim); }, {arg({2, 3, 4}, 2)});
    }
  gradcheck([](const Inputs& in) { return in[0].sum(); }, {arg({3}, 3)});
  gradcheck([](const Inputs& in) { return in[0].mean({1}, true); }, {arg({2, 3}, 4)});
  gradcheck([](const Inputs& in) { return sum(in[0]); }, {arg({}, 5)});  // a 0-d input
}

TEST_CASE("grad: amax and amin, with and without keepdim") {
  for (const Shape& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      CAPTURE(dims);
      CAPTURE(keepdim);
      gradcheck([&](const Inputs& in) { return amax(in[0], dims, keepdim); }, {arg({2, 3, 4}, 6)});
      gradcheck([&](const Inputs& in) { return amin(in[0], dims, keepdim); }, {arg({2, 3, 4}, 7)});
    }
  gradcheck([](const Inputs& in) { return in[0].max(); }, {arg({2, 3}, 8)});
  gradcheck([](const Inputs& in) { return in[0].min(); }, {arg({2, 3}, 9)});
}

TEST_CASE("grad: amax shares a tie's gradient evenly") {
  Tensor x = tensor({1.0, 3.0, 3.0, 2.0}, kFloat64).requires_grad_();
  amax(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.0, 0.5, 0.5, 0.0});
}

TEST_CASE("grad: max(dim) and min(dim) send the gradient to the chosen element") {
  for (int64_t dim : {0, 1, 2, -1})
    for (bool keepdim : {false, true}) {
      CAPTURE(dim);
      CAPTURE(keepdim);
      // Both outputs: the indices are not differentiable and the checker skips them.
      gradcheck([&](const Inputs& in) {
        auto r = max(in[0], dim, keepdim);
        return std::vector<Tensor>{r.values, r.indices};
      }, {arg({2, 3, 4}, 10)});
      gradcheck([&](const Inputs& in) { return min(in[0], dim, keepdim).values; }, {arg({2, 3, 4}, 11)});
    }
  gradcheck([](const Inputs& in) { return max(in[0], 0).values; }, {arg({5}, 12)});
}

TEST_CASE("grad: var and std with each correction") {
  for (const Shape& dims : kDimSets)
    for (int64_t correction : {0, 1}) {
      CAPTURE(dims);
      CAPTURE(correction);
      gradcheck([&](const Inputs& in) { return var(in[0], dims, correction); }, {arg({2, 3, 4}, 13)});
      gradcheck([&](const Inputs& in) { return weft::std(in[0], dims, correction, true); }, {arg({2, 3, 4}, 14)});
    }
}

TEST_CASE("grad: norm for p = 1, 2, 3 and infinity") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double p : {1.0, 2.0, 3.0, inf})
    for (const Shape& dims : {Shape{}, Shape{1}, Shape{0, 2}})
      for (bool keepdim : {false, true}) {
        CAPTURE(p);
        CAPTURE(dims);
        CAPTURE(keepdim);
        // Away from zero: |x| is not differentiable there.
        gradcheck([&](const Inputs& in) { return norm(in[0], p, dims, keepdim); }, {arg_away_from_zero({2, 3, 4}, 15)});
      }
}

TEST_CASE("grad: the 2-norm of a zero vector has a zero (sub)gradient") {
  Tensor x = zeros({3}, kFloat64).requires_grad_();
  norm(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.0, 0.0, 0.0});
}

TEST_CASE("grad: logsumexp, including large values that need the max shift") {
  for (const Shape& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      CAPTURE(dims);
      CAPTURE(keepdim);
      gradcheck([&](const Inputs& in) { return logsumexp(in[0], dims, keepdim); }, {arg({2, 3, 4}, 16, -3, 3)});
    }
  gradcheck([](const Inputs& in) { return logsumexp(in[0], {1}); }, {arg({2, 3}, 17, 700, 710)},
            testing::GradcheckOptions{.rtol = 1e-5});
}

TEST_CASE("grad: reductions of a broadcast operand sum back to its shape") {
  gradcheck([](const Inputs& in) { return sum(mul(in[0], in[1]), {1}); }, {arg({3, 1}, 18), arg({4}, 19)});
  gradcheck([](const Inputs& in) { return amax(add(in[0], in[1]), {0}); }, {arg({3, 1}, 20), arg({1, 4}, 21)});
  gradcheck([](const Inputs& in) { return var(sub(in[0], in[1]), {0, 1}); }, {arg({2, 1, 3}, 22), arg({2, 3}, 23)});
}

TEST_CASE("grad: sum_to, the adjoint of broadcasting") {
  gradcheck([](const Inputs& in) { return sum_to(in[0], {3, 1}); }, {arg({2, 3, 4}, 24)});
  gradcheck([](const Inputs& in) { return sum_to(in[0], {1, 4}); }, {arg({3, 4}, 25)});
  gradcheck([](const Inputs& in) { return sum_to(in[0], {}); }, {arg({2, 2}, 26)});
}
