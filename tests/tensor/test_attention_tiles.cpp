// The fused attention's tile kernels (tensor/cpu/attention/attention_tiles.h) on single tiles:
// the AVX2 and AVX-512 float32 sets against the scalar reference, and the bfloat16 path's fused
// steps (AVX-512 BF16, what AMX CPUs run) bit for bit against the float32 steps they fuse, rounded
// as float_to_bfloat16, and within a bf16 rounding of their scalar reference. Tiles with ragged
// rows and columns, off and on the causal diagonal, one wholly hidden, with queries that have seen
// earlier tiles and queries that have not.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/float_formats.h"

namespace weft {
namespace {

using detail::AttentionTiles;
using detail::AttentionTilesBf16;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kLd = 128;  // the kernel's tiles are 128 queries wide
constexpr int64_t kPairs = 32;  // and 64 keys long

std::vector<float> uniform(int64_t n, double low, double high, uint64_t seed) {
  Generator g(seed);
  return add(mul(rand({n}, kFloat32, &g), high - low), low).to_vector<float>();
}

struct Shape2 {
  int rows, cols;
  int64_t diag;
};

// Off the diagonal, on it (the tile's first key is the block's first query, or 64 keys later), a
// diagonal that hides nothing, ragged edges, and a tile that hides everything from every query.
const std::vector<Shape2>& shapes() {
  static const std::vector<Shape2> all = {{64, 128, detail::kNoDiag}, {64, 128, 0}, {64, 128, 64},
                                          {64, 128, -100},              {37, 70, detail::kNoDiag},
                                          {37, 70, -5},                 {5, 17, 3},
                                          {1, 1, detail::kNoDiag},      {20, 30, 40}};
  return all;
}

// The running statistics of a tile's queries: the even ones have seen an earlier tile (finite max,
// positive sum), the odd ones not (−inf, 0).
struct Stats {
  std::vector<float> m, l, alpha;
};

Stats stats(uint64_t seed) {
  Stats st{uniform(kLd, -1.0, 1.0, seed), uniform(kLd, 0.5, 4.0, seed + 1), std::vector<float>(kLd, 0.0f)};
  for (int64_t i = 1; i < kLd; i += 2) {
    st.m[static_cast<size_t>(i)] = -kInf;
    st.l[static_cast<size_t>(i)] = 0.0f;
  }
  return st;
}

// float32 values compared as testing::check_close does (infinities exactly, else relatively).
void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  testing::check_close(std::vector<double>(got.begin(), got.end()), std::vector<double>(want.begin(), want.end()), tol);
}

// bf16 values within one rounding of each other (2^-8 relative, or both below 1e-30).
void check_bf16_close(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    const double a = bfloat16_to_float(got[i]), b = bfloat16_to_float(want[i]);
    CHECK(std::fabs(a - b) <= std::max(std::fabs(b) * (1.0 / 128.0), 1e-30));
  }
}

std::vector<const AttentionTiles*> vector_sets() {
  std::vector<const AttentionTiles*> sets;
  if (cpu_isa_supported() >= CpuIsa::Avx2) sets.push_back(&detail::kAttentionTilesAvx2);
  if (cpu_isa_supported() >= CpuIsa::Avx512) sets.push_back(&detail::kAttentionTilesAvx512);
  return sets;
}

