// In-place operations under autograd: version counters on saved tensors (Note [Saved tensors
// versions]), the rules for leaves and views, and in-place ops on non-leaf tensors, which take
// over the result's history.
#include <doctest/doctest.h>

#include "gradcheck.h"
#include "tensor_test_helpers.h"

using namespace weft;
using testing::values;
using Inputs = std::vector<Tensor>;

namespace {

Tensor leaf(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

constexpr const char* kModified = "modified by an in-place operation";
constexpr const char* kLeafInPlace = "a leaf tensor that requires grad is used in an in-place operation";

}  // namespace

TEST_CASE("inplace: every in-place op bumps the version shared by all views") {
  Tensor x = zeros({2, 2}, kFloat64);
  Tensor row = x[0];
  const uint64_t v0 = x.version();
  x.add_(1.0);
  x.mul_(2.0);
  x.sub_(ones({2, 2}, kFloat64));
  x.div_(2.0);
  row.fill_(3.0);
  x.clamp_(0.0, 2.0);
  x.zero_();
  x.copy_(ones({2}, kFloat64));
  CHECK(x.version() == v0 + 8);
  CHECK(row.version() == x.version());
  CHECK(mul(x, 2.0).version() == 0);  // a new tensor, a new counter
}

TEST_CASE("inplace: modifying a saved input before backward raises; not modifying works") {
  SUBCASE("unmodified") {
    Tensor w = leaf({1, 2});
    Tensor v = tensor({3, 4}, kFloat64);
    mul(w, v).sum().backward();
    CHECK(values(w.grad()) == std::vector<double>{3, 4});
  }
  SUBCASE("the saved tensor itself") {
    Tensor w = leaf({1, 2});
    Tensor v = tensor({3, 4}, kFloat64);
    Tensor y = mul(w, v);  // saves v for w's gradient
    v.mul_(2.0);
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains(kModified), Error);
  }
  SUBCASE("a view of the saved tensor") {
    Tensor w = leaf({1, 2});
    Tensor v = tensor({3, 4}, kFloat64);
    Tensor y = mul(w, v);
    v[1].fill_(0.0);
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains(kModified), Error);
  }
  SUBCASE("a leaf changed under NoGradGuard after it was saved") {
    Tensor w = leaf({1, 2});
    Tensor y = mul(w, w);
    {
      NoGradGuard no_grad;
      w.add_(1.0);
    }
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains(kModified), Error);
  }
  SUBCASE("a saved output") {
    Tensor w = leaf({1, 2});
    Tensor y = exp(w);  // saves its output
    y.add_(1.0);
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains(kModified), Error);
  }
}

TEST_CASE("inplace: leaves that require grad are refused under grad mode and updated under NoGradGuard") {
  Tensor w = leaf({1, 2});
  const Tensor one = ones({2}, kFloat64);
  CHECK_THROWS_WITH_AS(w.add_(one), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.add_(1.0), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.sub_(one), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.mul_(2.0), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.div_(one), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.clamp_(0.0, 1.0), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.fill_(0.0), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.zero_(), doctest::Contains(kLeafInPlace), Error);
  CHECK_THROWS_WITH_AS(w.copy_(one), doctest::Contains(kLeafInPlace), Error);
  CHECK(values(w) == std::vector<double>{1, 2});  // the refused ops wrote nothing
  {
    NoGradGuard no_grad;
    w.add_(one, 2.0);  // an optimizer step
    w.mul_(3.0);
    w.clamp_(std::nullopt, 10.0);
  }
  CHECK(values(w) == std::vector<double>{9, 10});
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  mul(w, w).sum().backward();  // still a working leaf
  CHECK(values(w.grad()) == std::vector<double>{18, 20});
}

TEST_CASE("inplace: on a non-leaf the tensor takes over the op's history") {
  SUBCASE("add_ of a constant") {
    Tensor x = leaf({1, 2});
    Tensor y = mul(x, 2.0);
    y.add_(1.0);
    CHECK(y.grad_fn()->name() == "AddBackward");
    CHECK(values(y) == std::vector<double>{3, 5});
    y.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{2, 2});
  }
  SUBCASE("mul_ and div_ by constants, clamp_") {
    Tensor x = leaf({1, -2});
    Tensor y = mul(x, 2.0);
    y.mul_(3.0);
    y.div_(4.0);
    y.clamp_(-1.0, std::nullopt);  // clips the second element: its gradient is 0
    CHECK(values(y) == std::vector<double>{1.5, -1.0});
    y.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{1.5, 0.0});
  }
  SUBCASE("add_ of a tensor that requires grad") {
    Tensor x = leaf({1, 2});
    Tensor y = mul(x, 2.0);
    y.add_(x, 0.5);
    y.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{2.5, 2.5});
  }
  SUBCASE("a plain tensor that absorbs one which requires grad") {
    Tensor w = leaf({1, 2});
    Tensor acc = zeros({2}, kFloat64);
    acc.add_(mul(w, w));
    CHECK(acc.requires_grad());
    CHECK_FALSE(acc.is_leaf());
    acc.sum().backward();
    CHECK(values(w.grad()) == std::vector<double>{2, 4});
  }
  SUBCASE("gradcheck of a chain of in-place ops") {
    testing::gradcheck([](const Inputs& in) {
      Tensor y = mul(in[0], in[1]);
      y.add_(in[1]);
      y.sub_(in[0]);
      y.mul_(2.0);
      y.div_(in[2]);
      return y;
    }, {testing::arg({2, 3}, 1), testing::arg({3}, 2), testing::arg_away_from_zero({2, 3}, 3, 0.5)});
  }
}

TEST_CASE("inplace: a view of a tensor tracked by autograd is refused") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 2.0);
  Tensor head = y.narrow(0, 0, 2);
  CHECK_THROWS_WITH_AS(head.add_(1.0), doctest::Contains("in-place operation on a view"), Error);
  CHECK(values(y) == std::vector<double>{2, 4, 6});
}
