// The CPU shortcuts that keep small ops cheap give the same answers as the general paths:
// elementwise kernels over contiguous / broadcast-scalar operands (no dimension merging),
// reductions over trailing dims of a contiguous input (no permute, no copy), and the CPU
// allocator's hand-made 64-byte alignment. Each case is paired with a layout that takes the
// general path, and every expected value is worked out by hand.
#include <doctest/doctest.h>

#include <cstdint>

#include "tensor_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using testing::values;

TEST_CASE("elementwise kernels agree across contiguous, broadcast and strided operands") {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}).view({2, 3});
  const Tensor b = tensor({10, 20, 30, 40, 50, 60}).view({2, 3});

  SUBCASE("all contiguous") { CHECK(values(add(a, b)) == std::vector<double>{11, 22, 33, 44, 55, 66}); }
  SUBCASE("a broadcast scalar, 0-d or with size-1 dims of non-zero stride") {
    CHECK(values(mul(a, 2.0)) == std::vector<double>{2, 4, 6, 8, 10, 12});
    CHECK(values(add(a, tensor({100}))) == std::vector<double>{101, 102, 103, 104, 105, 106});
    CHECK(values(add(tensor({1, 2, 3}).view({1, 3}), tensor({5}).view({1, 1}))) == std::vector<double>{6, 7, 8});
  }
  SUBCASE("a broadcast row takes the general path") {
    CHECK(values(add(a, tensor({1, 2, 3}))) == std::vector<double>{2, 4, 6, 5, 7, 9});
  }
  SUBCASE("transposed operands") {
    CHECK(values(add(a.t(), b.t())) == std::vector<double>{11, 44, 22, 55, 33, 66});
    CHECK(values(add(a.t(), tensor({1, 1, 1, 1, 1, 1}).view({3, 2}))) == std::vector<double>{2, 5, 3, 6, 4, 7});
    CHECK(values(neg(a.t())) == std::vector<double>{-1, -4, -2, -5, -3, -6});
  }
  SUBCASE("where with a broadcast condition") {
    const Tensor cond = gt(tensor({0, 1, 0}), 0.5);
    CHECK(values(where(cond, a, b)) == std::vector<double>{10, 2, 30, 40, 5, 60});
  }
  SUBCASE("converting copies and fills of strided views") {
    CHECK(values(a.t().to(kFloat64)) == std::vector<double>{1, 4, 2, 5, 3, 6});
    Tensor z = zeros({2, 3});
    z.narrow(1, 1, 1).fill_(7);
    CHECK(values(z) == std::vector<double>{0, 7, 0, 0, 7, 0});
  }
  SUBCASE("empty and long operands") {
    CHECK(add(zeros({0, 3}), zeros({0, 3})).shape() == Shape{0, 3});
    // Long enough to be split across threads.
    CHECK(add(ones({70001}), 1.0).sum().item() == 140002.0);
  }
}

TEST_CASE("reductions agree across trailing, leading and strided layouts") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}).view({2, 3});
  CHECK(values(sum(x, {1})) == std::vector<double>{6, 15});
  CHECK(values(sum(x, {0})) == std::vector<double>{5, 7, 9});
  CHECK(sum(x).item() == 21.0);
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(values(sum(x.t(), {1})) == std::vector<double>{5, 7, 9});
  CHECK(values(sum(x.narrow(1, 1, 2), {1})) == std::vector<double>{5, 11});
  CHECK(values(amax(x, {1})) == std::vector<double>{3, 6});
  CHECK(values(max(x.t(), 1).indices) == std::vector<double>{1, 1, 1});
  CHECK(sum(scalar_tensor(4.0)).item() == 4.0);

  // The gradient still flows through a reduction whose input was viewed in place.
  const Tensor w = tensor({1, 2, 3, 4, 5, 6}).view({2, 3}).requires_grad_();
  sum(sum(mul(w, w), {1})).backward();
  CHECK(values(w.grad()) == std::vector<double>{2, 4, 6, 8, 10, 12});
}

TEST_CASE("cpu storage is 64-byte aligned and fully usable at every size") {
  for (int64_t n : {1, 2, 3, 15, 16, 17, 100, 1000, 300000}) {
    Tensor t = empty({n});
    CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
    t.fill_(3);
    CHECK(t.sum().item() == 3.0 * static_cast<double>(n));
  }
}
