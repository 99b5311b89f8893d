// The 4-bit product: every instruction-set path this machine (or the emulation build) supports
// against the scalar references in the same run (the fused int8 kernel within float32 rounding,
// dequantization bit for bit), and both regimes against dequantizing and multiplying in float64.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <tuple>

#include "gemm_levels.h"
#include "precision/quant/blockwise.h"
#include "precision/quant/gemm_4bit.h"
#include "precision/quant/quant_format.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision::quant;

namespace {

struct Case {
  // The weight's bytes and absmax in buffers of exactly their size, so that the sanitizer build
  // sees a kernel read past either (a tensor's storage may be larger than its values).
  std::vector<uint8_t> packed;
  std::vector<float> absmax;
  Tensor dequantized;
  Weights4bit w;
};

Case quantized(int64_t n, int64_t k, int64_t bs, QuantKind type) {
  Case c;
  Tensor weight = randn({n, k});
  auto [packed, state] = quantize_4bit(weight, type, bs);
  c.packed = packed.to_vector<uint8_t>();
  c.absmax = state.absmax.to_vector<float>();
  c.dequantized = dequantize_4bit(packed, state);
  c.w = {c.packed.data(), c.absmax.data(), n, k, bs, type};
  return c;
}

std::vector<float> run(const Tensor& x, const Case& c, CpuIsa isa, bool reference) {
  std::vector<float> y(static_cast<size_t>(x.size(0) * c.w.n), -1.0f);
  if (reference)
    gemm_4bit_fused_reference(x.data<float>(), x.size(0), c.w, y.data());
  else
    gemm_4bit_fused(x.data<float>(), x.size(0), c.w, y.data(), isa);
  return y;
}

// The worst error of `got` against the float64 product a·b, relative to Σ|a_ip·b_pj| (the bound
// of a float32 sum).
double worst_relative_error(const std::vector<float>& got, const Tensor& a, const Tensor& b) {
  const auto e = matmul(a.to(kFloat64), b.to(kFloat64)).to_vector<double>();
  const auto magnitude = matmul(a.abs().to(kFloat64), b.abs().to(kFloat64)).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < e.size(); ++i) worst = std::max(worst, std::fabs(got[i] - e[i]) / (magnitude[i] + 1e-30));
  return worst;
}

struct Shape4bit {
  int64_t m, n, k, bs;  // x (m, k) times W (n, k), in blocks of bs
};

// For each shape and both 4-bit types, at every instruction set with its own float32 GEMM kernels
// (the dequantizers change level where those do, at AVX2 and AVX-512): the product x·Wᵀ
// (gemm_4bit) or, with `input_grad`, g·W (gemm_4bit_input_grad, g random (m, n)), against the
// float64 product of the same values with W dequantized.
void check_exact_at_every_level(const std::vector<Shape4bit>& shapes, bool input_grad) {
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    for (const auto& s : shapes) {
      const Case c = quantized(s.n, s.k, s.bs, type);
      const Tensor lhs = randn({s.m, input_grad ? s.n : s.k});
      const Tensor rhs = input_grad ? c.dequantized : c.dequantized.t();
      for (const CpuIsa isa : levels_with_own_gemm_kernels(kFloat32)) {
        INFO("isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k, " bs=", s.bs);
        CpuIsaGuard guard(isa);
        std::vector<float> got(static_cast<size_t>(s.m * (input_grad ? s.k : s.n)), -1.0f);
        if (input_grad) gemm_4bit_input_grad(lhs.data<float>(), s.m, c.w, got.data(), isa);
        else gemm_4bit(lhs.data<float>(), s.m, c.w, got.data(), Product4bit::Exact, isa);
        CHECK(worst_relative_error(got, lhs, rhs) <= 2e-5);
      }
    }
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, static_cast<double>(std::fabs(f)));
  return m;
}

}  // namespace

