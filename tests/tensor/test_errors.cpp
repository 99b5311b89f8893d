// Errors: every misuse throws weft::Error with a message of the form `[op] expected ..., got ...`.
// The texts are checked exactly, since users read them: shape mismatches, broadcasting, dtypes,
// device strings, CUDA in a CPU-only build, out-of-range dims and indices, undefined tensors.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tensor/all.h"
#include "error_message.h"

using namespace weft;

TEST_CASE("weft::Error is a std::runtime_error") {
  CHECK_THROWS_AS(Device("tpu"), std::runtime_error);
}

TEST_CASE("shape mismatches") {
  CHECK(error_of([] { matmul(ones({4, 3}), ones({5, 2})); }) == "[matmul] inner dimensions differ: (4, 3) · (5, 2)");
  CHECK(error_of([] { matmul(ones({3}), ones({4})); }) == "[matmul] inner dimensions differ: (3,) · (4,)");
  CHECK(error_of([] { matmul(ones({2, 3, 4}), ones({5, 2})); }) ==
        "[matmul] inner dimensions differ: (2, 3, 4) · (5, 2)");
  CHECK(error_of([] { matmul(scalar_tensor(1.0), ones({3})); }) ==
        "[matmul] both arguments need at least 1 dimension, got () · (3,)");
  CHECK(error_of([] { mse_loss(ones({2, 2}), ones({4})); }) ==
        "[mse_loss] input and target shapes differ: (2, 2) vs (4,)");
  CHECK(error_of([] { ones({2, 3}).expand({2, 4}); }) ==
        "[expand] the size 3 of dimension 1 must match 4 or be 1: cannot expand (2, 3) to (2, 4)");
  CHECK(error_of([] { ones({6}).view({4, -1}); }) == "[view] shape (4, -1) is invalid for input of shape (6,)");
}

TEST_CASE("broadcasting failures name the op and both shapes") {
  CHECK(error_of([] { add(ones({2, 3}), ones({4})); }) == "[add] shapes cannot be broadcast together: (2, 3) and (4,)");
  CHECK(error_of([] { mul(ones({2, 1, 3}), ones({4, 2})); }) ==
        "[mul] shapes cannot be broadcast together: (2, 1, 3) and (4, 2)");
  CHECK(error_of([] { eq(ones({2}), ones({3})); }) == "[eq] shapes cannot be broadcast together: (2,) and (3,)");
  CHECK(error_of([] { matmul(ones({2, 3, 4}), ones({3, 4, 5})); }) ==
        "[matmul] shapes cannot be broadcast together: (2,) and (3,)");
  CHECK(error_of([] { where(ones({2}, kBool), ones({3}), ones({3})); }) ==
        "[where] shapes cannot be broadcast together: (2,) and (3,)");
}

TEST_CASE("dtype errors") {
  CHECK(error_of([] { ones({2}, kInt64).requires_grad_(); }) ==
        "[requires_grad_] only floating tensors can require gradients, got int64");
  CHECK(error_of([] { ones({2}, kInt64).data<float>(); }) == "[data] requested float32 pointer from a int64 tensor");
  CHECK(error_of([] { neg(ones({2}, kBool)); }) ==
        "[neg] negation of a bool tensor is not supported; use logical_not");
  CHECK(error_of([] { sub(ones({2}, kBool), ones({2}, kBool)); }) ==
        "[sub] subtraction of two bool tensors is not supported; use logical_not or ne");
  CHECK(error_of([] { mul(ones({2}, kFloat8E4M3FN), ones({2}, kBFloat16)); }) ==
        "[promote_types] float8 types do not promote: float8_e4m3fn with bfloat16; convert explicitly with .to(dtype)");
  CHECK(error_of([] { index_select(ones({2}), 0, ones({1})); }) ==
        "[index_select] expected an integer index tensor, got float32");
  CHECK(error_of([] { masked_fill(ones({2}), ones({2}), 0.0); }) == "[masked_fill] expected a bool mask, got float32");
  CHECK(error_of([] { embedding(ones({3, 2}), ones({2})); }) == "[embedding] expected integer indices, got float32");
  CHECK(error_of([] { rand({2}, kInt32); }) == "[rand] expected a floating dtype, got int32");
}

