// Elementwise ops, forward values: broadcasting, type promotion, comparisons, where /
// masked_fill / clamp, every unary op against its closed form, NaN propagation of maximum /
// minimum, and the arithmetic operators. Expected values are written out by hand or computed in
// double from the defining formula.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <optional>
#include <utility>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using testing::values;
using testing::check_close;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<double> kPoints = {-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0};

// Applies a unary op to kPoints in float64 and compares with f evaluated in double.
template <class Op, class F>
void check_unary(Op op, F f, double tol = 1e-14) {
  const Tensor x = from_vector(kPoints, {static_cast<int64_t>(kPoints.size())}, kFloat64);
  const Tensor y = op(x);
  CHECK(y.dtype() == kFloat64);
  std::vector<double> want;
  for (double p : kPoints) want.push_back(f(p));
  check_close(values(y), want, tol);
}

}  // namespace

TEST_CASE("broadcasting") {
  const Tensor col = tensor({1, 2, 3}).view({3, 1});
  const Tensor row = tensor({10, 20, 30, 40}).view({1, 4});
  const Tensor s = add(col, row);
  CHECK(s.shape() == Shape{3, 4});
  CHECK(values(s) == std::vector<double>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
  CHECK(values(mul(col, row)) == std::vector<double>{10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120});
  CHECK(values(sub(row, col)) == std::vector<double>{9, 19, 29, 39, 8, 18, 28, 38, 7, 17, 27, 37});
  // Leading dims are added.
  const Tensor m = arange(6, kFloat32).view({2, 3});
  CHECK(values(add(m, tensor({100, 200, 300}))) == std::vector<double>{100, 201, 302, 103, 204, 305});
  // A 0-d tensor broadcasts against anything, and 0-d with 0-d stays 0-d.
  const Tensor z = scalar_tensor(2.0);
  CHECK(add(m, z).shape() == Shape{2, 3});
  CHECK(values(div(m, z)) == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
  CHECK(add(z, z).dim() == 0);
  CHECK(add(z, z).item() == 4.0);
  // A double is a scalar.
  CHECK(values(add(m, 1.5)) == std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  CHECK(values(rsub(m, 1.0)) == std::vector<double>{1, 0, -1, -2, -3, -4});
  CHECK(values(rdiv(tensor({1, 2, 4}), 8.0)) == std::vector<double>{8, 4, 2});
  // Size-0 dims broadcast like any other.
  CHECK(add(zeros({0, 3}), ones({1, 3})).shape() == Shape{0, 3});
  // Non-contiguous operands.
  CHECK(values(add(m.t(), tensor({1, 2}))) == std::vector<double>{1, 5, 2, 6, 3, 7});
  CHECK(broadcast_shapes({5, 1, 3}, {4, 1}, "test") == Shape{5, 4, 3});
}

TEST_CASE("type promotion") {
  const Tensor i = tensor({1, 2, 3}, kInt64);
  const Tensor f = tensor({0.5, 0.5, 0.5});
  SUBCASE("int + float -> float") {
    const Tensor r = add(i, f);
    CHECK(r.dtype() == kFloat32);
    CHECK(values(r) == std::vector<double>{1.5, 2.5, 3.5});
    CHECK(add(i, tensor({1.0}, kFloat64)).dtype() == kFloat64);
    CHECK(add(tensor({1}, kInt32), tensor({1}, kFloat16)).dtype() == kFloat16);
  }
  SUBCASE("int / int -> the default float dtype, true division") {
    const Tensor r = div(tensor({7, -7, 1}, kInt64), tensor({2, 2, 3}, kInt32));
    CHECK(r.dtype() == kFloat32);
    CHECK(values(r) == std::vector<double>{3.5, -3.5, static_cast<double>(1.0f / 3.0f)});
    CHECK(div(i, 2.0).dtype() == kFloat32);
  }
  SUBCASE("int op int stays integral, widening as the table says") {
    CHECK(add(tensor({1}, kInt32), tensor({1}, kInt64)).dtype() == kInt64);
    CHECK(add(tensor({1}, kInt8), tensor({1}, kUInt8)).dtype() == kInt32);
    CHECK(values(mul(tensor({100}, kInt8), tensor({3}, kInt8))) == std::vector<double>{44});  // wraps: 300 - 256
    CHECK(mul(tensor({100}, kInt8), tensor({3}, kInt8)).dtype() == kInt8);
  }
  SUBCASE("bool + bool is logical or, bool * bool logical and") {
    const Tensor a = tensor({0, 0, 1, 1}, kBool), b = tensor({0, 1, 0, 1}, kBool);
    CHECK(add(a, b).dtype() == kBool);
    CHECK(add(a, b).to_vector<bool>() == std::vector<bool>{false, true, true, true});
    CHECK(mul(a, b).to_vector<bool>() == std::vector<bool>{false, false, false, true});
    CHECK(add(a, tensor({2}, kInt64)).dtype() == kInt64);
    CHECK(values(add(a, tensor({2}, kInt64))) == std::vector<double>{2, 2, 3, 3});
    CHECK_THROWS_AS(sub(a, b), Error);
    CHECK_THROWS_AS(neg(a), Error);
  }
  SUBCASE("a double never widens a floating tensor; a fractional one makes an int tensor float") {
    CHECK(add(tensor({1}, kFloat16), 1e-3).dtype() == kFloat16);
    CHECK(mul(tensor({1}, kBFloat16), 3.0).dtype() == kBFloat16);
    CHECK(add(i, 2.0).dtype() == kInt64);
    CHECK(add(tensor({1}, kInt32), 2.5).dtype() == kFloat32);
    CHECK(values(add(tensor({1, 2}, kInt32), 2.5)) == std::vector<double>{3.5, 4.5});
    CHECK(add(tensor({1}, kBool), 2.0).dtype() == kInt64);
    CHECK(values(add(tensor({1, 0}, kBool), 2.0)) == std::vector<double>{3, 2});
  }
  SUBCASE("float16 with bfloat16 meets at float32") {
    const Tensor r = add(tensor({1.5}, kFloat16), tensor({2.25}, kBFloat16));
    CHECK(r.dtype() == kFloat32);
    CHECK(r.item() == 3.75);
  }
}

TEST_CASE("comparisons give bool") {
  const Tensor a = tensor({1.0, 2.0, 3.0, kNaN});
  const Tensor b = tensor({1.0, 3.0, 2.0, kNaN});
  CHECK(eq(a, b).dtype() == kBool);
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(ne(a, b).to_vector<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(lt(a, b).to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK(gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true, false});
  CHECK(ge(a, b).to_vector<bool>() == std::vector<bool>{true, false, true, false});
  CHECK(gt(a, 1.5).to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(le(a, 2.0).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK(lt(a, 2.0).dtype() == kBool);
  // Mixed dtypes compare in the promoted dtype: 2 (int) == 2.0, and 2 < 2.5 is not truncated away.
  CHECK(eq(tensor({2, 3}, kInt64), tensor({2.0, 2.5})).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(lt(tensor({2}, kInt64), 2.5).to_vector<bool>() == std::vector<bool>{true});
  CHECK(eq(tensor({1, 2, 3}).view({3, 1}), tensor({1, 2, 3})).shape() == Shape{3, 3});
  CHECK(logical_not(tensor({0, 2, -1})).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(isfinite(tensor({1.0, kInf, -kInf, kNaN})).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(isfinite(tensor({1}, kInt64)).to_vector<bool>() == std::vector<bool>{true});
  CHECK(equal(tensor({1, 2}), tensor({1, 2}, kInt64)));
  CHECK_FALSE(equal(tensor({1, 2}), tensor({1, 2, 3})));
  CHECK(allclose(tensor({1.0, 2.0}), tensor({1.0, 2.00001})));
  CHECK_FALSE(allclose(tensor({1.0, 2.0}), tensor({1.0, 2.001})));
  CHECK_FALSE(allclose(tensor({kNaN}), tensor({kNaN})));
  CHECK(allclose(tensor({kNaN, kInf}), tensor({kNaN, kInf}), 1e-5, 1e-8, true));
}

TEST_CASE("where and masked_fill") {
  const Tensor cond = tensor({1, 0, 1}, kBool);
  CHECK(values(where(cond, tensor({1, 2, 3}), tensor({-1, -2, -3}))) == std::vector<double>{1, -2, 3});
  // Broadcast condition (3,1) against (1,2) values.
  const Tensor c2 = tensor({1, 0, 1}, kBool).view({3, 1});
  const Tensor r = where(c2, tensor({1, 2}).view({1, 2}), scalar_tensor(0.0));
  CHECK(r.shape() == Shape{3, 2});
  CHECK(values(r) == std::vector<double>{1, 2, 0, 0, 1, 2});
  // The two branches promote.
  CHECK(where(cond, tensor({1, 2, 3}, kInt64), tensor({0.5, 0.5, 0.5})).dtype() == kFloat32);
  CHECK(values(where(cond, tensor({1, 2, 3}, kFloat64), -9.0)) == std::vector<double>{1, -9, 3});
  CHECK_THROWS_WITH_AS(where(tensor({1.0}), tensor({1.0}), tensor({2.0})),
                       "[where] expected a bool condition, got float32", Error);

  const Tensor x = tensor({1, 2, 3, 4}).view({2, 2});
  const Tensor mask = tensor({0, 1, 1, 0}, kBool).view({2, 2});
  CHECK(values(masked_fill(x, mask, -1.0)) == std::vector<double>{1, -1, -1, 4});
  CHECK(values(masked_fill(x, tensor({1, 0}, kBool), 0.0)) == std::vector<double>{0, 2, 0, 4});  // broadcast mask
  CHECK(values(masked_fill(x, mask, -kInf))[1] == -kInf);
  // The result keeps x's dtype, as torch.masked_fill: the value is converted, not promoted.
  const Tensor xi = tensor({1, 2}, kInt64);
  CHECK(masked_fill(xi, tensor({1, 0}, kBool), 2.5).dtype() == kInt64);
  CHECK(values(masked_fill(xi, tensor({1, 0}, kBool), 2.5)) == std::vector<double>{2, 2});
  CHECK(masked_fill(tensor({1.0}, kFloat16), tensor({1}, kBool), 70000.0).item() == kInf);
  CHECK_THROWS_AS(masked_fill(x, tensor({0, 1, 1, 0}, kInt64).view({2, 2}), 0.0), Error);
}

TEST_CASE("clamp") {
  const Tensor x = tensor({-2.0, -0.5, 0.5, 2.0, kNaN});
  check_close(values(clamp(x, -1.0, 1.0)), {-1.0, -0.5, 0.5, 1.0, kNaN});
  check_close(values(clamp(x, 0.0, std::nullopt)), {0.0, 0.0, 0.5, 2.0, kNaN});
  check_close(values(clamp(x, std::nullopt, 0.0)), {-2.0, -0.5, 0.0, 0.0, kNaN});
  check_close(values(x.clamp(-0.5, -0.5)), {-0.5, -0.5, -0.5, -0.5, kNaN});
  const Tensor i = tensor({-5, 0, 5}, kInt64);
  CHECK(clamp(i, -2.0, 2.0).dtype() == kInt64);
  CHECK(values(clamp(i, -2.0, 2.0)) == std::vector<double>{-2, 0, 2});
  CHECK_THROWS_WITH_AS(clamp(x, std::nullopt, std::nullopt), "[clamp] at least one of min and max must be given",
                       Error);
}

TEST_CASE("unary ops against their closed forms") {
  check_unary([](const Tensor& t) { return neg(t); }, [](double v) { return -v; });
  check_unary([](const Tensor& t) { return abs(t); }, [](double v) { return std::fabs(v); });
  check_unary([](const Tensor& t) { return sign(t); }, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
  check_unary([](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); });
  check_unary([](const Tensor& t) { return log(t); }, [](double v) { return v < 0 ? kNaN : v == 0 ? -kInf : std::log(v); });
  check_unary([](const Tensor& t) { return sqrt(t); }, [](double v) { return v < 0 ? kNaN : std::sqrt(v); });
  check_unary([](const Tensor& t) { return rsqrt(t); }, [](double v) { return v < 0 ? kNaN : v == 0 ? kInf : 1 / std::sqrt(v); });
  check_unary([](const Tensor& t) { return relu(t); }, [](double v) { return v > 0 ? v : 0.0; });
  check_unary([](const Tensor& t) { return sigmoid(t); }, [](double v) { return 1 / (1 + std::exp(-v)); });
  check_unary([](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); });
  check_unary([](const Tensor& t) { return silu(t); }, [](double v) { return v / (1 + std::exp(-v)); });
  check_unary([](const Tensor& t) { return pow(t, 2.0); }, [](double v) { return v * v; });
  check_unary([](const Tensor& t) { return pow(t, 3.0); }, [](double v) { return v * v * v; });
  check_unary([](const Tensor& t) { return pow(t, 0.5); }, [](double v) { return v < 0 ? kNaN : std::sqrt(v); });
  check_unary([](const Tensor& t) { return pow(t, -1.0); }, [](double v) { return 1 / v; });
  check_unary([](const Tensor& t) { return pow(t, 0.0); }, [](double) { return 1.0; });
  // Integer inputs: neg/abs/sign/relu keep the dtype, the rest compute in the default float dtype.
  const Tensor i = tensor({-3, 0, 4}, kInt64);
  CHECK(neg(i).dtype() == kInt64);
  CHECK(values(abs(i)) == std::vector<double>{3, 0, 4});
  CHECK(values(sign(i)) == std::vector<double>{-1, 0, 1});
  CHECK(relu(i).dtype() == kInt64);
  CHECK(values(relu(i)) == std::vector<double>{0, 0, 4});
  CHECK(sqrt(i).dtype() == kFloat32);
  CHECK(values(sqrt(tensor({4, 9}, kInt64))) == std::vector<double>{2, 3});
  CHECK(sigmoid(i).dtype() == kFloat32);
  CHECK(values(pow(tensor({2, 3}, kInt64), 2.0)) == std::vector<double>{4, 9});
}

TEST_CASE("gelu, exact and tanh-approximated, at a few points") {
  // x·Φ(x), Φ from the error function's tabulated values.
  const Tensor x = tensor({-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0}, kFloat64);
  check_close(values(gelu(x)), {-0.04550026389635842, -0.15865525393145707, -0.15426876936299344, 0.0,
                                0.34573123063700656, 0.8413447460685429, 1.9544997361036416, 2.99595030590511},
              1e-14);
  std::vector<double> approx;
  for (double v : {-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0})
    approx.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
  check_close(values(gelu(x, true)), approx, 1e-14);
  CHECK(values(gelu(x, true))[5] == doctest::Approx(0.8411919906082768).epsilon(1e-14));
  // The approximation differs from the exact curve, by at most ~5e-4 here.
  CHECK(std::fabs(values(gelu(x, true))[5] - values(gelu(x))[5]) > 1e-4);
  // float32 input gives float32 values close to the same curve.
  const Tensor xf = tensor({1.0, -1.0});
  CHECK(gelu(xf).dtype() == kFloat32);
  check_close(values(gelu(xf)), {0.8413447460685429, -0.15865525393145707}, 1e-6);
}

TEST_CASE("maximum and minimum propagate NaN and broadcast") {
  const Tensor a = tensor({1.0, kNaN, 3.0, -1.0});
  const Tensor b = tensor({2.0, 0.0, kNaN, -2.0});
  check_close(values(maximum(a, b)), {2.0, kNaN, kNaN, -1.0});
  check_close(values(minimum(a, b)), {1.0, kNaN, kNaN, -2.0});
  CHECK(values(maximum(tensor({1, 5}, kInt64), tensor({3}, kInt64))) == std::vector<double>{3, 5});
  CHECK(maximum(tensor({1}, kInt64), tensor({0.5})).dtype() == kFloat32);
  CHECK(values(minimum(tensor({1, 2, 3}).view({3, 1}), tensor({2, 0}))) == std::vector<double>{1, 0, 2, 0, 2, 0});
}

TEST_CASE("pow with a tensor exponent, operators") {
  check_close(values(pow(tensor({2.0, 4.0, 9.0}, kFloat64), tensor({3.0, 0.5, -1.0}, kFloat64))), {8.0, 2.0, 1.0 / 9});
  CHECK(pow(tensor({2}, kInt64), tensor({3}, kInt64)).dtype() == kFloat32);
  const Tensor a = tensor({6, 8}), b = tensor({2, 4});
  CHECK(values(a + b) == std::vector<double>{8, 12});
  CHECK(values(a - b) == std::vector<double>{4, 4});
  CHECK(values(a * b) == std::vector<double>{12, 32});
  CHECK(values(a / b) == std::vector<double>{3, 2});
  CHECK(values(a + 1.0) == std::vector<double>{7, 9});
  CHECK(values(1.0 + a) == std::vector<double>{7, 9});
  CHECK(values(a - 1.0) == std::vector<double>{5, 7});
  CHECK(values(10.0 - a) == std::vector<double>{4, 2});
  CHECK(values(a * 0.5) == std::vector<double>{3, 4});
  CHECK(values(0.5 * a) == std::vector<double>{3, 4});
  CHECK(values(a / 2.0) == std::vector<double>{3, 4});
  CHECK(values(24.0 / a) == std::vector<double>{4, 3});
  CHECK(values(-a) == std::vector<double>{-6, -8});
  CHECK(values(add(a, b, 2.0)) == std::vector<double>{10, 16});
  CHECK(values(sub(a, b, 0.5)) == std::vector<double>{5, 6});
  // Method forms.
  CHECK(values(a.add(b).sub(b).mul(b).div(b)) == std::vector<double>{6, 8});
  check_close(values(tensor({4.0}).sqrt().exp().log()), {2.0}, 1e-6);
}

TEST_CASE("in-place arithmetic writes through and keeps the dtype") {
  Tensor a = tensor({1, 2, 3}, kInt64);
  a.add_(tensor({1, 1, 1}, kInt64));
  a.mul_(2.0);
  CHECK(values(a) == std::vector<double>{4, 6, 8});
  CHECK_THROWS_WITH_AS(a.div_(tensor({2, 2, 2}, kInt64)),
                       "[div_] result type float32 cannot be written into a int64 tensor", Error);
  Tensor f = zeros({2, 2});
  f.add_(tensor({1, 2}), 3.0);  // broadcasts the other operand, scaled by alpha
  CHECK(values(f) == std::vector<double>{3, 6, 3, 6});
  f.sub_(ones({2, 2}));
  f.div_(2.0);
  f.clamp_(1.5, 2.0);
  CHECK(values(f) == std::vector<double>{1.5, 2, 1.5, 2});
  CHECK_THROWS_AS(f.add_(ones({3})), Error);
  Tensor h = ones({2}, kFloat16);
  h.add_(tensor({1e-3, 1e-4}));  // the sum is rounded to float16 on store
  CHECK(values(h) == std::vector<double>{half_to_float(float_to_half(1.001f)), 1.0});
}

// Note [In place without a copy]: where autograd records nothing, add_/sub_/mul_/div_/clamp_ write into
// self's own memory, with the bits of the out-of-place op; a shifted view of self as the other
// operand still reads the values from before the write.
TEST_CASE("in-place arithmetic and clamp_ run in self's memory, with the out-of-place op's bits") {
  // Odd, and large enough (at least 64 KiB in every dtype) that a temporary as large as self
  // would come from the caching allocator, whose counters see it.
  constexpr int64_t n = 33037;
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32}) {
    CAPTURE(dtype);
    const bool floating = is_floating(dtype);
    Generator g(3);
    const Tensor x = floating ? testing::random({n}, 1).to(dtype) : randint(-20, 21, {n}, dtype, &g);
    // Divisors stay away from zero.
    const Tensor same = floating ? add(testing::random({n}, 2).abs(), 0.5).to(dtype) : randint(1, 10, {n}, dtype, &g);
    const Tensor row = same.narrow(0, 0, 1);  // broadcast along self
    const Tensor scalar = scalar_tensor(floating ? 1.75 : 3.0, dtype);
    struct Case {
      const char* name;
      std::function<Tensor(const Tensor&, const Tensor&)> out_of_place;
      std::function<void(Tensor&, const Tensor&)> in_place;
    };
    std::vector<Case> cases = {
        {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](Tensor& a, const Tensor& b) { a.add_(b); }},
        {"add alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.0); },
         [](Tensor& a, const Tensor& b) { a.add_(b, 2.0); }},
        {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](Tensor& a, const Tensor& b) { a.sub_(b); }},
        {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](Tensor& a, const Tensor& b) { a.mul_(b); }},
    };
    if (floating)
      cases.push_back(
          {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](Tensor& a, const Tensor& b) { a.div_(b); }});
    for (const auto& c : cases)
      for (const Tensor* other : {&same, &row, &scalar}) {
        const std::string op = c.name;
        const int64_t other_numel = other->numel();
        CAPTURE(op);
        CAPTURE(other_numel);
        const Tensor expected = c.out_of_place(x, *other);
        Tensor y = x.clone();
        const void* memory = y.data_ptr();
        const uint64_t version = y.version();
        cpu_allocator::reset_counters();
        c.in_place(y, *other);
        // No temporary of self's size (alpha scales a full-size other into one of its own first).
        if (op != "add alpha" || other_numel == 1) CHECK(cpu_allocator::stats().hits + cpu_allocator::stats().misses == 0);
        CHECK(y.data_ptr() == memory);
        CHECK(y.version() == version + 1);
        CHECK(y.dtype() == dtype);
        CHECK(values(y) == values(expected));
        // Self as its own other operand.
        Tensor z = x.clone();
        c.in_place(z, z);
        CHECK(values(z) == values(c.out_of_place(x, x)));
      }
    // clamp_, one bound or both.
    for (const auto& [lo, hi] : std::vector<std::pair<std::optional<double>, std::optional<double>>>{
             {-0.5, 0.75}, {std::nullopt, 2.0}, {-3.0, std::nullopt}}) {
      const Tensor expected = clamp(x, lo, hi);
      Tensor y = x.clone();
      const void* memory = y.data_ptr();
      cpu_allocator::reset_counters();
      y.clamp_(lo, hi);
      CHECK(cpu_allocator::stats().hits + cpu_allocator::stats().misses == 0);
      CHECK(y.data_ptr() == memory);
      CHECK(values(y) == values(expected));
    }
  }
  // A shifted view of self: every element reads its neighbour's value from before the write.
  Tensor v = arange(0, 10, 1, kFloat32);
  v.narrow(0, 1, 9).add_(v.narrow(0, 0, 9));
  CHECK(values(v) == std::vector<double>{0, 1, 3, 5, 7, 9, 11, 13, 15, 17});
  Tensor w = arange(0, 10, 1, kFloat32);
  w.narrow(0, 0, 9).mul_(w.narrow(0, 1, 9));
  CHECK(values(w) == std::vector<double>{0, 2, 6, 12, 20, 30, 42, 56, 72, 9});
}
