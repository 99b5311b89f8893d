// Finite-difference gradient checks of the elementwise ops (tensor/elementwise.cpp), each with
// same-shape and broadcasting inputs; gradcheck also repeats every check with non-contiguous
// leaves. Values stay clear of kinks and ties (abs at 0, clamp's bounds, maximum's ties).
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace weft;
using testing::arg;
using testing::arg_away_from_zero;
using testing::gradcheck;
using Inputs = std::vector<Tensor>;

TEST_CASE("grad: add and sub, with alpha, scalars and broadcasting") {
  gradcheck([](const Inputs& in) { return add(in[0], in[1]); }, {arg({2, 3}, 1), arg({2, 3}, 2)});
  gradcheck([](const Inputs& in) { return add(in[0], in[1], 2.5); }, {arg({2, 3}, 3), arg({2, 3}, 4)});
  gradcheck([](const Inputs& in) { return add(in[0], in[1], -0.5); }, {arg({4, 1, 3}, 5), arg({2, 1}, 6)});
  gradcheck([](const Inputs& in) { return add(in[0], 1.5); }, {arg({3}, 7)});
  gradcheck([](const Inputs& in) { return sub(in[0], in[1]); }, {arg({2, 3}, 8), arg({3}, 9)});
  gradcheck([](const Inputs& in) { return sub(in[0], in[1], 3.0); }, {arg({3, 1}, 10), arg({1, 4}, 11)});
  gradcheck([](const Inputs& in) { return sub(in[0], 0.25); }, {arg({2, 2}, 12)});
  gradcheck([](const Inputs& in) { return rsub(in[0], 2.0); }, {arg({2, 2}, 13)});
  gradcheck([](const Inputs& in) { return 2.0 - in[0] + in[1] * 3.0; }, {arg({2, 3}, 14), arg({3}, 15)});
}

TEST_CASE("grad: add with one input that does not require grad") {
  gradcheck([](const Inputs& in) { return add(in[0], in[1], 2.0); },
            {arg({2, 3}, 16), testing::uniform({3}, -1, 1, 17)});
  gradcheck([](const Inputs& in) { return sub(in[0], in[1], 2.0); },
            {testing::uniform({2, 3}, -1, 1, 18), arg({3}, 19)});
}

TEST_CASE("grad: mul and div, with scalars and broadcasting") {
  gradcheck([](const Inputs& in) { return mul(in[0], in[1]); }, {arg({2, 3}, 20), arg({2, 3}, 21)});
  gradcheck([](const Inputs& in) { return mul(in[0], in[1]); }, {arg({2, 1, 3}, 22), arg({4, 1}, 23)});
  gradcheck([](const Inputs& in) { return mul(in[0], in[0]); }, {arg({3}, 24)});
  gradcheck([](const Inputs& in) { return mul(in[0], -1.5); }, {arg({3}, 25)});
  gradcheck([](const Inputs& in) { return div(in[0], in[1]); }, {arg({2, 3}, 26), arg_away_from_zero({2, 3}, 27, 0.5)});
  gradcheck([](const Inputs& in) { return div(in[0], in[1]); }, {arg({3, 1}, 28), arg_away_from_zero({1, 2}, 29, 0.5)});
  gradcheck([](const Inputs& in) { return div(in[0], 4.0); }, {arg({3}, 30)});
  gradcheck([](const Inputs& in) { return rdiv(in[0], 2.0); }, {arg_away_from_zero({2, 2}, 31, 0.5)});
  gradcheck([](const Inputs& in) { return 1.0 / in[0]; }, {arg_away_from_zero({3}, 32, 0.5)});
}

TEST_CASE("grad: pow with a tensor exponent, including broadcasting") {
  gradcheck([](const Inputs& in) { return pow(in[0], in[1]); }, {arg({2, 3}, 33, 0.5, 2.0), arg({2, 3}, 34, -2, 2)});
  gradcheck([](const Inputs& in) { return pow(in[0], in[1]); }, {arg({3, 1}, 35, 0.5, 2.0), arg({4}, 36, -2, 2)});
  // Only the base requires grad; then only the exponent.
  gradcheck([](const Inputs& in) { return pow(in[0], in[1]); },
            {arg({3}, 37, 0.5, 2.0), testing::uniform({3}, -2, 2, 38)});
  gradcheck([](const Inputs& in) { return pow(in[0], in[1]); },
            {testing::uniform({3}, 0.5, 2, 39), arg({2, 3}, 40, -2, 2)});
}

