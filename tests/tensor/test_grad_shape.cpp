// Finite-difference gradient checks of the view methods of Tensor, copies (clone, contiguous,
// to), and the joining and indexing ops of tensor/shape_ops.cpp. gradcheck repeats each with
// non-contiguous leaves, which also exercises views of views.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace weft;
using testing::arg;
using testing::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

Tensor int64s(std::initializer_list<double> values) { return tensor(values, kInt64); }

}  // namespace

TEST_CASE("grad: view, reshape and flatten") {
  // view needs strides it can reinterpret, so these leaves stay contiguous; the sliced view
  // below is non-contiguous but compatible.
  const testing::GradcheckOptions contiguous_only{.check_noncontiguous = false};
  gradcheck([](const Inputs& in) { return in[0].view({3, 2}); }, {arg({2, 3}, 1)}, contiguous_only);
  gradcheck([](const Inputs& in) { return in[0].view({-1}); }, {arg({2, 3}, 2)}, contiguous_only);
  gradcheck([](const Inputs& in) { return in[0].slice(0, 0, 4, 2).view({2, 1, 3}); }, {arg({4, 3}, 2)},
            contiguous_only);
  CHECK_THROWS_WITH_AS(testing::arg({2, 3}, 1).t().view({6}), doctest::Contains("use reshape()"), Error);
  gradcheck([](const Inputs& in) { return in[0].reshape({4, -1}); }, {arg({2, 3, 2}, 3)});
  // reshape of a transposed view must copy; the gradient still lands in place.
  gradcheck([](const Inputs& in) { return in[0].t().reshape({6}); }, {arg({2, 3}, 4)});
  gradcheck([](const Inputs& in) { return in[0].flatten(); }, {arg({2, 3, 2}, 5)});
  gradcheck([](const Inputs& in) { return in[0].flatten(1); }, {arg({2, 3, 2}, 6)});
  gradcheck([](const Inputs& in) { return in[0].flatten(0, 1); }, {arg({2, 3, 2}, 7)});
}

TEST_CASE("grad: transpose and permute") {
  gradcheck([](const Inputs& in) { return in[0].transpose(0, 2); }, {arg({2, 3, 4}, 8)});
  gradcheck([](const Inputs& in) { return in[0].transpose(-1, -2); }, {arg({2, 3, 4}, 9)});
  gradcheck([](const Inputs& in) { return in[0].t(); }, {arg({2, 3}, 10)});
  gradcheck([](const Inputs& in) { return in[0].permute({2, 0, 1}); }, {arg({2, 3, 4}, 11)});
  gradcheck([](const Inputs& in) { return in[0].permute({1, 2, 0}).permute({1, 0, 2}); }, {arg({2, 3, 4}, 12)});
}

TEST_CASE("grad: narrow, slice with a step, select") {
  gradcheck([](const Inputs& in) { return in[0].narrow(1, 1, 2); }, {arg({2, 4}, 13)});
  gradcheck([](const Inputs& in) { return in[0].narrow(0, -2, 1); }, {arg({3, 2}, 14)});
  gradcheck([](const Inputs& in) { return in[0].slice(1, 0, 5, 2); }, {arg({2, 5}, 15)});
  gradcheck([](const Inputs& in) { return in[0].slice(0, 1, 5, 3); }, {arg({5, 2}, 16)});
  gradcheck([](const Inputs& in) { return in[0].slice(-1, -3, 100); }, {arg({2, 4}, 17)});
  gradcheck([](const Inputs& in) { return in[0].select(1, 2); }, {arg({2, 3, 2}, 18)});
  gradcheck([](const Inputs& in) { return in[0].select(0, -1); }, {arg({3, 2}, 19)});
  gradcheck([](const Inputs& in) { return in[0][1]; }, {arg({3, 2}, 20)});
  // Overlapping views of one leaf: the gradients of both regions add up.
  gradcheck([](const Inputs& in) { return add(in[0].narrow(0, 0, 3), in[0].slice(0, 1, 4)); }, {arg({4, 2}, 21)});
}

TEST_CASE("grad: unsqueeze, squeeze and expand") {
  gradcheck([](const Inputs& in) { return in[0].unsqueeze(0); }, {arg({2, 3}, 22)});
  gradcheck([](const Inputs& in) { return in[0].unsqueeze(-1); }, {arg({2, 3}, 23)});
  gradcheck([](const Inputs& in) { return in[0].unsqueeze(1); }, {arg({2, 3}, 24)});
  gradcheck([](const Inputs& in) { return in[0].squeeze(); }, {arg({2, 1, 3, 1}, 25)});
  gradcheck([](const Inputs& in) { return in[0].squeeze(1); }, {arg({2, 1, 3}, 26)});
  gradcheck([](const Inputs& in) { return in[0].expand({2, 3}); }, {arg({1, 3}, 27)});
  gradcheck([](const Inputs& in) { return in[0].expand({4, 2, -1}); }, {arg({2, 1}, 28)});
  gradcheck([](const Inputs& in) { return in[0].expand({3, 2}); }, {arg({}, 29)});
}

