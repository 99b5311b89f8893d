// Factories and whole-tensor copies: values, dtypes and shapes of every creation function;
// seeded random factories are reproducible and have the right distribution; from_buffer copies
// while from_blob aliases the caller's memory; to / clone / copy_ / item / to_vector.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "tensor/all.h"

using namespace weft;

TEST_CASE("empty, zeros, ones, full") {
  const Tensor e = empty({2, 3});
  CHECK(e.shape() == Shape{2, 3});
  CHECK(e.dtype() == kFloat32);
  CHECK(e.device() == kCPU);
  CHECK(e.is_contiguous());
  CHECK(zeros({2, 2}).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(ones({3}, kInt32).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1});
  CHECK(ones({3}, kInt32).dtype() == kInt32);
  CHECK(full({2}, 2.5, kFloat64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(full({2}, -3.7, kInt64).to_vector<int64_t>() == std::vector<int64_t>{-3, -3});  // truncates
  CHECK(full({1}, 0.1, kBFloat16).item<float>() == bfloat16_to_float(float_to_bfloat16(0.1f)));
  CHECK(zeros({0, 3}).numel() == 0);
  CHECK(scalar_tensor(4.0).dim() == 0);
  CHECK(scalar_tensor(4.0).item() == 4.0);
  const Tensor like = full_like(ones({2}, kInt8), 7.0);
  CHECK(like.dtype() == kInt8);
  CHECK(like.to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK(zeros_like(ones({2, 1}, kFloat64)).dtype() == kFloat64);
  CHECK(ones({2}, TensorOptions().requires_grad()).requires_grad());
  CHECK_THROWS_WITH_AS(empty({2, -1}), "[empty] sizes must be non-negative, got (2, -1)", Error);
}

TEST_CASE("arange") {
  SUBCASE("integer arguments give int64") {
    const Tensor a = arange(5);
    CHECK(a.dtype() == kInt64);
    CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
    CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
    CHECK(arange(3, 3).numel() == 0);
  }
  SUBCASE("a fractional argument gives the default dtype") {
    const Tensor a = arange(0.0, 1.0, 0.25);
    CHECK(a.dtype() == kFloat32);
    CHECK(a.to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f});
    CHECK(arange(0.5).to_vector<float>() == std::vector<float>{0.0f});
    CHECK(arange(0.0, 1.0, 0.1).numel() == 10);
  }
  SUBCASE("negative fractional step") {
    CHECK(arange(5.0, 0.0, -1.5).to_vector<float>() == std::vector<float>{5.0f, 3.5f, 2.0f, 0.5f});
  }
  SUBCASE("an explicit dtype wins") {
    CHECK(arange(3, kFloat64).dtype() == kFloat64);
    CHECK(arange(0.0, 2.0, 0.5, kInt32).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 1, 1});
  }
  SUBCASE("errors") {
    CHECK_THROWS_WITH_AS(arange(0.0, 1.0, 0.0), "[arange] step must be nonzero", Error);
    CHECK_THROWS_WITH_AS(arange(0.0, 5.0, -1.0),
                         "[arange] upper bound and step sign are inconsistent: start 0, end 5, step -1", Error);
    CHECK_THROWS_WITH_AS(arange(0.0, INFINITY), "[arange] bounds must be finite", Error);
    // A count beyond what a tensor can hold is reported as such (it used to wrap to a negative size).
    CHECK_THROWS_WITH_AS(arange(0.0, 1e300), "[arange] the range from 0 to 1e+300 in steps of 1 has 1e+300 values, "
                         "more than a tensor can hold", Error);
    CHECK_THROWS_WITH_AS(arange(-1e30, 1e30, 0.5), "[arange] the range from -1e+30 to 1e+30 in steps of 0.5 has "
                         "4e+30 values, more than a tensor can hold", Error);
  }
}

TEST_CASE("linspace hits both endpoints exactly") {
  const Tensor a = linspace(-3.3, 7.1, 11);
  CHECK(a.dtype() == kFloat32);
  const auto v = a.to_vector<float>();
  REQUIRE(v.size() == 11);
  CHECK(v.front() == static_cast<float>(-3.3));
  CHECK(v.back() == static_cast<float>(7.1));
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(-3.3 + 1.04 * static_cast<double>(i)).epsilon(1e-6));
  const auto d = linspace(0.0, 1.0, 7, kFloat64).to_vector<double>();
  CHECK(d.front() == 0.0);
  CHECK(d.back() == 1.0);
  CHECK(d[3] == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(linspace(2.0, 5.0, 1).to_vector<float>() == std::vector<float>{2.0f});
  CHECK(linspace(2.0, 5.0, 0).numel() == 0);
  CHECK(linspace(1.0, -1.0, 3).to_vector<float>() == std::vector<float>{1.0f, 0.0f, -1.0f});
  CHECK_THROWS_AS(linspace(0.0, 1.0, -1), Error);
}

TEST_CASE("eye") {
  CHECK(eye(3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  const Tensor r = eye(2, 3, kInt64);
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.dtype() == kInt64);
  CHECK(r.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 1, 0});
  CHECK(eye(3, 2).to_vector<float>() == std::vector<float>{1, 0, 0, 1, 0, 0});
  CHECK(eye(0).numel() == 0);
}

TEST_CASE("random factories are reproducible under a seed") {
  Generator g1(42), g2(42), g3(43);
  const auto a = rand({64}, {}, &g1).to_vector<float>();
  const auto b = rand({64}, {}, &g2).to_vector<float>();
  const auto c = rand({64}, {}, &g3).to_vector<float>();
  CHECK(a == b);
  CHECK(a != c);
  for (float x : a) {
    CHECK(x >= 0.0f);
    CHECK(x < 1.0f);
  }
  // The stream continues: a second draw differs from the first.
  CHECK(rand({64}, {}, &g1).to_vector<float>() != a);

  manual_seed(7);
  const auto d = randn({32}).to_vector<float>();
  manual_seed(7);
  CHECK(randn({32}).to_vector<float>() == d);
  manual_seed(8);
  CHECK(randn({32}).to_vector<float>() != d);

  Generator h1(5), h2(5);
  CHECK(randint(0, 100, {50}, {}, &h1).to_vector<int64_t>() == randint(0, 100, {50}, {}, &h2).to_vector<int64_t>());
  CHECK(randperm(20, &h1).to_vector<int64_t>() == randperm(20, &h2).to_vector<int64_t>());
}

TEST_CASE("randint covers exactly [low, high)") {
  Generator g(1);
  const Tensor r = randint(-3, 4, {5000}, {}, &g);
  CHECK(r.dtype() == kInt64);
  const auto v = r.to_vector<int64_t>();
  const std::set<int64_t> seen(v.begin(), v.end());
  CHECK(seen == std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3});
  CHECK(randint(0, 2, {4}, kUInt8, &g).dtype() == kUInt8);
  CHECK_THROWS_WITH_AS(randint(3, 3, {1}), "[randint] expected low < high, got low 3 and high 3", Error);
}

