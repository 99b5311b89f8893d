// Post-accumulate-grad hooks (what data-parallel training uses to reduce a gradient as soon as
// it is ready): they run after the accumulation, see the accumulated .grad, run once per
// backward per leaf, and exist only on leaves that require grad.
#include <doctest/doctest.h>

#include "gradcheck.h"
#include "tensor_test_helpers.h"

using namespace weft;
using testing::values;

namespace {

Tensor leaf(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

}  // namespace

TEST_CASE("hooks: run after accumulation, once per backward, with the accumulated .grad visible") {
  Tensor w = leaf({1, 2});
  int calls = 0;
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    ++calls;
    CHECK(t.is_same(w));
    seen = values(t.grad());
  });
  w.set_grad(full({2}, 10.0, kFloat64));
  // w reaches the root along three paths; their gradients (3, 2w, 1) are summed first.
  add(add(mul(w, 3.0), mul(w, w)), w).sum().backward();
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{16, 18});
  mul(w, 5.0).sum().backward();
  CHECK(calls == 2);
  CHECK(seen == std::vector<double>{21, 23});
}

TEST_CASE("hooks: run in registration order and may rewrite .grad in place") {
  Tensor w = leaf({1, 2});
  std::vector<int> order;
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    order.push_back(1);
    t.grad().mul_(0.5);  // e.g. averaging across ranks
  });
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    order.push_back(2);
    CHECK(values(t.grad()) == std::vector<double>{1, 1});
  });
  mul(w, 2.0).sum().backward();
  CHECK(order == std::vector<int>{1, 2});
  CHECK(values(w.grad()) == std::vector<double>{1, 1});
}

TEST_CASE("hooks: only leaves that the backward reaches run theirs") {
  Tensor used = leaf({1});
  Tensor unused = leaf({1});
  int used_calls = 0, unused_calls = 0;
  used.register_post_accumulate_grad_hook([&](Tensor&) { ++used_calls; });
  unused.register_post_accumulate_grad_hook([&](Tensor&) { ++unused_calls; });
  Tensor dead = mul(unused, 2.0);
  mul(used, 2.0).sum().backward();
  CHECK(used_calls == 1);
  CHECK(unused_calls == 0);
  CHECK(dead.requires_grad());
}

TEST_CASE("hooks: rejected on non-leaves and on tensors that do not require grad") {
  Tensor w = leaf({1});
  Tensor y = mul(w, 2.0);
  CHECK_THROWS_WITH_AS(y.register_post_accumulate_grad_hook([](Tensor&) {}),
                       doctest::Contains("expected a leaf tensor that requires grad"), Error);
  Tensor plain = ones({1}, kFloat64);
  CHECK_THROWS_WITH_AS(plain.register_post_accumulate_grad_hook([](Tensor&) {}),
                       doctest::Contains("expected a leaf tensor that requires grad"), Error);
}