TEST_CASE("4-bit product: the fused kernel at every supported instruction set matches its scalar reference") {
  manual_seed(21);
  // A single activation row (M = 1, or the last of M = 4q + 1) has its own path in the AVX2
  // kernel, which scales eight blocks at a time: 16 blocks, 8 + 2, and 8 + 1 of 128 values. Rows
  // that start inside a block (Note [Blocks across rows]): the example's 784 inputs (4 offsets,
  // N not a multiple of them, the last row from a padded copy), 96 in blocks of 64 (2), rows
  // shorter than a block (40 in blocks of 128: 16 offsets, several rows per block). Blocks of 32:
  // two to a kernel step. From 2 rows the VNNI level takes 16 weight rows as lanes (Note [Weight
  // rows as lanes]): panels of 16 and fewer, several K steps to a block, 16 activation rows to a
  // pass and a remainder (of 5, and of one row), rows at several offsets into a block; up to 12
  // rows and above (the two orders of a step's products). One row in blocks of 64 at the VNNI level
  // takes two steps to a vector and eight blocks to a fold (Note [Two steps to a vector]): 16
  // blocks, 25 (three eights and one more), 13 (the example's first layer: 832 values from each
  // offset), 5 (none whole).
  const Shape4bit shapes[] = {{1, 1, 64, 64},     {1, 37, 320, 64},  {3, 17, 128, 128},   {4, 16, 256, 64},
                              {7, 40, 1024, 256}, {32, 9, 192, 64},  {5, 33, 4096, 4096}, {1, 19, 1024, 64},
                              {5, 7, 640, 64},    {9, 5, 1152, 128}, {1, 23, 784, 64},    {6, 11, 96, 64},
                              {2, 21, 40, 128},   {1, 13, 320, 32},  {6, 9, 128, 32},     {8, 23, 784, 64},
                              {21, 50, 256, 64}, {17, 18, 128, 64},  {14, 16, 256, 128}, {12, 20, 128, 64},
                              {1, 9, 1600, 64}};
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    for (const auto& s : shapes) {
      const Case c = quantized(s.n, s.k, s.bs, type);
      const Tensor x = mul(randn({s.m, s.k}), 3.0);
      const auto expected = run(x, c, CpuIsa::Scalar, true);
      const double scale = max_abs(expected);
      for (const CpuIsa isa : cpu_isas_supported()) {
        const auto got = run(x, c, isa, false);
        INFO("isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k, " bs=", s.bs);
        double err = 0;
        for (size_t i = 0; i < got.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - expected[i])));
        CHECK(err <= 1e-5 * scale);
      }
    }
}

TEST_CASE("4-bit product, Int8Activations: up to 16 rows the int8 kernel stays within 1% of the products' magnitude; above, exact") {
  // The bound gemm_4bit.h states: |y - x·Wᵀ| <= 1 % of Σ|x·w| per output for the fused kernel.
  manual_seed(22);
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    for (const int64_t rows : {int64_t{6}, kFusedMaxRows, kFusedMaxRows + 1, int64_t{40}}) {
      const Case c = quantized(48, 512, 64, type);
      const Tensor x = randn({rows, 512});
      std::vector<float> got(static_cast<size_t>(rows * 48));
      gemm_4bit(x.data<float>(), rows, c.w, got.data(), Product4bit::Int8Activations);
      CAPTURE(rows);
      CHECK(worst_relative_error(got, x, c.dequantized.t()) <= (rows <= kFusedMaxRows ? 1e-2 : 2e-5));
    }
  // Rows that start inside a block (Note [Blocks across rows]) are as close: the example's first
  // layer (4 offsets, the last rows from a padded copy) and rows shorter than a block; so are
  // blocks of 32.
  for (const auto& s : {Shape4bit{5, 37, 784, 64}, Shape4bit{16, 21, 40, 128}, Shape4bit{3, 19, 256, 32}}) {
    const Case c = quantized(s.n, s.k, s.bs, QuantKind::NF4);
    const Tensor x = randn({s.m, s.k});
    std::vector<float> got(static_cast<size_t>(s.m * s.n));
    gemm_4bit(x.data<float>(), s.m, c.w, got.data(), Product4bit::Int8Activations);
    INFO("N=", s.n, " K=", s.k, " bs=", s.bs);
    CHECK(worst_relative_error(got, x, c.dequantized.t()) <= 1e-2);
  }
  // A shape the fused kernel does not take (K = 100 in blocks of 32: not whole steps of 64) is
  // exact at any row count.
  const Case odd = quantized(7, 100, 32, QuantKind::NF4);
  const Tensor x = randn({1, 100});
  std::vector<float> y(7);
  gemm_4bit(x.data<float>(), 1, odd.w, y.data(), Product4bit::Int8Activations);
  CHECK(worst_relative_error(y, x, odd.dequantized.t()) <= 2e-5);
}