TEST_CASE("randn has mean 0 and std 1; rand has mean 1/2 and variance 1/12") {
  Generator g(2024);
  const int n = 100000;
  const auto v = randn({n}, kFloat64, &g).to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) {
    s += x;
    s2 += x * x;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  // Standard errors: 1/√n ≈ 0.0032 for the mean, √(2/n) ≈ 0.0045 for the variance; 5σ bounds.
  CHECK(std::fabs(mean) < 0.016);
  CHECK(std::fabs(std::sqrt(var) - 1.0) < 0.012);
  // Tails: about 4.55% of samples lie beyond 2σ.
  const auto beyond = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) > 2.0; });
  CHECK(static_cast<double>(beyond) / n == doctest::Approx(0.0455).epsilon(0.08));

  const auto u = rand({n}, kFloat64, &g).to_vector<double>();
  double us = 0, us2 = 0;
  for (double x : u) {
    us += x;
    us2 += x * x;
  }
  CHECK(us / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(us2 / n - (us / n) * (us / n) == doctest::Approx(1.0 / 12).epsilon(0.02));
  CHECK_THROWS_AS(randn({2}, kInt64), Error);
  CHECK_THROWS_AS(rand({2}, kBool), Error);
}

TEST_CASE("randperm is a permutation") {
  Generator g(3);
  auto p = randperm(100, &g).to_vector<int64_t>();
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(100);
  for (int64_t i = 0; i < 100; ++i) expected[static_cast<size_t>(i)] = i;
  CHECK(sorted == expected);
  CHECK(p != expected);  // 1/100! chance of a false failure
  CHECK(randperm(0, &g).numel() == 0);
}

