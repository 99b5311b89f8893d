// Quick end-to-end checks that the core pieces fit together.
#include <doctest/doctest.h>

#include "tensor/all.h"

using namespace weft;

TEST_CASE("add, matmul and backward fit together") {
  Tensor a = tensor({1, 2, 3, 4}).view({2, 2}).requires_grad_();
  Tensor b = tensor({5, 6, 7, 8}).view({2, 2});
  Tensor y = matmul(a, b).sum();
  CHECK(y.item() == doctest::Approx(1 * 5 + 2 * 7 + 1 * 6 + 2 * 8 + 3 * 5 + 4 * 7 + 3 * 6 + 4 * 8));
  y.backward();
  // d/da sum(a·b) = 1·bᵀ: row sums of b.
  CHECK(a.grad().to_vector<double>() == std::vector<double>{11, 15, 11, 15});
}
