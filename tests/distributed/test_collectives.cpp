// The collectives on Gloo at 1, 2, 3 and 4 ranks: every op × dtype × size (0, 1, N−1, odd,
// large) against closed forms. Inputs are small integers, so float sums are exact and every rank
// can compute the expected result itself; narrow floats are also checked on random values against
// a float32 reference, within one bfloat16 rounding per combination. The compressing comm hooks'
// cast-and-divide is checked on hand-rounded values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "harness.h"
#include "thread_names.h"
#include "distributed/all.h"
#include "distributed/reduce_kernels.h"

using namespace weft;
using distributed::ReduceOp;

namespace {

Tensor filled(int64_t n, DType dtype, const std::function<double(int64_t)>& f) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return from_vector(v, {n}, dtype);
}

void expect_equal(const Tensor& got, const Tensor& expected, const std::string& what) {
  test::require(equal(got, expected), "[" + what + "] wrong result: got " + got.narrow(0, 0, std::min<int64_t>(
      got.numel(), 8)).to_string() + " expected " + expected.narrow(0, 0, std::min<int64_t>(expected.numel(), 8)).to_string());
}

}  // namespace

WEFT_RANK_WORKER(collectives) {
  auto pg = test::init_group();
  const int n = pg->size();
  const int r = pg->rank();
  const double tri = n * (n + 1) / 2.0;
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32}) {
    std::vector<int64_t> counts = {0, 1, 13};
    if (n > 1) counts.push_back(n - 1);
    if (dtype == kFloat32) counts.push_back(100'003);  // several Gloo segments
    for (int64_t count : counts) {
      const std::string tag = std::string(dtype_name(dtype)) + " x " + std::to_string(count);
      const auto k = [](int64_t i) { return static_cast<double>(i % 7 + 1); };

      Tensor sum = filled(count, dtype, [&](int64_t i) { return (r + 1) * k(i); });
      pg->all_reduce(sum, ReduceOp::Sum)->wait();
      expect_equal(sum, filled(count, dtype, [&](int64_t i) { return tri * k(i); }), "all_reduce sum " + tag);

      Tensor mx = filled(count, dtype, [&](int64_t i) { return (r + 1) * k(i); });
      pg->all_reduce(mx, ReduceOp::Max)->wait();
      expect_equal(mx, filled(count, dtype, [&](int64_t i) { return n * k(i); }), "all_reduce max " + tag);

      Tensor mn = filled(count, dtype, [&](int64_t i) { return (r + 1) * k(i); });
      pg->all_reduce(mn, ReduceOp::Min)->wait();
      expect_equal(mn, filled(count, dtype, [&](int64_t i) { return k(i); }), "all_reduce min " + tag);

      if (is_floating(dtype)) {
        Tensor avg = filled(count, dtype, [&](int64_t i) { return (r + 1) * k(i); });
        pg->all_reduce(avg, ReduceOp::Avg)->wait();
        expect_equal(avg, filled(count, dtype, [&](int64_t i) { return (n + 1) / 2.0 * k(i); }), "all_reduce avg " + tag);
      }

      const Tensor mine = filled(count, dtype, [&](int64_t i) { return r * 8 + i % 8; });
      Tensor gathered = zeros({count * n}, dtype);
      pg->all_gather(gathered, mine)->wait();
      expect_equal(gathered, filled(count * n, dtype, [&](int64_t p) { return (p / std::max<int64_t>(count, 1)) * 8 + (p % std::max<int64_t>(count, 1)) % 8; }),
                   "all_gather " + tag);

      const Tensor big = filled(count * n, dtype, [&](int64_t p) { return (r + 1) * static_cast<double>(p % 5 + 1); });
      Tensor scattered = zeros({count}, dtype);
      pg->reduce_scatter(scattered, big, ReduceOp::Sum)->wait();
      expect_equal(scattered, filled(count, dtype, [&](int64_t i) { return tri * static_cast<double>((r * count + i) % 5 + 1); }),
                   "reduce_scatter sum " + tag);
      if (is_floating(dtype)) {
        pg->reduce_scatter(scattered, big, ReduceOp::Avg)->wait();
        expect_equal(scattered, filled(count, dtype, [&](int64_t i) { return (n + 1) / 2.0 * static_cast<double>((r * count + i) % 5 + 1); }),
                     "reduce_scatter avg " + tag);
      }
      pg->reduce_scatter(scattered, big, ReduceOp::Max)->wait();
      expect_equal(scattered, filled(count, dtype, [&](int64_t i) { return n * static_cast<double>((r * count + i) % 5 + 1); }),
                   "reduce_scatter max " + tag);

      const int root = n - 1;
      Tensor b = filled(count, dtype, [&](int64_t i) { return r == root ? 42.0 + i % 3 : -1.0; });
      pg->broadcast(b, root)->wait();
      expect_equal(b, filled(count, dtype, [&](int64_t i) { return 42.0 + i % 3; }), "broadcast " + tag);
    }
  }
  pg->barrier()->wait();

  // Max and min with a NaN on one rank, and zeros of both signs: every rank gets the NaN, and
  // +0 / −0 as IEEE 754-2019's maximum / minimum order them, whatever the ranks' order.
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> mine = {r == n - 1 ? nan : r, r == 0 ? nan : 1.0, r % 2 == 1 ? -0.0 : 0.0,
                                      r % 2 == 1 ? -0.0 : 0.0};
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      const std::string tag = std::string(op == ReduceOp::Max ? "max" : "min") + " of NaN and ±0, " + std::string(dtype_name(dtype));
      Tensor x = from_vector(mine, {4}, dtype);
      pg->all_reduce(x, op)->wait();
      const std::vector<double> got = x.to_vector<double>();
      const bool negative_zero = op == ReduceOp::Min && n > 1;
      test::require(std::isnan(got[0]) && std::isnan(got[1]), "[" + tag + "] a NaN was lost: " + x.to_string());
      for (size_t i : {size_t{2}, size_t{3}})
        test::require(got[i] == 0.0 && std::signbit(got[i]) == negative_zero, "[" + tag + "] wrong zero: " + x.to_string());
    }
  }

  // Random narrow-float sums against float32: one rounding per hop of the ring, so the error is
  // at most about (N−1) bfloat16 half-ulps of the running sum's magnitude.
  for (DType dtype : {kBFloat16, kFloat16}) {
    const int64_t count = 1000;
    auto value = [](int rank, int64_t i) {
      Generator g(static_cast<uint64_t>(rank * 100'000 + i));
      return g.uniform() * 2 - 1;
    };
    Tensor x = filled(count, dtype, [&](int64_t i) { return value(r, i); });
    pg->all_reduce(x, ReduceOp::Sum)->wait();
    const double ulp = dtype == kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    const auto got = x.to_vector<double>();
    for (int64_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (int q = 0; q < n; ++q) {
        const double v = filled(1, dtype, [&](int64_t) { return value(q, i); }).item<double>();
        exact += v;
        magnitude += std::abs(v);
      }
      test::require(std::abs(got[static_cast<size_t>(i)] - exact) <= n * ulp * magnitude + 1e-12,
                    "narrow all_reduce drifted at " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
                        std::to_string(exact));
    }
  }

  // Async: several collectives in flight at once complete in issue order with the right values.
  std::vector<Tensor> xs;
  std::vector<std::shared_ptr<distributed::Work>> works;
  for (int i = 0; i < 8; ++i) {
    xs.push_back(full({5}, static_cast<double>(i + r)));
    works.push_back(pg->all_reduce(xs.back(), ReduceOp::Sum));
  }
  for (int i = 0; i < 8; ++i) {
    works[static_cast<size_t>(i)]->wait();
    test::require(works[static_cast<size_t>(i)]->is_completed(), "a waited Work is not completed");
    expect_equal(xs[static_cast<size_t>(i)], full({5}, n * i + n * (n - 1) / 2.0), "async all_reduce");
  }

  // The group's threads carry names (top, perf and gdb show them): the collectives' thread and,
  // with more than one rank, the heartbeat thread.
  const std::set<std::string> names = thread_names();
  test::require(names.count("weft-comm") == 1, "no thread named weft-comm");
  test::require(names.count("weft-health") == (n > 1 ? 1u : 0u), "wrong count of weft-health threads");
  // Gloo's event loop (one thread, with more than one rank) never preempts the others on waking
  // (Note [Gloo's event loop never preempts]); every other thread keeps the default policy.
  const auto policies = thread_policies();
  test::require(policies.count("gloo-loop") == (n > 1 ? 1u : 0u), "wrong count of gloo-loop threads");
  for (const auto& [name, policy] : policies)
    test::require(policy == (name == "gloo-loop" ? SCHED_BATCH : SCHED_OTHER),
                  "thread " + name + " runs under scheduling policy " + std::to_string(policy));
  return 0;
}

TEST_CASE("collectives at 1, 2, 3 and 4 ranks match their closed forms for every dtype and size") {
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "collectives");
    INFO(run.logs());
    CHECK(run.ok());
  }
}