TEST_CASE("4-bit product, Exact (the default): up to 16 rows, x · dequantize(W)ᵀ within float32 rounding at every level") {
  manual_seed(41);
  // The exact fused kernel (Note [Exact 4-bit product]) at M = 1, 3 (the AVX-512 kernel's 3-row
  // tile, the AVX2 one's 2 + 1) and 16 (four 4-row tiles): K whole blocks of 64 and 128 with N not
  // a multiple of the threads' 16-row items; K = 192 in blocks of 128, whose rows start inside a
  // block (every other row 64 values in); K = 784 in blocks of 64, which the kernel refuses (not
  // whole 64-value chunks): gemm_4bit takes the exact dequantized-rows path for it.
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    for (const int64_t m : {int64_t{1}, int64_t{3}, kFusedMaxRows})
      for (const auto& s : {Shape4bit{m, 37, 512, 64}, Shape4bit{m, 21, 1024, 128}, Shape4bit{m, 19, 192, 128},
                            Shape4bit{m, 23, 784, 64}}) {
        const Case c = quantized(s.n, s.k, s.bs, type);
        const Tensor x = mul(randn({s.m, s.k}), 3.0);
        const bool fused = gemm_4bit_exact_supported(s.k, s.bs);
        CHECK(fused == (s.k != 784));
        std::vector<float> reference(static_cast<size_t>(s.m * s.n), -1.0f);
        if (fused) {
          gemm_4bit_exact_reference(x.data<float>(), s.m, c.w, reference.data());
          CHECK(worst_relative_error(reference, x, c.dequantized.t()) <= 1e-5);
        }
        for (const CpuIsa isa : cpu_isas_supported()) {
          INFO(quant_format(type).name, " isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k, " bs=", s.bs);
          CpuIsaGuard guard(isa);
          std::vector<float> got(static_cast<size_t>(s.m * s.n), -1.0f);
          gemm_4bit(x.data<float>(), s.m, c.w, got.data());
          CHECK(worst_relative_error(got, x, c.dequantized.t()) <= 1e-5);
          if (fused) {
            std::vector<float> direct(got.size(), -1.0f);
            gemm_4bit_exact(x.data<float>(), s.m, c.w, direct.data(), isa);
            CHECK(direct == got);  // the default is this kernel
          }
        }
      }
  // The int8 product of the same shape is measurably off, so the checks above can tell them apart.
  const Case c = quantized(37, 512, 64, QuantKind::NF4);
  const Tensor x = randn({3, 512});
  std::vector<float> int8(3 * 37);
  gemm_4bit(x.data<float>(), 3, c.w, int8.data(), Product4bit::Int8Activations);
  CHECK(worst_relative_error(int8, x, c.dequantized.t()) > 1e-4);
  // The kernel alone refuses a K it cannot take.
  std::vector<float> y(3 * 23);
  const Case odd = quantized(23, 784, 64, QuantKind::NF4);
  const Tensor x784 = randn({3, 784});
  CHECK_THROWS_WITH_AS(gemm_4bit_exact(x784.data<float>(), 3, odd.w, y.data()),
                       doctest::Contains("[gemm_4bit_exact] expected K and the block size multiples of 64"), Error);
}

TEST_CASE("4-bit product through weft's GEMM (above 16 rows, or a K the fused kernel refuses): exact at every level") {
  manual_seed(23);
  // W as the GEMM's A (a million values or more, under 512 rows; Note [Dequantized block by
  // block]): several K chunks and row blocks of W (K = 4096, N = 300 not a multiple of the 12-row
  // tiles), and 20 × 1024 outputs transposed into y by the threads, 16 rows of y each, the last
  // part short. W as B (smaller weights): K = 100 in blocks of 32, so runs end mid-block (the fused
  // kernel refuses it at any M); more activation rows than weight rows (the threads share packed
  // B); the example's first layer at batch 24, N in column parts. (The sanitizer build runs the
  // AVX-512 levels emulated at -O0: every case here costs there, keep them small.) Up to 16 rows
  // with K = 786 in blocks of 64 (32 offsets into a block) or K = 100 in blocks of 32 (not whole
  // kernel steps of 64; the fused kernel refuses both), rows of W dequantized per thread and
  // multiplied by dot products (one row) or in place (three).
  check_exact_at_every_level({{40, 300, 4096, 64},
                              {20, 1024, 1024, 64},
                              {17, 33, 100, 32},
                              {70, 5, 1152, 128},
                              {24, 512, 784, 64},
                              {1, 300, 786, 64},
                              {3, 40, 100, 32}},
                             false);
}

TEST_CASE("4-bit input gradient g·W through weft's GEMM: exact at every level") {
  manual_seed(25);
  // The example's first layer (K = 784: rows of W do not start on block or byte boundaries),
  // several K blocks of W's rows and runs of 256 columns, one row, more rows than columns, a
  // single weight row, an odd K (a row starts mid-byte).
  check_exact_at_every_level({{16, 512, 784, 64}, {1, 300, 640, 128}, {300, 20, 96, 32}, {5, 1, 64, 64}, {7, 9, 33, 32}},
                             true);
}

TEST_CASE("4-bit dequantization of rows: every supported instruction set gives dequantize_4bit's values bit for bit") {
  manual_seed(24);
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    // Runs from mid-byte and mid-block starts; whole blocks of 64 from a block's start, then the
    // rest of a block (19 × 101: a row's last 37 values).
    for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{9, 37, 32}, {16, 256, 64}, {3, 1000, 128},
                              {19, 101, 64}}) {
      // Named values, not structured bindings: clang 14 refuses bindings inside INFO's lambda.
      const int64_t n = std::get<0>(shape), k = std::get<1>(shape), bs = std::get<2>(shape);
      const Case c = quantized(n, k, bs, type);
      const auto expected = c.dequantized.to_vector<float>();
      for (const CpuIsa isa : cpu_isas_supported())
        for (const auto& span : {std::pair<int64_t, int64_t>{0, n}, {1, n - 2}, {n - 1, 1}}) {
          const int64_t row0 = span.first, rows = span.second;
          std::vector<float> got(static_cast<size_t>(rows * k), -1.0f);
          dequantize_4bit_rows(c.w, row0, rows, got.data(), isa);
          INFO("isa ", cpu_isa_name(isa), " shape (", n, ", ", k, ") rows ", row0, "+", rows);
          bool same = true;
          for (int64_t i = 0; i < rows * k; ++i) same = same && got[i] == expected[row0 * k + i];
          CHECK(same);
        }
    }
}