TEST_CASE("attention tiles: every vector set matches the scalar reference") {
  const AttentionTiles& ref = detail::kAttentionTilesScalar;
  for (const AttentionTiles* set : vector_sets()) {
    CAPTURE(set->name);
    for (size_t index = 0; index < shapes().size(); ++index) {
      const Shape2 t = shapes()[index];
      CAPTURE(index);
      const std::vector<float> s = uniform(kPairs * 2 * kLd, -6.0, 6.0, 10 + index);
      // softmax_step: the same probabilities, maxima exact, sums and factors to rounding.
      std::vector<float> s_want = s, s_got = s;
      Stats want = stats(20 + index), got = want;
      ref.softmax_step(s_want.data(), kLd, t.rows, t.cols, t.diag, want.m.data(), want.l.data(), want.alpha.data());
      set->softmax_step(s_got.data(), kLd, t.rows, t.cols, t.diag, got.m.data(), got.l.data(), got.alpha.data());
      std::vector<float> p_want, p_got, alpha_want, alpha_got, l_want, l_got, m_want, m_got;
      for (int j = 0; j < t.rows; ++j)
        for (int i = 0; i < t.cols; ++i) {
          p_want.push_back(s_want[static_cast<size_t>(j * kLd + i)]);
          p_got.push_back(s_got[static_cast<size_t>(j * kLd + i)]);
        }
      for (int i = 0; i < t.cols; ++i) {
        m_want.push_back(want.m[static_cast<size_t>(i)]);
        m_got.push_back(got.m[static_cast<size_t>(i)]);
        l_want.push_back(want.l[static_cast<size_t>(i)]);
        l_got.push_back(got.l[static_cast<size_t>(i)]);
        alpha_want.push_back(want.alpha[static_cast<size_t>(i)]);
        alpha_got.push_back(got.alpha[static_cast<size_t>(i)]);
      }
      check_close(p_got, p_want, 1e-6);
      CHECK(m_got == m_want);
      check_close(l_got, l_want, 1e-5);
      check_close(alpha_got, alpha_want, 1e-6);

      // rescale (factors of exactly 1 among them), probs, dscores.
      std::vector<float> factors = uniform(kLd, 0.5, 1.5, 30 + index);
      for (size_t i = 0; i < 16; ++i) factors[i] = 1.0f;
      std::vector<float> o_want = s, o_got = s;
      ref.rescale(o_want.data(), kLd, t.rows, t.cols, factors.data());
      set->rescale(o_got.data(), kLd, t.rows, t.cols, factors.data());
      CHECK(o_got == o_want);  // one multiplication each: exact

      const std::vector<float> lse = uniform(kLd, 0.0, 3.0, 40 + index);
      std::vector<float> pr_want = s, pr_got = s;
      ref.probs(pr_want.data(), kLd, t.rows, t.cols, t.diag, lse.data());
      set->probs(pr_got.data(), kLd, t.rows, t.cols, t.diag, lse.data());
      check_close(pr_got, pr_want, 1e-6);

      // dscores, where the hidden values of dp are stale ones the product left out (an infinity
      // each here): 0 there, whatever they were.
      const std::vector<float> d = uniform(kLd, -1.0, 1.0, 50 + index);
      auto hidden = [&](int j, int i) { return i < t.diag + j; };
      std::vector<float> ds_want = s;
      for (int j = 0; j < t.rows; ++j)
        for (int i = 0; i < t.cols; ++i)
          if (hidden(j, i)) ds_want[static_cast<size_t>(j * kLd + i)] = kInf;
      std::vector<float> ds_got = ds_want;
      ref.dscores(pr_want.data(), ds_want.data(), kLd, t.rows, t.cols, t.diag, d.data());
      set->dscores(pr_want.data(), ds_got.data(), kLd, t.rows, t.cols, t.diag, d.data());
      CHECK(ds_got == ds_want);  // one subtraction and one multiplication: exact
      int64_t hidden_nonzero = 0;
      for (int j = 0; j < t.rows; ++j)
        for (int i = 0; i < t.cols; ++i)
          if (hidden(j, i) && ds_want[static_cast<size_t>(j * kLd + i)] != 0.0f) ++hidden_nonzero;
      CHECK(hidden_nonzero == 0);
    }
  }
}

// A tile's float32 values at rows × cols of ld as the bf16 rows the fused steps write.
std::vector<uint16_t> bf16_rows(const std::vector<float>& x, int rows, int cols) {
  std::vector<uint16_t> out(static_cast<size_t>(2 * kPairs * kLd), 0);
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i)
      out[static_cast<size_t>(j * kLd + i)] = float_to_bfloat16(x[static_cast<size_t>(j * kLd + i)]);
  return out;
}

std::vector<uint16_t> pairs_of(const std::vector<float>& x, int rows, int cols) {
  std::vector<uint16_t> out(static_cast<size_t>(kLd / 32 * kPairs * 64), 0);
  detail::attention_pairs_avx512(x.data(), kLd, rows, cols, kPairs, out.data());
  out.resize(static_cast<size_t>((cols + 31) / 32 * kPairs * 64));
  return out;
}