// Two ranks all-reduce by one exchange (Note [All-reduce of a pair]): each element must be the
// single IEEE operation on the two inputs, on both ranks, for sizes of one segment and of many
// with a short last one.
WEFT_RANK_WORKER(pair_all_reduce) {
  auto pg = test::init_group();
  const auto input = [](int rank, int64_t count) {
    Generator g(static_cast<uint64_t>(rank + 1) * 7919);
    return rand({count}, kFloat32, &g) * 2.0 - 1.0;
  };
  for (int64_t count : {int64_t{5}, int64_t{1'000'003}}) {
    const std::vector<float> a = input(0, count).to_vector<float>(), b = input(1, count).to_vector<float>();
    const std::vector<float> own = pg->rank() == 0 ? a : b;
    const auto check = [&](ReduceOp op, DType dtype, const std::function<float(float, float)>& expected_of,
                           const std::string& what) {
      std::vector<float> expected(own.size());
      for (size_t i = 0; i < own.size(); ++i) expected[i] = expected_of(a[i], b[i]);
      Tensor x = from_vector(own, {count}).to(dtype);
      pg->all_reduce(x, op)->wait();
      expect_equal(x, from_vector(expected, {count}).to(dtype), what + " x " + std::to_string(count));
    };
    check(ReduceOp::Sum, kFloat32, [](float x, float y) { return x + y; }, "pair sum");
    check(ReduceOp::Avg, kFloat32, [](float x, float y) { return (x + y) / 2.0f; }, "pair avg");
    check(ReduceOp::Max, kFloat32, [](float x, float y) { return std::max(x, y); }, "pair max");
    // bfloat16 inputs: widened, added in float32, rounded once.
    const auto widened = [](float v) { return Tensor(from_vector(std::vector<float>{v}, {1}).to(kBFloat16)).item<float>(); };
    if (count < 100) check(ReduceOp::Sum, kBFloat16, [&](float x, float y) { return widened(x) + widened(y); }, "pair bf16 sum");
  }
  return 0;
}

