// LLM.int8() against bitsandbytes 0.50's CPU output (tests/precision/data/bnb_int8): vector-wise
// codes and statistics with and without outliers, outlier columns, the int32 product, its
// dequantization, and the mixed decomposition; plus the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "precision/quant/llm_int8.h"
#include "precision/quant/quant_format.h"
#include "quant_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using namespace weft::precision::quant;
using quant_test::check_bitwise;
using quant_test::get;

namespace {
const Tensor& g(const std::string& key) { return get("bnb_int8", key); }
}  // namespace

TEST_CASE("int8_vectorwise_quant: codes, row absmax and outlier columns equal bitsandbytes (threshold 0 and 6)") {
  const Tensor& a = g("a");
  REQUIRE(a.dtype() == kFloat16);
  for (const char* key : {"t0", "t6"}) {
    const double threshold = std::string(key) == "t0" ? 0.0 : 6.0;
    const Int8Rows q = int8_vectorwise_quant(a, threshold);
    check_bitwise(q.codes, g(std::string(key) + ".ca"), std::string(key) + " codes");
    check_bitwise(q.stats, g(std::string(key) + ".sca"), std::string(key) + " stats");
    check_bitwise(q.outlier_cols, g(std::string(key) + ".outlier_cols"), std::string(key) + " outlier columns");
  }
  // Three outlier columns; their codes are zero in every row, and the zero row quantizes to zeros.
  const Int8Rows q = int8_vectorwise_quant(a, 6.0);
  CHECK(q.outlier_cols.to_vector<int64_t>() == std::vector<int64_t>{5, 17, 60});
  CHECK(q.stats.to_vector<float>()[3] == 0.0f);
  // One row: only the outliers themselves are zeroed.
  const Int8Rows one = int8_vectorwise_quant(g("a1"), 6.0);
  check_bitwise(one.codes, g("a1.ca"), "one-row codes");
  check_bitwise(one.stats, g("a1.sca"), "one-row stats");
  check_bitwise(one.outlier_cols, g("a1.outlier_cols"), "one-row outlier columns");
  // The weight (no threshold).
  const Int8Rows w = int8_vectorwise_quant(g("w"));
  check_bitwise(w.codes, g("cb"), "weight codes");
  check_bitwise(w.stats, g("scb"), "weight stats");
  CHECK(w.outlier_cols.numel() == 0);
}

// The rows' quantization at every instruction set the machine has against the scalar reference,
// bit for bit and on several threads: rows of 37, 64 and 4100 values (vector steps and tails),
// outliers in a few columns, rows holding NaN, +Inf, only zeros, or magnitudes too small for a
// finite scale, ties of x · scale, float16 input (threshold rounded to it).
TEST_CASE("int8_vectorwise_quant: every instruction set gives the reference's bits") {
  manual_seed(41);
  for (const int64_t k : {37, 64, 4100}) {
    Tensor a = randn({40, k});  // 40 × 4100 values: two threads, each its own outlier flags
    float* x = a.data<float>();
    for (int64_t r = 0; r < 40; ++r) x[r * k + (r * 7) % k] *= 9.0f;  // outliers in several columns
    x[1 * k + 3] = std::nanf("");
    x[2 * k + k - 1] = std::numeric_limits<float>::infinity();
    std::fill(x + 3 * k, x + 4 * k, 0.0f);
    for (int64_t c = 0; c < k; ++c) x[4 * k + c] = static_cast<float>(c % 5) * 1e-39f;  // 1 / absmax overflows
    // absmax 4, scale (1/4) · 127 = 31.75 exactly: ±2 scale to the ties ±63.5
    for (int64_t c = 0; c < k; ++c) x[5 * k + c] = static_cast<float>(c % 3 - 1) * 2.0f;
    x[5 * k + 1] = 4.0f;
    x[6 * k] = -6.0f;  // exactly the threshold: an outlier
    for (const double threshold : {0.0, 6.0})
      for (const DType dtype : {kFloat32, kFloat16}) {
        const Tensor input = a.to(dtype);
        Int8Rows want;
        {
          CpuIsaGuard guard(CpuIsa::Scalar);
          want = int8_vectorwise_quant(input, threshold);
        }
        // Independently of how the rows are shared out: the outlier columns are those holding a
        // magnitude at or above the threshold (6 is exact in float16), and each row on its own
        // gets the same statistic and, outside those columns, the same codes.
        std::vector<int64_t> expected_cols;
        const Tensor as_float = input.to(kFloat32);
        for (int64_t c = 0; c < k && threshold > 0; ++c) {
          bool outlier = false;
          for (int64_t r = 0; r < 40; ++r) outlier = outlier || std::fabs(as_float.data<float>()[r * k + c]) >= 6.0f;
          if (outlier) expected_cols.push_back(c);
        }
        CHECK(want.outlier_cols.to_vector<int64_t>() == expected_cols);
        const auto codes = want.codes.to_vector<int>();
        int64_t row_mismatches = 0;
        for (int64_t r = 0; r < 40; ++r) {
          const Int8Rows one = int8_vectorwise_quant(input.narrow(0, r, 1), threshold);
          row_mismatches += std::bit_cast<uint32_t>(one.stats.data<float>()[0]) !=
                            std::bit_cast<uint32_t>(want.stats.data<float>()[r]);
          const auto row_codes = one.codes.to_vector<int>();
          for (int64_t c = 0; c < k; ++c)
            if (!std::binary_search(expected_cols.begin(), expected_cols.end(), c))
              row_mismatches += row_codes[static_cast<size_t>(c)] != codes[static_cast<size_t>(r * k + c)];
        }
        CHECK(row_mismatches == 0);
        for (const CpuIsa isa : cpu_isas_supported()) {
          INFO("K=", k, " threshold ", threshold, " ", dtype, " isa ", cpu_isa_name(isa));
          CpuIsaGuard guard(isa);
          const Int8Rows got = int8_vectorwise_quant(input, threshold);
          check_bitwise(got.codes, want.codes, "codes");
          check_bitwise(got.stats, want.stats, "stats");
          check_bitwise(got.outlier_cols, want.outlier_cols, "outlier columns");
        }
      }
  }
}