TEST_CASE("device strings") {
  CHECK(Device("cpu") == kCPU);
  CHECK(Device("cuda") == Device(DeviceType::CUDA, 0));
  CHECK(Device("cuda:3").index == 3);
  for (const char* bad : {"cuda:x", "cuda:", "cuda:-1", "cuda:1x", "CPU", "gpu", "cuda0", ""}) {
    CAPTURE(bad);
    CHECK(error_of([bad] { Device d(bad); }) == std::string("[device] expected 'cpu', 'cuda' or 'cuda:N', got '") + bad + "'");
  }
  std::ostringstream os;
  os << Device("cuda:2") << " " << kCPU;
  CHECK(os.str() == "cuda:2 cpu");
}

TEST_CASE("a CUDA device without a GPU fails with the way out") {
  if (cuda::is_available()) return;  // this case is about machines without one
  // Without CUDA in the build, the way out is to rebuild; with it, there is no device to use.
  auto no_cuda = [](int index) -> std::string {
    if (!cuda::is_built()) return "[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)";
    return "[device] cuda:" + std::to_string(index) + " requested but no CUDA device is visible (no GPU, or no driver)";
  };
  CHECK(error_of([] { zeros({2}, Device("cuda")); }) == no_cuda(0));
  CHECK(error_of([] { ones({2}).to(Device("cuda:0")); }) == no_cuda(0));
  CHECK(error_of([] { empty({2}, TensorOptions().device("cuda:1")); }) == no_cuda(1));
  // Memory wrapped as if it lived on a GPU is refused when it is wrapped, with the backend's message.
  float buffer[2] = {1, 2};
  CHECK(error_of([&] { from_blob(buffer, {2}, kFloat32, Device("cuda")); }) == no_cuda(0));
}

TEST_CASE("out-of-range dims and indices") {
  const Tensor x = ones({2, 3});
  CHECK(error_of([&] { x.select(2, 0); }) == "[select] dimension out of range: expected in [-2, 1], got 2");
  CHECK(error_of([&] { x.select(0, 2); }) == "[select] index 2 is out of range for dimension 0 of size 2");
  CHECK(error_of([&] { x.select(1, -4); }) == "[select] index -4 is out of range for dimension 1 of size 3");
  CHECK(error_of([&] { x.narrow(1, 2, 2); }) ==
        "[narrow] start 2 and length 2 are out of range for dimension 1 of size 3");
  CHECK(error_of([&] { x.narrow(-3, 0, 1); }) == "[narrow] dimension out of range: expected in [-2, 1], got -3");
  CHECK(error_of([&] { x.transpose(0, 5); }) == "[transpose] dimension out of range: expected in [-2, 1], got 5");
  CHECK(error_of([&] { x.size(2); }) == "[size] dimension out of range: expected in [-2, 1], got 2");
  CHECK(error_of([&] { x.unsqueeze(3); }) == "[unsqueeze] dimension out of range: expected in [-3, 2], got 3");
  CHECK(error_of([&] { softmax(x, 2); }) == "[softmax] dimension out of range: expected in [-2, 1], got 2");
  CHECK(error_of([&] { cat({x, x}, 2); }) == "[cat] dimension out of range: expected in [-2, 1], got 2");
  CHECK(error_of([&] { index_select(x, 1, tensor({0, 3}, kInt64)); }) ==
        "[index_select] index 3 is out of bounds for size 3");
  CHECK(error_of([&] { index_select(x, 0, tensor({-1}, kInt64)); }) ==
        "[index_select] index -1 is out of bounds for size 2");
  CHECK(error_of([&] { gather(x, 0, tensor({0, 2}, kInt64).view({1, 2})); }) ==
        "[gather] index 2 is out of bounds for size 2");
  CHECK(gather(x, 1, tensor({0, 0, 0, 0}, kInt64).view({1, 4})).shape() == Shape{1, 4});  // as torch.gather
  CHECK(error_of([&] { gather(x, 0, tensor({0, 0, 0, 0}, kInt64).view({1, 4})); }) ==
        "[gather] index shape (1, 4) exceeds input shape (2, 3) in dimension 1");
  CHECK(error_of([&] { index_add(x, 0, tensor({5}, kInt64), ones({1, 3})); }) ==
        "[index_add] index 5 is out of bounds for size 2");
  // Errors name the op the user called, not the op it is built on (index_select here).
  CHECK(error_of([&] { embedding(ones({3, 2}), tensor({3}, kInt64)); }) ==
        "[embedding] index 3 is out of range for 3 embeddings; expected indices in [0, 3)");
  CHECK(error_of([&] { embedding(ones({3, 2}), tensor({0, -1, 2}, kInt64).view({1, 3})); }) ==
        "[embedding] index -1 is out of range for 3 embeddings; expected indices in [0, 3)");
  CHECK(error_of([&] { log_softmax(x, -3); }) == "[log_softmax] dimension out of range: expected in [-2, 1], got -3");
  CHECK(error_of([&] { cross_entropy(ones({2, 3}), tensor({0, 3}, kInt64)); }) ==
        "[cross_entropy] target 3 is out of bounds for 3 classes");
  CHECK(error_of([&] { cross_entropy(ones({2, 3}), tensor({0}, kInt64)); }) ==
        "[cross_entropy] expected a target of shape (2,) for input (2, 3), got (1,)");
}