TEST_CASE("4-bit dequantization of rows in bfloat16: every level rounds each value as float_to_bfloat16 does") {
  manual_seed(31);
  const float max = std::numeric_limits<float>::max();
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    // Runs from mid-byte and mid-block starts, ending on 31 values of a block (19 × 101 in blocks
    // of 64: the last block's 63 values are 32 and 31), whole blocks of 64 from a block's start.
    for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{9, 37, 32}, {16, 256, 64}, {3, 1000, 128},
                              {19, 101, 64}}) {
      const int64_t n = std::get<0>(shape), k = std::get<1>(shape), bs = std::get<2>(shape);
      Case c = quantized(n, k, bs, type);
      // Blocks whose products round to infinity (1 · FLT_MAX), to NaN (infinity · 0 and NaN), to
      // denormals, and to ties of bfloat16 rounding (absmax 1 + 2^-8 times the table's 1.0).
      c.absmax[0] = max;
      c.absmax[1] = std::numeric_limits<float>::infinity();
      c.absmax[2] = std::nanf("");
      c.absmax[3] = 3e-39f;
      c.absmax[c.absmax.size() - 1] = 1.0f + 1.0f / 256.0f;
      const auto& table = table_4bit_decode(type);
      std::vector<uint16_t> expected(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < n * k; ++i) {
        const uint8_t byte = c.packed[static_cast<size_t>(i / 2)];
        const float value = table[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * c.absmax[static_cast<size_t>(i / bs)];
        expected[static_cast<size_t>(i)] = float_to_bfloat16(value);
      }
      for (const CpuIsa isa : cpu_isas_supported())
        for (const auto& span : {std::pair<int64_t, int64_t>{0, n}, {1, n - 2}, {n - 1, 1}}) {
          const int64_t row0 = span.first, rows = span.second;
          std::vector<uint16_t> got(static_cast<size_t>(rows * k), 0xFFFF);
          dequantize_4bit_rows_bf16(c.w, row0, rows, got.data(), isa);
          INFO("isa ", cpu_isa_name(isa), " shape (", n, ", ", k, ") rows ", row0, "+", rows);
          int64_t different = 0;
          for (int64_t i = 0; i < rows * k; ++i) different += got[i] != expected[row0 * k + i];
          CHECK(different == 0);
        }
    }
}