TEST_CASE("grad: pow with a scalar exponent") {
  for (double e : {2.0, 3.0, 0.5, -1.5, 1.0}) {
    CAPTURE(e);
    gradcheck([e](const Inputs& in) { return pow(in[0], e); }, {arg({2, 3}, 41, 0.5, 2.0)});
  }
  gradcheck([](const Inputs& in) { return in[0].pow(3.0); }, {arg({4}, 42)});  // negative base, integer exponent
  // x⁰ = 1 everywhere: the gradient is zero (not NaN at x = 0).
  Tensor x = tensor({0.0, 2.0}, kFloat64).requires_grad_();
  pow(x, 0.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("grad: maximum and minimum, including broadcasting") {
  gradcheck([](const Inputs& in) { return maximum(in[0], in[1]); }, {arg({2, 3}, 43), arg({2, 3}, 44)});
  gradcheck([](const Inputs& in) { return minimum(in[0], in[1]); }, {arg({2, 3}, 45), arg({2, 3}, 46)});
  gradcheck([](const Inputs& in) { return maximum(in[0], in[1]); }, {arg({3, 1}, 47), arg({4}, 48)});
  gradcheck([](const Inputs& in) { return minimum(in[0], in[1]); }, {arg({2, 1, 3}, 49), arg({2, 1}, 50)});
}

TEST_CASE("grad: maximum and minimum split a tie's gradient in half") {
  Tensor a = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor b = tensor({1.0, 5.0, 0.0}, kFloat64).requires_grad_();
  maximum(a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 0.0, 1.0});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 1.0, 0.0});
}

TEST_CASE("grad: unary math ops") {
  gradcheck([](const Inputs& in) { return neg(in[0]); }, {arg({2, 3}, 51)});
  gradcheck([](const Inputs& in) { return -in[0]; }, {arg({3}, 52)});
  gradcheck([](const Inputs& in) { return abs(in[0]); }, {arg_away_from_zero({2, 3}, 53)});
  gradcheck([](const Inputs& in) { return exp(in[0]); }, {arg({2, 3}, 54)});
  gradcheck([](const Inputs& in) { return log(in[0]); }, {arg({2, 3}, 55, 0.2, 3.0)});
  gradcheck([](const Inputs& in) { return sqrt(in[0]); }, {arg({2, 3}, 56, 0.2, 3.0)});
  gradcheck([](const Inputs& in) { return rsqrt(in[0]); }, {arg({2, 3}, 57, 0.2, 3.0)});
  gradcheck([](const Inputs& in) { return in[0].exp().log().sqrt().rsqrt().abs().neg(); }, {arg({4}, 58, 0.5, 2.0)});
}

TEST_CASE("grad: sign has a zero gradient") {
  gradcheck([](const Inputs& in) { return add(sign(in[0]), in[0]); }, {arg_away_from_zero({2, 3}, 59)});
}

TEST_CASE("grad: activations") {
  gradcheck([](const Inputs& in) { return relu(in[0]); }, {arg_away_from_zero({2, 3}, 60)});
  gradcheck([](const Inputs& in) { return gelu(in[0]); }, {arg({2, 3}, 61, -3, 3)});
  gradcheck([](const Inputs& in) { return gelu(in[0], /*tanh_approximation=*/true); }, {arg({2, 3}, 62, -3, 3)});
  gradcheck([](const Inputs& in) { return silu(in[0]); }, {arg({2, 3}, 63, -3, 3)});
  gradcheck([](const Inputs& in) { return sigmoid(in[0]); }, {arg({2, 3}, 64, -3, 3)});
  gradcheck([](const Inputs& in) { return tanh(in[0]); }, {arg({2, 3}, 65, -3, 3)});
  gradcheck([](const Inputs& in) { return in[0].relu().sigmoid().tanh(); }, {arg_away_from_zero({5}, 66)});
}

TEST_CASE("grad: clamp with min, max or both") {
  // Values in ±[0.2, 1) with bounds at ±0.5 and 0.1: elements on both sides of each bound.
  const Tensor x = arg_away_from_zero({3, 4}, 67);
  gradcheck([](const Inputs& in) { return clamp(in[0], -0.5, 0.5); }, {x});
  gradcheck([](const Inputs& in) { return clamp(in[0], 0.1, std::nullopt); }, {x});
  gradcheck([](const Inputs& in) { return in[0].clamp(std::nullopt, -0.1); }, {x});
}

TEST_CASE("grad: where, with a broadcast condition and operands") {
  const Tensor cond = lt(testing::uniform({2, 3}, 0, 1, 68), 0.5);
  gradcheck([cond](const Inputs& in) { return where(cond, in[0], in[1]); }, {arg({2, 3}, 69), arg({2, 3}, 70)});
  gradcheck([cond](const Inputs& in) { return where(cond, in[0], in[1]); }, {arg({3}, 71), arg({2, 1}, 72)});
  const Tensor col = lt(testing::uniform({2, 1}, 0, 1, 73), 0.5);
  gradcheck([col](const Inputs& in) { return where(col, in[0], in[1]); }, {arg({4, 2, 3}, 74), arg({1}, 75)});
  gradcheck([cond](const Inputs& in) { return where(cond, in[0], -2.0); }, {arg({2, 3}, 76)});
}

TEST_CASE("grad: masked_fill, with a broadcast mask") {
  const Tensor mask = tensor({1, 0, 1}, kBool);
  gradcheck([mask](const Inputs& in) { return masked_fill(in[0], mask, 7.0); }, {arg({2, 3}, 77)});
  const Tensor full_mask = lt(testing::uniform({2, 3}, 0, 1, 78), 0.5);
  gradcheck([full_mask](const Inputs& in) { return masked_fill(in[0], full_mask, -1.0); }, {arg({2, 3}, 79)});
}