TEST_CASE("undefined tensors") {
  const Tensor u;
  CHECK_FALSE(u.defined());
  CHECK(error_of([&] { u.shape(); }) == "[shape] called on an undefined tensor");
  CHECK(error_of([&] { u.dtype(); }) == "[dtype] called on an undefined tensor");
  CHECK(error_of([&] { add(u, ones({1})); }) == "[add] the input tensor is undefined");
  CHECK(error_of([&] { add(ones({1}), u); }) == "[add] the input tensor is undefined");
  CHECK(error_of([&] { mul(u, u); }) == "[mul] the input tensor is undefined");
  CHECK(error_of([&] { lt(u, ones({1})); }) == "[lt] the input tensor is undefined");
  CHECK(error_of([&] { where(ones({1}, kBool), u, ones({1})); }) == "[where] the input tensor is undefined");
  CHECK(error_of([&] { matmul(ones({1}), u); }) == "[matmul] the input tensor is undefined");
  CHECK(error_of([&] { sum(u); }) == "[sum] the input tensor is undefined");
  CHECK(error_of([&] { exp(u); }) == "[exp] the input tensor is undefined");
  CHECK(error_of([&] { cross_entropy(ones({2, 2}), u); }) == "[cross_entropy] the target tensor is undefined");
  CHECK(error_of([&] { linear(ones({2, 2}), u); }) == "[linear] the weight tensor is undefined");
  CHECK(error_of([&] { u.requires_grad(); }) == "[requires_grad] called on an undefined tensor");
  CHECK(u.to_string() == "tensor(undefined)");
}

TEST_CASE("message pieces read as a stream printed them, without one") {
  using detail::cat;
  CHECK(cat("shape ", Shape{4, 3}, " vector ", Shape{4}, " scalar ", Shape{}) == "shape (4, 3) vector (4,) scalar ()");
  CHECK(cat(int8_t{-3}, ' ', uint8_t{200}, ' ', int64_t{-9000000000}, ' ', size_t{7}) == "-3 200 -9000000000 7");
  CHECK(cat(1.5f, ' ', 1e-5, ' ', 0.1, ' ', 123456789.0, ' ', -0.0) == "1.5 1e-05 0.1 1.23457e+08 -0");
  CHECK(cat(true, ' ', false, ' ', 'c', " 0x", detail::Hex{0xc0ffee}) == "true false c 0xc0ffee");
  CHECK(cat(std::filesystem::path("/tmp/a \"b\"")) == "\"/tmp/a \\\"b\\\"\"");
  CHECK(cat(kBFloat16, " on ", Device("cuda:1"), ", ", static_cast<DType>(200)) == "bfloat16 on cuda:1, DType(200)");
}