TEST_CASE("attention tiles: the bfloat16 path's fused steps equal the steps they fuse, bit for bit") {
  if (cpu_isa_supported() < CpuIsa::Avx512Bf16) return;  // the CPUs that run them have it
  const AttentionTiles& f32 = detail::kAttentionTilesAvx512;
  const AttentionTilesBf16& fused = detail::kAttentionTilesBf16Avx512Bf16;
  const AttentionTilesBf16& ref = detail::kAttentionTilesBf16Scalar;
  const size_t panel_values = static_cast<size_t>(kLd / 32 * kPairs * 64);
  for (const float scale : {0.125f, 0.3f, 1.0f}) {
    CAPTURE(scale);
    const std::vector<float> scales(kLd, scale);
    for (size_t index = 0; index < shapes().size(); ++index) {
      const Shape2 t = shapes()[index];
      CAPTURE(index);
      std::vector<float> s = uniform(kPairs * 2 * kLd, -40.0, 40.0, 60 + index);
      // softmax_step_pairs against rescale + softmax_step + the pair packer.
      std::vector<float> s_want = s;
      Stats want = stats(70 + index), got = want, scalar = want;
      if (scale != 1.0f) f32.rescale(s_want.data(), kLd, t.rows, t.cols, scales.data());
      f32.softmax_step(s_want.data(), kLd, t.rows, t.cols, t.diag, want.m.data(), want.l.data(), want.alpha.data());
      std::vector<uint16_t> pairs_got(panel_values, 0xFFFF), pairs_scalar(panel_values, 0xFFFF);
      const std::vector<float> s_before = s;
      fused.softmax_step_pairs(s.data(), kLd, t.rows, t.cols, t.diag, scale, got.m.data(), got.l.data(),
                               got.alpha.data(), kPairs, pairs_got.data());
      CHECK(s == s_before);
      pairs_got.resize(static_cast<size_t>((t.cols + 31) / 32 * kPairs * 64));
      CHECK(pairs_got == pairs_of(s_want, t.rows, t.cols));
      for (int i = 0; i < t.cols; ++i) {
        const size_t c = static_cast<size_t>(i);
        CHECK(got.m[c] == want.m[c]);
        CHECK(got.l[c] == want.l[c]);
        CHECK(got.alpha[c] == want.alpha[c]);
      }
      ref.softmax_step_pairs(s.data(), kLd, t.rows, t.cols, t.diag, scale, scalar.m.data(), scalar.l.data(),
                             scalar.alpha.data(), kPairs, pairs_scalar.data());
      pairs_scalar.resize(pairs_got.size());
      check_bf16_close(pairs_got, pairs_scalar);

      // probs_rows against rescale + probs + rounding, with and without the rows. Columns that
      // every row hides (i < diag) hold NaN: the backward leaves their scores uncomputed, and
      // their probabilities must still be 0.
      const std::vector<float> lse = uniform(kLd, 0.0, 30.0, 80 + index);
      std::vector<float> s_hidden = s;
      for (int j = 0; j < t.rows; ++j)
        for (int64_t i = 0; i < std::min<int64_t>(t.diag, t.cols); ++i)
          s_hidden[static_cast<size_t>(j * kLd + i)] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> p_want = s_hidden, p_got = s_hidden, p_alone = s_hidden, p_scalar = s_hidden;
      if (scale != 1.0f) f32.rescale(p_want.data(), kLd, t.rows, t.cols, scales.data());
      f32.probs(p_want.data(), kLd, t.rows, t.cols, t.diag, lse.data());
      std::vector<uint16_t> rows_got(static_cast<size_t>(2 * kPairs * kLd), 0xFFFF), rows_scalar = rows_got;
      fused.probs_rows(p_got.data(), kLd, t.rows, t.cols, t.diag, scale, lse.data(), kPairs, rows_got.data());
      fused.probs_rows(p_alone.data(), kLd, t.rows, t.cols, t.diag, scale, lse.data(), kPairs, nullptr);
      CHECK(p_got == p_want);
      CHECK(p_alone == p_want);
      CHECK(rows_got == bf16_rows(p_want, t.rows, t.cols));
      ref.probs_rows(p_scalar.data(), kLd, t.rows, t.cols, t.diag, scale, lse.data(), kPairs, rows_scalar.data());
      check_bf16_close(rows_got, rows_scalar);

      // dscores_bf16 against dscores + rounding, through values the instruction would round
      // differently (denormals, a NaN).
      std::vector<float> dp = uniform(kPairs * 2 * kLd, -1.0, 1.0, 90 + index);
      dp[3] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> p = p_want;
      p[5] = 1e-39f;
      p[static_cast<size_t>(kLd + 7)] = -3e-39f;
      std::vector<float> ds_want = dp;
      f32.dscores(p.data(), ds_want.data(), kLd, t.rows, t.cols, detail::kNoDiag, lse.data());
      std::vector<uint16_t> ds_rows(static_cast<size_t>(2 * kPairs * kLd), 0xFFFF), ds_pairs(panel_values, 0xFFFF);
      std::vector<uint16_t> ds_rows_scalar = ds_rows, ds_pairs_scalar = ds_pairs;
      const std::vector<float> dp_before = dp;
      fused.dscores_bf16(p.data(), dp.data(), kLd, t.rows, t.cols, lse.data(), kPairs, ds_rows.data(), ds_pairs.data());
      CHECK(std::memcmp(dp.data(), dp_before.data(), dp.size() * sizeof(float)) == 0);  // holds a NaN
      CHECK(ds_rows == bf16_rows(ds_want, t.rows, t.cols));
      ds_pairs.resize(static_cast<size_t>((t.cols + 31) / 32 * kPairs * 64));
      CHECK(ds_pairs == pairs_of(ds_want, t.rows, t.cols));
      ref.dscores_bf16(p.data(), dp.data(), kLd, t.rows, t.cols, lse.data(), kPairs, ds_rows_scalar.data(),
                       ds_pairs_scalar.data());
      ds_pairs_scalar.resize(ds_pairs.size());
      CHECK(ds_rows_scalar == ds_rows);  // no exp: the scalar reference gives the same bits
      CHECK(ds_pairs_scalar == ds_pairs);
    }
  }
}

}  // namespace
}  // namespace weft
