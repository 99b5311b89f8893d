// Post-accumulate-grad hooks (what data-parallel training uses to reduce a gradient as soon as
// it is ready): they run after the accumulation, see the accumulated .grad, run once per
// backward per leaf, and exist only on leaves that require grad.
#include <doctest/doctest.h>

#include <set>
#include <string>

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

TEST_CASE("queue_callback: runs once the backward pass has ended, in order, and only inside one") {
  Tensor w = leaf({1, 2});
  Tensor v = leaf({3, 4});
  std::vector<std::string> events;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    events.push_back("w hook");
    autograd::queue_callback([&] {
      events.push_back("first callback");
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { events.push_back("second callback"); });
  });
  v.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("v hook"); });
  // The callbacks w's hook queues wait for the whole pass, v's accumulation included.
  add(mul(w, 2.0).sum(), mul(mul(w, 2.0).sum(), v).sum()).backward();
  REQUIRE(events.size() == 5);
  CHECK(std::set<std::string>{events[0], events[1]} == std::set<std::string>{"w hook", "v hook"});
  CHECK(std::vector<std::string>(events.begin() + 2, events.end()) ==
        std::vector<std::string>{"first callback", "second callback", "queued by a callback"});
  events.clear();
  mul(v, 3.0).sum().backward();  // a later pass does not run the earlier pass's callbacks
  CHECK(events == std::vector<std::string>{"v hook"});
  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}), "[queue_callback] can only be called during a backward pass",
                       Error);
}

TEST_CASE("queue_callback: a backward that throws drops its callbacks") {
  Tensor w = leaf({1, 2});
  bool ran = false;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([&] { ran = true; });
    WEFT_FAIL("[test] hook failed");
  });
  CHECK_THROWS_WITH_AS(mul(w, 2.0).sum().backward(), "[test] hook failed", Error);
  CHECK_FALSE(ran);
  CHECK_THROWS_AS(autograd::queue_callback([] {}), Error);  // no pass is left open
}

TEST_CASE("Storage::resize_ frees and re-provides memory in place for every view") {
  Tensor t = arange(6.0, kFloat32);
  Tensor view = t.narrow(0, 2, 3);
  const auto storage = t.storage();
  storage->resize_(0);
  CHECK(storage->nbytes() == 0);
  CHECK(storage->data() == nullptr);
  storage->resize_(6 * sizeof(float));
  t.copy_(arange(10.0, 16.0, 1.0, kFloat32));
  CHECK(values(view) == std::vector<double>{12, 13, 14});  // the view sees the new memory
  float outside = 1;
  auto borrowed = Storage::borrow(&outside, sizeof(float), kCPU);
  CHECK_THROWS_WITH_AS(borrowed->resize_(0), doctest::Contains("cannot resize memory the storage borrowed"), Error);
}