TEST_CASE("int8 product, dequantization and the mixed decomposition equal bitsandbytes") {
  const Int8Rows q = int8_vectorwise_quant(g("a"), 6.0);
  const Tensor c = int8_linear_matmul(q.codes, g("cb"));
  check_bitwise(c, g("c_int32"), "int32 product");
  check_bitwise(int8_mm_dequant(c, q.stats, g("scb"), kFloat16, g("bias")), g("dequant_f16"), "dequant f16 + bias");
  check_bitwise(int8_mm_dequant(c, q.stats, g("scb"), kFloat32), g("dequant_f32"), "dequant f32");
  check_bitwise(int8_vectorwise_dequant(g("cb"), g("scb")), g("vectorwise_dequant"), "weight dequant");
  for (const DType dtype : {kFloat16, kFloat32}) {
    const std::string name = dtype == kFloat16 ? "mixed_f16" : "mixed_f32";
    const Tensor mixed = int8_mixed_scaled_mm(g("a").to(dtype), q, g("cb"), g("scb"), g("bias").to(dtype));
    CHECK(mixed.dtype() == dtype);
    check_bitwise(mixed, g(name), name);
  }
}

TEST_CASE("LLM.int8 outlier correction: every instruction set gives the scalar fused multiply-add chain's bits") {
  manual_seed(31);
  struct Shape {
    int64_t m, n, outliers;
  };
  // Whole 32-column blocks and a tail, a tail alone, one outlier column and many.
  const Shape shapes[] = {{3, 70, 5}, {1, 9, 1}, {4, 64, 40}, {2, 33, 0}};
  for (const Shape& s : shapes) {
    const Tensor x = mul(randn({s.m, s.outliers}), scalar_tensor(8.0, kFloat32));
    const Tensor wt = randn({s.outliers, s.n});
    const Tensor start = randn({s.m, s.n});
    // The reference, computed here: each sum a chain of fused multiply-adds from zero.
    std::vector<float> want = start.to_vector<float>();
    const auto xv = x.to_vector<float>(), wv = wt.to_vector<float>();
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        float dot = 0.0f;
        for (int64_t c = 0; c < s.outliers; ++c) dot = std::fma(xv[i * s.outliers + c], wv[c * s.n + j], dot);
        want[i * s.n + j] += dot;
      }
    for (const CpuIsa isa : cpu_isas_supported()) {
      INFO("isa ", cpu_isa_name(isa), " m=", s.m, " n=", s.n, " outliers=", s.outliers);
      std::vector<float> got = start.to_vector<float>();
      int8_outlier_correction(x.data<float>(), wt.data<float>(), s.m, s.n, s.outliers, got.data(), isa);
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("int8 row dequantization: every instruction set gives the llm_int8 format's bits") {
  manual_seed(33);
  // Rows of 8k values and with tails, a single short row, every code from -127 to 127.
  struct Shape {
    int64_t rows, row;
  };
  for (const Shape& s : {Shape{3, 64}, Shape{5, 13}, Shape{1, 7}, Shape{2, 255}}) {
    const int64_t rows = s.rows, row = s.row;
    const Tensor codes = randint(-127, 128, {rows, row}, TensorOptions(kInt8));
    const Tensor stats = mul(rand({rows}), scalar_tensor(9.0, kFloat32));
    const int64_t n = rows * row;
    std::vector<float> want(static_cast<size_t>(n));
    quant_format(QuantKind::LlmInt8)
        .dequantize(reinterpret_cast<const uint8_t*>(codes.data<int8_t>()), stats.data<float>(), n, row, want.data());
    for (const CpuIsa isa : cpu_isas_supported()) {
      INFO("isa ", cpu_isa_name(isa), " rows=", rows, " row=", row);
      std::vector<float> got(static_cast<size_t>(n), -1.0f);
      int8_dequantize_rows(codes.data<int8_t>(), stats.data<float>(), n, row, got.data(), isa);
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("int8_dequant_matmul: g times the dequantized weight, exact at every instruction set") {
  manual_seed(32);
  struct Shape {
    int64_t m, n, k;
  };
  // A Linear8bitLt's input gradient: the example's first layer, several K blocks of the weight's
  // rows, more rows than columns, a single row, a tiny product.
  const Shape shapes[] = {{16, 512, 784}, {1, 700, 300}, {300, 20, 96}, {3, 5, 7}};
  for (const Shape& s : shapes) {
    const Int8Rows w = int8_vectorwise_quant(randn({s.n, s.k}), 0.0);
    const Tensor g = randn({s.m, s.n});
    const Tensor dense = int8_vectorwise_dequant(w.codes, w.stats).to(kFloat64);
    const auto e = matmul(g.to(kFloat64), dense).to_vector<double>();
    const auto magnitude = matmul(g.abs().to(kFloat64), dense.abs()).to_vector<double>();
    for (const CpuIsa isa : cpu_isas_supported()) {
      INFO("isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k);
      CpuIsaGuard guard(isa);
      const auto got = int8_dequant_matmul(g, w.codes, w.stats).to_vector<double>();
      REQUIRE(got.size() == e.size());
      double worst = 0;
      for (size_t i = 0; i < e.size(); ++i) worst = std::max(worst, std::fabs(got[i] - e[i]) / (magnitude[i] + 1e-30));
      CHECK(worst <= 2e-5);
    }
  }
  CHECK_THROWS_WITH_AS(int8_dequant_matmul(ones({2, 3}), ones({4, 5}, kInt8), ones({4})),
                       doctest::Contains("must share N, got (2, 3) and (4, 5)"), Error);
  CHECK_THROWS_WITH_AS(int8_dequant_matmul(ones({2, 4}), ones({4, 5}, kInt8), ones({3})),
                       doctest::Contains("expected stats as 4 float32 values"), Error);
}

TEST_CASE("LLM.int8 functions refuse malformed input") {
  CHECK_THROWS_WITH_AS(int8_vectorwise_quant(ones({2, 3}, kInt8)), doctest::Contains("expected a floating tensor"),
                       Error);
  CHECK_THROWS_WITH_AS(int8_vectorwise_quant(ones({2, 3}), -1.0), doctest::Contains("threshold must be >= 0"), Error);
  CHECK_THROWS_WITH_AS(int8_linear_matmul(ones({2, 3}, kInt8), ones({4, 5}, kInt8)),
                       doctest::Contains("must share K, got (2, 3) and (4, 5)"), Error);
  CHECK_THROWS_WITH_AS(int8_linear_matmul(ones({2, 3}), ones({4, 3}, kInt8)),
                       doctest::Contains("expected A as a 2-D int8 tensor, got (2, 3) float32"), Error);
  CHECK_THROWS_WITH_AS(int8_mm_dequant(ones({2, 3}, kInt32), ones({2}), ones({4}), kFloat32),
                       doctest::Contains("expected col_stats as 3 float32 values"), Error);
  CHECK_THROWS_WITH_AS(int8_linear_matmul(full({1, 4}, -128.0, kInt8), ones({1, 4}, kInt8)),
                       doctest::Contains("A holds -128 at element 0"), Error);
}