TEST_CASE("two ranks all-reduce in one exchange: each element is one IEEE operation on both inputs, on both ranks") {
  const auto run = test::run_ranks(2, "pair_all_reduce");
  INFO(run.logs());
  CHECK(run.ok());
}

WEFT_RANK_WORKER(bad_arguments) {
  auto pg = test::init_group();
  const int n = pg->size();
  int refused = 0;
  const auto expect_refusal = [&](const std::function<void()>& f, const std::string& fragment) {
    try {
      f();
    } catch (const Error& e) {
      test::require(std::string(e.what()).find(fragment) != std::string::npos,
                    "error '" + std::string(e.what()) + "' lacks '" + fragment + "'");
      ++refused;
      return;
    }
    test::require(false, "expected an error containing '" + fragment + "'");
  };
  expect_refusal([&] { pg->all_gather(zeros({5}), zeros({2})); }, "[all_gather] expected an output of");
  expect_refusal([&] { pg->reduce_scatter(zeros({2}), zeros({2 * n + 1})); }, "[reduce_scatter] expected an input of");
  expect_refusal([&] { pg->all_reduce(zeros({4, 4}).t()); }, "[all_reduce] expected a contiguous");
  expect_refusal([&] { pg->all_reduce(zeros({3}, kBool)); }, "cannot reduce bool");
  expect_refusal([&] { pg->all_reduce(zeros({3}, kInt64), ReduceOp::Avg); }, "avg needs a floating tensor");
  expect_refusal([&] { pg->broadcast(zeros({3}), n); }, "[broadcast] expected a root rank");
  expect_refusal([&] { pg->all_gather(zeros({2 * n}, kFloat32), zeros({2}, kFloat64)); }, "dtypes differ");
  // The group still works after refused calls: nothing was issued.
  Tensor x = ones({3});
  pg->all_reduce(x)->wait();
  expect_equal(x, full({3}, n), "all_reduce after refusals");
  return refused == 7 ? 0 : 1;
}

TEST_CASE("collectives refuse mismatched buffers before anything is sent") {
  const auto run = test::run_ranks(2, "bad_arguments");
  INFO(run.logs());
  CHECK(run.ok());
}

TEST_CASE("max and min combine NaN, ±0 and infinities to the same bits in either operand order") {
  using distributed::detail::combine;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {nan, -nan, inf, -inf, 0.0, -0.0, 1.5, -2.0};
  for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      for (double u : values) {
        for (double v : values) {
          CAPTURE(dtype);
          CAPTURE(u);
          CAPTURE(v);
          const Tensor a = from_vector(std::vector<double>{u}, {1}, dtype), b = from_vector(std::vector<double>{v}, {1}, dtype);
          Tensor ab = zeros({1}, dtype), ba = zeros({1}, dtype);
          combine(dtype, op, ab.data_ptr(), a.data_ptr(), b.data_ptr(), 1);
          combine(dtype, op, ba.data_ptr(), b.data_ptr(), a.data_ptr(), 1);
          const double x = ab.item<double>(), y = ba.item<double>();
          if (std::isnan(u) || std::isnan(v)) {
            CHECK(std::isnan(x));
            CHECK(std::isnan(y));
            continue;
          }
          // The expected value, from the order −∞ < −2 < −0 < +0 < 1.5 < +∞.
          const auto rank = [](double t) { return t == 0.0 ? (std::signbit(t) ? -0.5 : 0.5) * 1e-300 : t; };
          const double expected = (op == ReduceOp::Max) == (rank(u) >= rank(v)) ? u : v;
          CHECK(x == expected);
          CHECK(std::signbit(x) == std::signbit(expected));
          CHECK(std::memcmp(ab.data_ptr(), ba.data_ptr(), ab.nbytes()) == 0);
        }
      }
    }
  }
}