TEST_CASE("from_vector and tensor({...})") {
  const Tensor f = from_vector(std::vector<double>{1.5, -2.0, 3.0, 4.0}, {2, 2});
  CHECK(f.dtype() == kFloat32);  // floating values take the default dtype
  CHECK(f.shape() == Shape{2, 2});
  CHECK(f.to_vector<double>() == std::vector<double>{1.5, -2.0, 3.0, 4.0});
  const Tensor i = from_vector(std::vector<int32_t>{1, 2, 3}, {3});
  CHECK(i.dtype() == kInt32);  // integers keep their own dtype
  CHECK(from_vector(std::vector<uint8_t>{255}, {1}).to_vector<int64_t>() == std::vector<int64_t>{255});
  CHECK(from_vector(std::vector<float>{0.1f}, {1}, kFloat64).item() == static_cast<double>(0.1f));
  CHECK(from_vector(std::vector<int64_t>{}, {0}).numel() == 0);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), "[from_vector] 3 values cannot fill shape (2, 2)",
                       Error);
  const Tensor t = tensor({1, 2, 3});
  CHECK(t.dtype() == kFloat32);
  CHECK(t.shape() == Shape{3});
  CHECK(tensor({1, 2}, kInt64).dtype() == kInt64);
  CHECK(tensor({0.1}, kFloat64).item() == 0.1);  // no detour through float32
}

TEST_CASE("from_buffer copies; from_blob aliases the caller's memory") {
  std::vector<float> buffer{1, 2, 3, 4, 5, 6};
  const Tensor copied = from_buffer(buffer.data(), {2, 3}, kFloat32);
  Tensor aliased = from_blob(buffer.data(), {2, 3}, kFloat32);
  CHECK(aliased.data_ptr() == buffer.data());
  buffer[0] = 100;
  CHECK(copied.to_vector<float>()[0] == 1.0f);
  CHECK(aliased.to_vector<float>()[0] == 100.0f);
  aliased.select(1, 2).fill_(-1.0);
  CHECK(buffer == std::vector<float>{100, 2, -1, 4, 5, -1});
  aliased.mul_(2.0);
  CHECK(buffer == std::vector<float>{200, 4, -2, 8, 10, -2});
  CHECK(copied.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  int64_t raw[2] = {7, -8};
  CHECK(from_buffer(raw, {2}, kInt64).to_vector<int64_t>() == std::vector<int64_t>{7, -8});
  CHECK_THROWS_AS(from_buffer(nullptr, {2}, kFloat32), Error);
}

TEST_CASE("to(dtype), clone, copy_ (broadcasting, converting), item, to_vector") {
  const Tensor a = tensor({1.5, -2.5, 3.0});
  const Tensor i = a.to(kInt32);
  CHECK(i.dtype() == kInt32);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3});

  Tensor c = a.clone();
  CHECK(c.storage() != a.storage());
  c.fill_(0.0);
  CHECK(a.to_vector<float>() == std::vector<float>{1.5f, -2.5f, 3.0f});
  const Tensor ct = arange(6, kFloat32).view({2, 3}).t().clone();  // clone of a view is contiguous
  CHECK(ct.is_contiguous());
  CHECK(ct.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});

  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(tensor({1, 2, 3}));  // (3) broadcasts over the rows, float32 -> float64
  CHECK(dst.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  dst.copy_(tensor({7, 8}).view({2, 1}));
  CHECK(dst.to_vector<double>() == std::vector<double>{7, 7, 7, 8, 8, 8});
  Tensor idst = zeros({2}, kInt64);
  idst.copy_(tensor({2.9, -2.9}));
  CHECK(idst.to_vector<int64_t>() == std::vector<int64_t>{2, -2});
  Tensor tdst = zeros({3, 2});
  tdst.t().copy_(arange(6, kFloat32).view({2, 3}));  // into a non-contiguous view
  CHECK(tdst.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_AS(dst.copy_(ones({3, 3})), Error);

  CHECK(scalar_tensor(2.5).item() == 2.5);
  CHECK(tensor({7}, kInt64).item<int64_t>() == 7);
  CHECK(tensor({3.9}).item<int32_t>() == 3);
  CHECK(ones({1, 1, 1}).item<float>() == 1.0f);
  CHECK_THROWS_WITH_AS(ones({2}).item(), "[item] expected a tensor with one element, got shape (2,)", Error);
  CHECK(arange(6, kFloat64).view({2, 3}).t().to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  CHECK(tensor({0, 2}).to_vector<bool>() == std::vector<bool>{false, true});
}
