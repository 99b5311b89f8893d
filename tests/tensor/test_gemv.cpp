// The batch-1 products (tensor/cpu/gemv.h) at every instruction-set level this machine supports:
// W·x over bfloat16 and float16 rows and x·B over float32 rows of B, against a product in double of the same
// values, with |got − exact| ≤ tol · Σ_p |w_p·x_p| (the bound of a float32 dot product), and
// against the scalar reference in the same run. Shapes cover the vector tails (K of 1, 7, 31,
// 33, 100), rows left over from blocks of four, padded rows (leading dimension past K), the
// accumulate flag (linear's bias), the split over threads (the same bits on one thread and two),
// and the way in: matmul and linear hand a single row times such a weight to these kernels,
// a bfloat16 result rounded once from the float32 sums.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/gemv.h"
#include "tensor/float_formats.h"

using namespace weft;

namespace {

constexpr double kTol = 2e-6 * 4;  // a few float32 roundings per sum, K ≤ 800 (K·2^-24 ≈ 5e-5 is the worst case)

struct Case {
  int64_t n, k, ld;
};
const Case kCases[] = {{1, 1, 1}, {3, 7, 9}, {5, 31, 31}, {8, 32, 40}, {17, 33, 33}, {64, 100, 104}, {1030, 768, 768}};

// Values in ±[0.25, 1), away from zero so no product is a denormal (vdpbf16ps flushes those).
float value(Generator& g) {
  const double u = g.uniform();
  return static_cast<float>((u < 0.5 ? -1 : 1) * (0.25 + 0.75 * std::fmod(2 * u, 1.0)));
}

// bfloat16 bits, or float16 bits when `half`.
std::vector<uint16_t> random_bits(Generator& g, int64_t n, bool half = false) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = half ? float_to_half(value(g)) : float_to_bfloat16(value(g));
  return v;
}


std::vector<float> random_f32(Generator& g, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = value(g);
  return v;
}

}  // namespace

TEST_CASE("gemv: bfloat16 and float16 rows times x at every level, against double") {
  Generator g(7);
  for (const bool half : {false, true}) {
    CAPTURE(half);
    auto widen = [&](uint16_t bits) { return double(half ? half_to_float(bits) : bfloat16_to_float(bits)); };
    for (const Case& c : kCases) {
      CAPTURE(c.n);
      CAPTURE(c.k);
      const std::vector<uint16_t> w = random_bits(g, c.n * c.ld, half), x = random_bits(g, c.k, half);
      const std::vector<float> start = random_f32(g, c.n);
      for (const bool accumulate : {false, true}) {
        std::vector<double> exact(static_cast<size_t>(c.n)), scale(static_cast<size_t>(c.n));
        for (int64_t j = 0; j < c.n; ++j) {
          const double s0 = accumulate ? start[static_cast<size_t>(j)] : 0.0;
          double sum = s0, mag = std::abs(s0);
          for (int64_t p = 0; p < c.k; ++p) {
            const double t = widen(w[static_cast<size_t>(j * c.ld + p)]) * widen(x[static_cast<size_t>(p)]);
            sum += t;
            mag += std::abs(t);
          }
          exact[static_cast<size_t>(j)] = sum;
          scale[static_cast<size_t>(j)] = mag;
        }
        for (const CpuIsa isa : cpu_isas_supported()) {
          CAPTURE(cpu_isa_name(isa));
          CAPTURE(accumulate);
          std::vector<float> y = start;
          if (half) detail::gemv_f16_rows(isa, w.data(), c.ld, x.data(), c.k, c.n, y.data(), accumulate);
          else detail::gemv_bf16_rows(isa, w.data(), c.ld, x.data(), c.k, c.n, y.data(), accumulate);
          int bad = 0;
          for (int64_t j = 0; j < c.n; ++j)
            if (std::abs(y[static_cast<size_t>(j)] - exact[static_cast<size_t>(j)]) > kTol * scale[static_cast<size_t>(j)]) ++bad;
          CHECK(bad == 0);
        }
      }
    }
  }
}