TEST_CASE("sum_and_divide has the bits of combine then divide, rounding the sum before dividing it") {
  using distributed::detail::combine;
  using distributed::detail::divide;
  using distributed::detail::sum_and_divide;
  // float16: 2048 + 1 is a tie that rounds to the even 2048, and 2048 / 3 rounds to 682.5 (0x6155);
  // dividing the exact sum 2049 would give 683 (0x6156).
  const std::vector<uint16_t> big = {0x6800}, one = {0x3C00};
  std::vector<uint16_t> half_out(1);
  sum_and_divide(kFloat16, half_out.data(), big.data(), one.data(), 1, 3.0);
  CHECK(half_out[0] == 0x6155);
  // Every dtype a pair averages, by 2 (a multiply) and 3 (a division), against the two passes.
  Generator g(11);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32}) {
    for (double divisor : {2.0, 3.0}) {
      CAPTURE(dtype);
      CAPTURE(divisor);
      const Tensor a = (randn({1001}, kFloat32, &g) * 100.0).to(dtype), b = (randn({1001}, kFloat32, &g) * 100.0).to(dtype);
      Tensor fused = zeros({1001}, dtype), two_pass = zeros({1001}, dtype);
      sum_and_divide(dtype, fused.data_ptr(), a.data_ptr(), b.data_ptr(), 1001, divisor);
      combine(dtype, ReduceOp::Sum, two_pass.data_ptr(), a.data_ptr(), b.data_ptr(), 1001);
      divide(dtype, two_pass.data_ptr(), 1001, divisor);
      CHECK(std::memcmp(fused.data_ptr(), two_pass.data_ptr(), fused.nbytes()) == 0);
    }
  }
  // In place over the first operand, as the pair all-reduce calls it.
  std::vector<float> mine = {1.0f, 3.0f}, peers = {2.0f, 4.0f};
  sum_and_divide(kFloat32, mine.data(), mine.data(), peers.data(), 2, 2.0);
  CHECK(mine == std::vector<float>{1.5f, 3.5f});
}

TEST_CASE("cast_and_divide rounds to the narrow float, divides in it and rounds again, as PyTorch's compress hooks") {
  using distributed::detail::cast_and_divide;
  // bfloat16, by 2 (a multiply by 1/2) and by 3 (a division). 1.00390625 = 1 + 2^-8 is a tie between
  // 1.0 (0x3F80, even) and 0x3F81, so it casts to 1.0 first; 1/3 = 0x3EAAAAAB rounds up to 0x3EAB.
  const std::vector<float> halves_in = {1.00390625f, -3.0f};
  std::vector<uint16_t> out(2);
  cast_and_divide(kFloat32, halves_in.data(), kBFloat16, out.data(), 2, 2.0);
  CHECK(out == std::vector<uint16_t>{0x3F00, 0xBFC0});  // 0.5, -1.5
  const std::vector<float> thirds_in = {3.0f, 1.0f};
  cast_and_divide(kFloat32, thirds_in.data(), kBFloat16, out.data(), 2, 3.0);
  CHECK(out == std::vector<uint16_t>{0x3F80, 0x3EAB});
  const double one = 1.0;
  cast_and_divide(kFloat64, &one, kBFloat16, out.data(), 1, 3.0);
  CHECK(out[0] == 0x3EAB);
  // float16, where the two roundings show: 1e-4 casts to 0x068E = 1678 · 2^-24; a quarter of that
  // is 419.5 subnormal units, a tie that goes to the even 420 (0x01A4). Rounding 1e-4 / 4 once
  // would give 419 (0x01A3).
  const float small = 1e-4f;
  cast_and_divide(kFloat32, &small, kFloat16, out.data(), 1, 4.0);
  CHECK(out[0] == 0x01A4);
  const float nan = std::nanf("");
  cast_and_divide(kFloat32, &nan, kBFloat16, out.data(), 1, 2.0);
  CHECK(((out[0] & 0x7F80) == 0x7F80 && (out[0] & 0x007F) != 0));
  CHECK_THROWS_WITH_AS(cast_and_divide(kFloat32, &small, kFloat32, out.data(), 1, 2.0),
                       doctest::Contains("expected a float16 or bfloat16 target, got float32"), Error);
}