TEST_CASE("4-bit product in bfloat16: W rounded to bfloat16 through weft's GEMM above 16 rows, at every level") {
  manual_seed(37);
  // The orientations of Note [Dequantized block by block]: W as the GEMM's A (a million values or
  // more, under 512 rows), its rows made a strip at a time, K in chunks of 1024, 300 rows not a
  // multiple of the 12-row tiles; W as B (smaller weights): K = 100 in blocks of 32 (rows start
  // mid-block), an odd K (rows start mid-byte; its pairs are packed, the last padded), the
  // example's first layer. Each level with its own bfloat16 GEMM kernels (gemm_levels.h).
  for (const QuantKind type : {QuantKind::NF4, QuantKind::FP4})
    for (const auto& s : std::vector<Shape4bit>{{20, 300, 4096, 64}, {40, 30, 2100, 64}, {17, 33, 100, 32},
                                                {24, 30, 101, 64}, {20, 512, 784, 64}}) {
      const Case c = quantized(s.n, s.k, s.bs, type);
      const Tensor x = randn({s.m, s.k}).to(kBFloat16);
      const Tensor w = c.dequantized.to(kBFloat16);
      const auto* x_bits = static_cast<const uint16_t*>(x.data_ptr());
      for (const CpuIsa isa : levels_with_own_gemm_kernels(kBFloat16)) {
        INFO("isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k, " bs=", s.bs);
        CpuIsaGuard guard(isa);
        std::vector<float> got(static_cast<size_t>(s.m * s.n), -1.0f);
        gemm_4bit_bf16(x_bits, s.m, c.w, got.data(), Product4bit::Exact, isa);
        // Against W rounded: within float32 sums; W unrounded would be ~2^-9 off.
        CHECK(worst_relative_error(got, x, w.t()) <= 2e-5);
      }
    }
  // Up to 16 rows: gemm_4bit's product of x widened, bit for bit.
  const Case c = quantized(12, 256, 64, QuantKind::NF4);
  const Tensor x = randn({16, 256}).to(kBFloat16);
  const Tensor wide = x.to(kFloat32);
  std::vector<float> got(16 * 12), want(16 * 12);
  gemm_4bit_bf16(static_cast<const uint16_t*>(x.data_ptr()), 16, c.w, got.data());
  gemm_4bit(wide.data<float>(), 16, c.w, want.data());
  CHECK(got == want);
}

namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// The preparation for `isa` gives the reference's bytes: codes, |codes|, sums, and scale bits.
void check_prepared_like_reference(const std::vector<float>& x, int64_t m, int64_t k, int64_t bs, CpuIsa isa) {
  const PreparedActivations want = prepare_4bit_activations(x.data(), m, k, bs, CpuIsa::Scalar);
  const PreparedActivations got = prepare_4bit_activations(x.data(), m, k, bs, isa);
  INFO("isa ", cpu_isa_name(isa), " M=", m, " K=", k, " bs=", bs);
  CHECK(got.q == want.q);
  CHECK(got.q_abs == want.q_abs);
  CHECK(got.q_sum == want.q_sum);
  REQUIRE(got.scale.size() == want.scale.size());
  int64_t different = 0;
  for (size_t b = 0; b < got.scale.size(); ++b) different += bits_of(got.scale[b]) != bits_of(want.scale[b]);
  CHECK(different == 0);
}

}  // namespace

