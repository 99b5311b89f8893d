// Printing, checked against the exact strings PyTorch 1.13 prints for the same tensors (repr()),
// except that weft writes dtypes without the `torch.` prefix and names grad_fns without
// PyTorch's version suffix (MulBackward, not MulBackward0).
#include <doctest/doctest.h>

#include <limits>
#include <sstream>
#include <string>

#include "tensor/all.h"

using namespace weft;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("printing small tensors like PyTorch") {
  CHECK(tensor({1, 2, 3, 4}).view({2, 2}).to_string() == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(tensor({1.5, -2.25, 3}).to_string() == "tensor([ 1.5000, -2.2500,  3.0000])");
  CHECK(tensor({1, 2, 3}, kInt64).to_string() == "tensor([1, 2, 3])");
  CHECK(tensor({-10, 2, 300}, kInt64).to_string() == "tensor([-10,   2, 300])");
  CHECK(tensor({1.5, 2.5}, kFloat64).to_string() == "tensor([1.5000, 2.5000], dtype=float64)");
  CHECK(tensor({1, 2}, kInt32).to_string() == "tensor([1, 2], dtype=int32)");
  CHECK(tensor({1, 255}, kUInt8).to_string() == "tensor([  1, 255], dtype=uint8)");
  CHECK(tensor({-1, 5}, kInt8).to_string() == "tensor([-1,  5], dtype=int8)");
  CHECK(tensor({1, 2.5}, kBFloat16).to_string() == "tensor([1.0000, 2.5000], dtype=bfloat16)");
  CHECK(tensor({0.1}, kFloat16).to_string() == "tensor([0.1000], dtype=float16)");
  CHECK(tensor({-1, 2}).to_string() == "tensor([-1.,  2.])");
  CHECK(tensor({-0.0, 1}).to_string() == "tensor([-0., 1.])");
  CHECK(tensor({1.5, 2, -3}).view({3, 1}).to_string() == "tensor([[ 1.5000],\n        [ 2.0000],\n        [-3.0000]])");
  CHECK(zeros({2, 2}).to_string() == "tensor([[0., 0.],\n        [0., 0.]])");
  CHECK(arange(8, kFloat32).view({2, 2, 2}).to_string() ==
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
}

TEST_CASE("printing bool, 0-d and empty tensors") {
  CHECK(tensor({1, 0}, kBool).to_string() == "tensor([ True, False])");
  CHECK(scalar_tensor(3.5).to_string() == "tensor(3.5000)");
  CHECK(scalar_tensor(3.0).to_string() == "tensor(3.)");
  CHECK(scalar_tensor(3.0, kInt64).to_string() == "tensor(3)");
  CHECK(zeros({0}).to_string() == "tensor([])");
  CHECK(zeros({0, 3}).to_string() == "tensor([], size=(0, 3))");
  CHECK(zeros({0}, kInt64).to_string() == "tensor([], dtype=int64)");  // nothing to tell int64 from
  CHECK(zeros({0, 2}, kBool).to_string() == "tensor([], size=(0, 2), dtype=bool)");
}

TEST_CASE("the dtype is omitted for the current default dtype") {
  DefaultDTypeGuard guard(kFloat64);
  CHECK(tensor({1.5}).to_string() == "tensor([1.5000])");
  CHECK(tensor({1.5}, kFloat32).to_string() == "tensor([1.5000], dtype=float32)");
}

TEST_CASE("int64 values print exactly") {
  CHECK(from_vector<int64_t>({std::numeric_limits<int64_t>::max(), -5}, {2}).to_string() ==
        "tensor([9223372036854775807,                  -5])");
}

TEST_CASE("scientific notation follows PyTorch's thresholds") {
  CHECK(tensor({1e10, 1}).to_string() == "tensor([1.0000e+10, 1.0000e+00])");
  CHECK(tensor({1e-5, 1}).to_string() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(tensor({0.1, 100.5}).to_string() == "tensor([1.0000e-01, 1.0050e+02])");  // max / min > 1000
  CHECK(tensor({0.001, 0.5}).to_string() == "tensor([0.0010, 0.5000])");
  CHECK(tensor({1e-4, 0.5}).to_string() == "tensor([1.0000e-04, 5.0000e-01])");  // float32 1e-4 is just below 1e-4
  CHECK(tensor({1e-9}).to_string() == "tensor([1.0000e-09])");
  // Whole numbers switch to scientific on the same ratio and magnitude rules.
  CHECK(tensor({1e8, 1}).to_string() == "tensor([1.0000e+08, 1.0000e+00])");
  CHECK(tensor({1, 1e6}).to_string() == "tensor([1.0000e+00, 1.0000e+06])");
  CHECK(tensor({123456789012.0}, kInt64).to_string() == "tensor([123456789012])");
}

TEST_CASE("non-finite values print bare and do not set the column width") {
  CHECK(tensor({kNaN, kInf, -kInf, 1}).to_string() == "tensor([nan, inf, -inf, 1.])");
  CHECK(tensor({kNaN, 1.5}).to_string() == "tensor([   nan, 1.5000])");
}

TEST_CASE("autograd state is printed") {
  Tensor a = tensor({1, 2}).requires_grad_();
  CHECK(a.to_string() == "tensor([1., 2.], requires_grad=True)");
  CHECK(mul(a, 2.0).to_string() == "tensor([2., 4.], grad_fn=<MulBackward>)");
  std::ostringstream os;
  os << a.detach();
  CHECK(os.str() == "tensor([1., 2.])");
}

TEST_CASE("long rows wrap at 80 columns and big tensors are summarised") {
  CHECK(arange(2000).to_string() == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(ones({1001}, kBool).to_string() == "tensor([True, True, True,  ..., True, True, True])");
  CHECK(mul(arange(9, kFloat32), 1000.0).to_string() ==
        "tensor([   0., 1000., 2000., 3000., 4000., 5000., 6000., 7000., 8000.])");
  CHECK(arange(1200, kFloat32).to_string() ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.1970e+03, 1.1980e+03,\n        1.1990e+03])");
  CHECK(div(arange(12, kFloat64), 3.0).to_string() ==
        "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
        "        3.0000, 3.3333, 3.6667], dtype=float64)");
  CHECK(arange(1600, kFloat32).view({40, 40}).to_string() ==
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 3.7000e+01, 3.8000e+01,\n"
        "         3.9000e+01],\n"
        "        [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 7.7000e+01, 7.8000e+01,\n"
        "         7.9000e+01],\n"
        "        [8.0000e+01, 8.1000e+01, 8.2000e+01,  ..., 1.1700e+02, 1.1800e+02,\n"
        "         1.1900e+02],\n"
        "        ...,\n"
        "        [1.4800e+03, 1.4810e+03, 1.4820e+03,  ..., 1.5170e+03, 1.5180e+03,\n"
        "         1.5190e+03],\n"
        "        [1.5200e+03, 1.5210e+03, 1.5220e+03,  ..., 1.5570e+03, 1.5580e+03,\n"
        "         1.5590e+03],\n"
        "        [1.5600e+03, 1.5610e+03, 1.5620e+03,  ..., 1.5970e+03, 1.5980e+03,\n"
        "         1.5990e+03]])");
}
