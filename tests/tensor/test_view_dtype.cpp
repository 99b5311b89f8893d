// Tensor::view(DType) (tensor/shape_ops.cpp): the same bytes read as another dtype, as PyTorch's
// view(dtype). Bit patterns computed by hand, the shape and stride rules for smaller and larger
// items, writes going through, the result never requiring grad, and the error texts (PyTorch's).
#include <doctest/doctest.h>

#include <vector>

#include "error_message.h"
#include "tensor_test_helpers.h"

using namespace weft;

namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace

TEST_CASE("view(dtype): same item size keeps shape and strides and shares storage") {
  Tensor f = tensor({1.0, -2.0, 0.5});
  Tensor i = f.view(kInt32);
  CHECK(i.dtype() == kInt32);
  CHECK(i.shape() == Shape{3});
  // IEEE-754 single: 1.0 = 0x3F800000, -2.0 = 0xC0000000, 0.5 = 0x3F000000.
  CHECK(ints(i) == std::vector<int64_t>{0x3F800000, static_cast<int32_t>(0xC0000000u), 0x3F000000});
  CHECK(i.storage() == f.storage());
  // Writes go through: 0x40400000 is 3.0.
  i.fill_(static_cast<double>(0x40400000));
  CHECK(testing::values(f) == std::vector<double>{3, 3, 3});
  // A transposed view keeps its strides.
  const Tensor t = zeros({2, 3}).t().view(kInt32);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  // A 0-d tensor may change dtype when the item size does not.
  CHECK(scalar_tensor(1.0).view(kInt32).item<int64_t>() == 0x3F800000);
}

TEST_CASE("view(dtype): smaller items multiply the last dim, the other strides and the offset") {
  // bfloat16 1.0 = 0x3F80, -3.0 = 0xC040; little-endian bytes low first.
  const Tensor b = tensor({1.0, -3.0}).to(kBFloat16);
  const Tensor bytes = b.view(kUInt8);
  CHECK(bytes.shape() == Shape{4});
  CHECK(ints(bytes) == std::vector<int64_t>{0x80, 0x3F, 0x40, 0xC0});
  const Tensor f = zeros({2, 3});
  const Tensor h = f.view(kFloat16);
  CHECK(h.shape() == Shape{2, 6});
  CHECK(h.strides() == Shape{6, 1});
  const Tensor sliced = zeros({4, 3}, kFloat64).slice(0, 1, 3).view(kInt8);  // offset 3 doubles
  CHECK(sliced.shape() == Shape{2, 24});
  CHECK(sliced.strides() == Shape{24, 1});
  CHECK(sliced.offset() == 24);
  // Stride 0 (an expanded dim) stays 0.
  CHECK(zeros({2}).expand({3, 2}).view(kInt8).strides() == Shape{0, 1});
  CHECK(zeros({0, 3}).view(kInt8).shape() == Shape{0, 12});
}

TEST_CASE("view(dtype): larger items divide the last dim, the other strides and the offset") {
  Tensor bytes = from_vector<uint8_t>({0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40}, {8});
  const Tensor f = bytes.view(kFloat32);
  CHECK(f.shape() == Shape{2});
  CHECK(testing::values(f) == std::vector<double>{1.0, 2.0});
  const Tensor grid = zeros({4, 8}, kInt8);
  const Tensor q = grid.slice(1, 0, 4).view(kInt32);
  CHECK(q.shape() == Shape{4, 1});
  CHECK(q.strides() == Shape{2, 1});
  const Tensor shifted = grid.slice(1, 4, 8).view(kInt32);
  CHECK(shifted.offset() == 1);
  // Writes go through: the second int32 of row 0 covers bytes 4..7.
  Tensor w = grid.view(kInt32);
  w.select(0, 0).select(0, 1).fill_(-1.0);
  CHECK(ints(grid.select(0, 0)) == std::vector<int64_t>{0, 0, 0, 0, -1, -1, -1, -1});
}

TEST_CASE("view(dtype): the result never requires grad") {
  const Tensor x = ones({4}).requires_grad_();
  CHECK(!x.view(kInt32).requires_grad());
  CHECK(!x.view(kFloat32).requires_grad());
  CHECK(!x.view(kBFloat16).requires_grad());
  CHECK(x.view(kFloat32).storage() == x.storage());
}

TEST_CASE("view(dtype): errors, in PyTorch's words") {
  CHECK(error_of([] { scalar_tensor(1.0).view(kFloat16); }) ==
        "[view] self.dim() cannot be 0 to view float32 as float16 (different element sizes)");
  CHECK(error_of([] { zeros({2, 3}).t().view(kFloat16); }) ==
        "[view] self.stride(-1) must be 1 to view float32 as float16 (different element sizes), but got 3");
  CHECK(error_of([] { zeros({2, 3}).view(kInt64); }) ==
        "[view] self.size(-1) must be divisible by 2 to view float32 as int64 (different element sizes), but got 3");
  CHECK(error_of([] { zeros({2, 3}).slice(1, 1, 3).view(kFloat64); }) ==
        "[view] self.storage_offset() must be divisible by 2 to view float32 as float64 (different element sizes), "
        "but got 1");
  CHECK(error_of([] { zeros({3, 5}, kInt8).slice(1, 0, 4).view(kBFloat16); }) ==
        "[view] self.stride(0) must be divisible by 2 to view int8 as bfloat16 (different element sizes), but got 5");
  CHECK(error_of([] { zeros({4, 8}, kInt8).slice(1, 0, 8, 2).view(kFloat16); }) ==
        "[view] self.stride(-1) must be 1 to view int8 as float16 (different element sizes), but got 2");
}