TEST_CASE("gemv: x times float32 rows of B at every level, against double") {
  Generator g(11);
  for (const Case& c : kCases) {
    CAPTURE(c.n);
    CAPTURE(c.k);
    // B is k × n with rows c.ld + n apart (past n: rows padded).
    const int64_t ldb = c.ld + c.n;
    const std::vector<float> b = random_f32(g, c.k * ldb), x = random_f32(g, c.k), start = random_f32(g, c.n);
    for (const bool accumulate : {false, true}) {
      std::vector<double> exact(static_cast<size_t>(c.n)), scale(static_cast<size_t>(c.n));
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = accumulate ? start[static_cast<size_t>(j)] : 0, mag = std::abs(accumulate ? start[static_cast<size_t>(j)] : 0.0f);
        for (int64_t p = 0; p < c.k; ++p) {
          const double t = double(x[static_cast<size_t>(p)]) * b[static_cast<size_t>(p * ldb + j)];
          sum += t;
          mag += std::abs(t);
        }
        exact[static_cast<size_t>(j)] = sum;
        scale[static_cast<size_t>(j)] = mag;
      }
      for (const CpuIsa isa : cpu_isas_supported()) {
        CAPTURE(cpu_isa_name(isa));
        CAPTURE(accumulate);
        std::vector<float> y = start;
        detail::gemv_f32_cols(isa, x.data(), b.data(), ldb, c.k, c.n, y.data(), accumulate);
        int bad = 0;
        for (int64_t j = 0; j < c.n; ++j)
          if (std::abs(y[static_cast<size_t>(j)] - exact[static_cast<size_t>(j)]) > kTol * scale[static_cast<size_t>(j)]) ++bad;
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("gemv: the split over threads gives the same bits on one thread and two") {
  Generator g(3);
  const int64_t n = 1030, k = 768;
  const std::vector<uint16_t> w = random_bits(g, n * k), x = random_bits(g, k);
  const std::vector<uint16_t> wh = random_bits(g, n * k, true), xh = random_bits(g, k, true);
  const std::vector<float> b = random_f32(g, n * k), xf = random_f32(g, k);
  const int threads = num_threads();
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    std::vector<float> y1(n), y2(n), z1(n), z2(n), h1(n), h2(n);
    set_num_threads(1);
    detail::gemv_bf16_rows(isa, w.data(), k, x.data(), k, n, y1.data(), false);
    detail::gemv_f32_cols(isa, xf.data(), b.data(), n, k, n, z1.data(), false);
    detail::gemv_f16_rows(isa, wh.data(), k, xh.data(), k, n, h1.data(), false);
    set_num_threads(2);
    detail::gemv_bf16_rows(isa, w.data(), k, x.data(), k, n, y2.data(), false);
    detail::gemv_f32_cols(isa, xf.data(), b.data(), n, k, n, z2.data(), false);
    detail::gemv_f16_rows(isa, wh.data(), k, xh.data(), k, n, h2.data(), false);
    CHECK(y1 == y2);
    CHECK(h1 == h2);
    CHECK(z1 == z2);
  }
  set_num_threads(threads);
}

TEST_CASE("gemv: linear and matmul of one row: bfloat16 and float16 rounded once, float32 weight stored [in, out] read in place") {
  Generator g(5);
  const int64_t in = 100, out = 37;
  const Tensor w32 = from_vector(random_f32(g, out * in), {out, in}, kFloat32);
  const Tensor x32 = from_vector(random_f32(g, in), {1, in}, kFloat32);
  const Tensor bias32 = from_vector(random_f32(g, out), {out}, kFloat32);
  // bfloat16: the float32 product of the same (exactly widened) values, rounded once.
  const Tensor w16 = w32.to(kBFloat16), x16 = x32.to(kBFloat16), bias16 = bias32.to(kBFloat16);
  const Tensor want16 = linear(x16.to(kFloat64), w16.to(kFloat64), bias16.to(kFloat64));
  const Tensor wh = w32.to(kFloat16), xh = x32.to(kFloat16), biash = bias32.to(kFloat16);
  const Tensor wanth = linear(xh.to(kFloat64), wh.to(kFloat64), biash.to(kFloat64));
  // float32 with the weight a transposed view of a [in, out] tensor, as GPT-2 stores it.
  const Tensor stored = w32.t().contiguous();
  const Tensor want32 = linear(x32.to(kFloat64), w32.to(kFloat64), bias32.to(kFloat64));
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    const Tensor got16 = linear(x16, w16, bias16);
    CHECK(got16.dtype() == kBFloat16);
    // One rounding to bfloat16 (2^-9 relative) on top of the float32 sum's error.
    CHECK(allclose(got16.to(kFloat64), want16, 4e-3, 1e-3));
    const Tensor goth = linear(xh, wh, biash);
    CHECK(goth.dtype() == kFloat16);
    CHECK(allclose(goth.to(kFloat64), wanth, 1e-3, 1e-3));  // float16 keeps 11 bits
    const Tensor got32 = linear(x32, stored.t(), bias32);
    CHECK(allclose(got32.to(kFloat64), want32, 1e-5, 1e-5));
    CHECK(allclose(matmul(x32, stored).to(kFloat64), matmul(x32.to(kFloat64), stored.to(kFloat64)), 1e-5, 1e-5));
  }
}