TEST_CASE("grad: clone, contiguous and a dtype round trip are identities") {
  gradcheck([](const Inputs& in) { return in[0].clone(); }, {arg({2, 3}, 30)});
  gradcheck([](const Inputs& in) { return in[0].t().contiguous(); }, {arg({2, 3}, 31)});
  gradcheck([](const Inputs& in) { return in[0].contiguous(); }, {arg({2, 3}, 32)});
  // Through float32 the values round, so the check is exact rather than finite-difference:
  // each cast's backward casts the gradient back, and float32-representable values survive.
  Tensor x = testing::uniform({2, 3}, -1, 1, 33).requires_grad_();
  Tensor y = x.to(kFloat32).to(kFloat64);
  CHECK(y.grad_fn()->name() == "ToBackward");
  const Tensor seed = arange(6, kFloat64).view({2, 3});
  y.backward(seed);
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(equal(x.grad(), seed));
  CHECK(equal(y, x.to(kFloat32).to(kFloat64)));
}

TEST_CASE("grad: cat and stack, along each dim") {
  for (int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    gradcheck([dim](const Inputs& in) { return cat({in[0], in[1], in[2]}, dim); },
              {arg({2, 3}, 34), arg({2, 3}, 35), arg({2, 3}, 36)});
    gradcheck([dim](const Inputs& in) { return stack({in[0], in[1]}, dim); }, {arg({2, 3}, 37), arg({2, 3}, 38)});
  }
  gradcheck([](const Inputs& in) { return cat({in[0], in[1]}, 1); }, {arg({2, 1}, 39), arg({2, 3}, 40)});
  gradcheck([](const Inputs& in) { return stack({in[0], in[1]}, 2); }, {arg({2, 3}, 41), arg({2, 3}, 42)});
  // A tensor that does not require grad in the middle, and one leaf used twice.
  gradcheck([](const Inputs& in) { return cat({in[0], in[1], in[0]}, 0); },
            {arg({1, 3}, 43), testing::uniform({2, 3}, -1, 1, 44)});
}

TEST_CASE("grad: split and chunk, every part an output") {
  gradcheck([](const Inputs& in) { return split(in[0], 2, 0); }, {arg({5, 2}, 45)});
  gradcheck([](const Inputs& in) { return split(in[0], std::vector<int64_t>{1, 3}, 1); }, {arg({2, 4}, 46)});
  gradcheck([](const Inputs& in) { return chunk(in[0], 3, -1); }, {arg({2, 5}, 47)});
  // Only some parts used: the unused rows get a zero gradient.
  gradcheck([](const Inputs& in) { return chunk(in[0], 2, 0)[1]; }, {arg({4, 2}, 48)});
}

TEST_CASE("grad: index_select with repeated and skipped indices") {
  const Tensor index = int64s({2, 0, 2, 2});
  gradcheck([index](const Inputs& in) { return index_select(in[0], 0, index); }, {arg({3, 2}, 49)});
  gradcheck([index](const Inputs& in) { return index_select(in[0], 1, index); }, {arg({2, 4}, 50)});
  gradcheck([](const Inputs& in) { return index_select(in[0], -1, tensor({1, 0}, kInt32)); }, {arg({2, 2, 3}, 51)});
}

TEST_CASE("grad: gather, including an index smaller than the input") {
  const Tensor index = tensor({0, 2, 2, 1, 0, 0}, kInt64).view({2, 3});
  gradcheck([index](const Inputs& in) { return gather(in[0], 1, index); }, {arg({2, 3}, 52)});
  gradcheck([index](const Inputs& in) { return gather(in[0], 1, index); }, {arg({3, 4}, 53)});  // index narrower
  const Tensor rows = tensor({1, 0, 1, 1}, kInt64).view({2, 2});
  gradcheck([rows](const Inputs& in) { return gather(in[0], 0, rows); }, {arg({2, 3}, 54)});
}

TEST_CASE("grad: index_add into x from src") {
  const Tensor index = int64s({1, 0, 1});
  gradcheck([index](const Inputs& in) { return index_add(in[0], 0, index, in[1]); }, {arg({2, 3}, 55), arg({3, 3}, 56)});
  gradcheck([index](const Inputs& in) { return index_add(in[0], 1, index, in[1]); }, {arg({2, 2}, 57), arg({2, 3}, 58)});
  gradcheck([index](const Inputs& in) { return index_add(in[0], 0, index, in[1]); },
            {testing::uniform({2, 3}, -1, 1, 59), arg({3, 3}, 60)});
}

TEST_CASE("grad: scatter_add into x from src") {
  const Tensor index = tensor({0, 2, 2, 1, 0, 0}, kInt64).view({2, 3});
  gradcheck([index](const Inputs& in) { return scatter_add(in[0], 1, index, in[1]); }, {arg({2, 3}, 61), arg({2, 3}, 62)});
  gradcheck([index](const Inputs& in) { return scatter_add(in[0], 1, index, in[1]); }, {arg({3, 4}, 63), arg({2, 3}, 64)});
  const Tensor rows = tensor({1, 0, 1, 1}, kInt64).view({2, 2});
  gradcheck([rows](const Inputs& in) { return scatter_add(in[0], 0, rows, in[1]); }, {arg({2, 3}, 65), arg({2, 2}, 66)});
}
