// Binary-op result dtypes when 0-d tensors meet tensors with dims (PyTorch's result_type), and
// factories refusing shapes whose size cannot be addressed.
#include <doctest/doctest.h>

#include "tensor/all.h"

using namespace weft;

TEST_CASE("a 0-d tensor of the same category does not widen a tensor with dims") {
  const Tensor half = ones({3}, kFloat16);
  const Tensor scale = scalar_tensor(2.0, kFloat32);
  CHECK(mul(half, scale).dtype() == kFloat16);
  CHECK(mul(scale, half).dtype() == kFloat16);
  CHECK(add(ones({2}, kInt8), scalar_tensor(1, kInt64)).dtype() == kInt8);
}

TEST_CASE("a 0-d tensor of a higher category still decides the dtype") {
  CHECK(add(ones({2}, kInt32), scalar_tensor(1.5, kFloat64)).dtype() == kFloat64);
  CHECK(add(ones({2}, kBool), scalar_tensor(3, kInt32)).dtype() == kInt32);
  CHECK(add(ones({2}, kInt32), scalar_tensor(1.5, kFloat64)).to_vector<double>() == std::vector<double>{2.5, 2.5});
}

TEST_CASE("two 0-d tensors, or two tensors with dims, promote normally") {
  CHECK(add(scalar_tensor(1, kFloat16), scalar_tensor(1, kFloat32)).dtype() == kFloat32);
  CHECK(add(ones({1}, kFloat16), ones({1}, kFloat32)).dtype() == kFloat32);
}

TEST_CASE("shapes too large to address are refused before any arithmetic overflows") {
  const int64_t big = int64_t{1} << 32;
  CHECK_THROWS_WITH_AS(empty({big, big, 0}), doctest::Contains("too large to address"), Error);
  CHECK_THROWS_WITH_AS(empty({big, big}, kFloat32), doctest::Contains("too large to address"), Error);
  CHECK(empty({big / 2, 0, big / 2}).numel() == 0);
  CHECK(empty({big, 0}).numel() == 0);
}