TEST_CASE("4-bit product: the activations' preparation, by hand and at every level bit for bit") {
  // By hand: one block 0, 1, ..., 63 (max 63): codes round(v · 127 / 63), even values first.
  std::vector<float> ramp(64);
  for (int v = 0; v < 64; ++v) ramp[static_cast<size_t>(v)] = static_cast<float>(v);
  const PreparedActivations p = prepare_4bit_activations(ramp.data(), 1, 64, 64, CpuIsa::Scalar);
  int32_t sum = 0;
  for (int v = 0; v < 64; ++v) {
    const auto code = static_cast<int8_t>(std::nearbyint(static_cast<float>(v) * (127.0f / 63.0f)));
    const size_t at = static_cast<size_t>(v % 2 == 0 ? v / 2 : 32 + v / 2);
    CHECK(p.q[at] == code);
    CHECK(p.q_abs[at] == code);
    sum += code;
  }
  REQUIRE(p.q_sum.size() == 1);
  CHECK(p.q_sum[0] == sum);
  REQUIRE(p.scale.size() == 1);
  CHECK(p.scale[0] == 63.0f / 16129.0f);

  // Every level against the reference, where rounding ties matter: a block whose max is 127
  // (values times exactly 1) holding halves, both signs, zero and negative zero; a block of
  // zeros; blocks with NaN, with infinity, with denormals; and random blocks of 32 to 8192.
  std::vector<float> ties(256, 0.0f);
  for (int v = 0; v < 64; ++v) ties[static_cast<size_t>(v)] = (v % 2 ? -1.0f : 1.0f) * (static_cast<float>(v) + 0.5f);
  ties[5] = 127.0f;
  ties[6] = -0.0f;
  ties[64 + 64 + 7] = std::nanf("");
  ties[192 + 3] = -std::numeric_limits<float>::infinity();
  ties[192 + 4] = 1e-40f;
  std::vector<float> denormal(64, 3e-42f);
  denormal[9] = -7e-41f;
  // Magnitudes below 127 / FLT_MAX, where 127 / max|x| overflows: codes 0, as for a zero block.
  const PreparedActivations tiny = prepare_4bit_activations(denormal.data(), 1, 64, 32, CpuIsa::Scalar);
  CHECK(std::vector<int8_t>(tiny.q.begin(), tiny.q.end()) == std::vector<int8_t>(64, 0));
  CHECK(std::vector<int32_t>(tiny.q_sum.begin(), tiny.q_sum.end()) == std::vector<int32_t>{0, 0});
  manual_seed(29);
  for (const CpuIsa isa : cpu_isas_supported()) {
    check_prepared_like_reference(ties, 1, 256, 64, isa);
    check_prepared_like_reference(ties, 2, 128, 32, isa);
    check_prepared_like_reference(denormal, 1, 64, 32, isa);
    for (const auto& [m, k, bs] :
         {std::tuple{3, 640, 64}, {2, 384, 128}, {4, 320, 32}, {1, 8192, 8192}, {2, 4096, 256}}) {
      const std::vector<float> x = mul(randn({m, k}), 5.0).to_vector<float>();
      check_prepared_like_reference(x, m, k, bs, isa);
    }
  }
  CHECK_THROWS_WITH_AS(prepare_4bit_activations(ramp.data(), 1, 48, 16),
                       doctest::Contains("got m=1, K=48, blocksize=16"), Error);
}

TEST_CASE("4-bit product: zero and non-finite activations, unsupported shapes") {
  manual_seed(23);
  const Case c = quantized(5, 128, 64, QuantKind::NF4);
  // Two rows (the row kernels) and six (weight rows as lanes, on the VNNI level).
  for (const int64_t m : {2, 6}) {
    Tensor x = zeros({m, 128});
    x.data<float>()[128 + 3] = std::nanf("");
    for (const CpuIsa isa : cpu_isas_supported()) {
      const auto y = run(x, c, isa, false);
      for (int n = 0; n < 5; ++n) {
        CHECK(y[n] == 0.0f);          // an all-zero row
        CHECK(std::isnan(y[5 + n]));  // NaN in the first block of the second row
      }
    }
  }
  Tensor x = zeros({2, 128});
  Weights4bit bad = c.w;
  bad.blocksize = 16;
  std::vector<float> y(2 * 5);
  CHECK_THROWS_WITH_AS(gemm_4bit_fused(x.data<float>(), 2, bad, y.data()), doctest::Contains("got K=128, blocksize=16"),
                       Error);
  bad = c.w;
  bad.k = 98;  // rows start at 32 different offsets into a block
  CHECK_THROWS_WITH_AS(gemm_4bit_fused(x.data<float>(), 2, bad, y.data()), doctest::Contains("got K=98"), Error);
  CHECK(gemm_4bit_fused_supported(4096, 64));
  CHECK(gemm_4bit_fused_supported(784, 64));   // 4 offsets
  CHECK(gemm_4bit_fused_supported(100, 64));   // 16
  CHECK(gemm_4bit_fused_supported(40, 128));   // 16
  CHECK(gemm_4bit_fused_supported(4096, 32));  // two blocks to a kernel step
  CHECK_FALSE(gemm_4bit_fused_supported(98, 64));
  CHECK_FALSE(gemm_4bit_fused_supported(100, 32));
  CHECK_FALSE(gemm_4bit_fused_supported(96, 32));
  CHECK_THROWS_WITH_AS(dequantize_4bit_rows(c.w, 4, 2, y.data()), doctest::Contains("rows [4, 6) are not within the 5"),
                       Error);
}
