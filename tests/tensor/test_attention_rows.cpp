// The fused attention's decode path (tensor/cpu/attention/attention_rows.h): float32 and bfloat16
// attention with at most four queries per head, which reads keys and values in place instead of
// packing them into tiles. The row kernels at every vector level against the scalar reference on
// the same inputs (feature and key counts that leave vector tails, no keys at all, a fully masked
// row); then scaled_dot_product_attention at decode shapes (one query against a cache, a few
// causal queries, bool and float masks, grouped-query heads, keys with a row stride past the head
// size) at every instruction-set level against the float64 composition of the same rounded inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/float_formats.h"

namespace weft {
namespace {

using detail::AttentionRows;

std::vector<float> uniform(int64_t n, uint64_t seed) {
  Generator g(seed);
  return sub(mul(rand({n}, kFloat32, &g), 4.0), 2.0).to_vector<float>();
}

std::vector<uint16_t> bf16_bits(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = float_to_bfloat16(x[i]);
  return out;
}

// |got − want| ≤ tol · (1 + |want|) element by element.
void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
      continue;
    }
    CHECK(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

std::vector<const AttentionRows*> vector_sets() {
  std::vector<const AttentionRows*> sets;
  if (cpu_isa_supported() >= CpuIsa::Avx2) sets.push_back(&detail::kAttentionRowsAvx2);
  if (cpu_isa_supported() >= CpuIsa::Avx512) sets.push_back(&detail::kAttentionRowsAvx512);
  return sets;
}

// Keys and values as the kernels take them: float32 values or bfloat16 bits.
std::vector<float> as_elements(const std::vector<float>& x, float) { return x; }
std::vector<uint16_t> as_elements(const std::vector<float>& x, uint16_t) { return bf16_bits(x); }

void scores(const AttentionRows& set, const float* q, const float* k, int64_t ld, int64_t rows, int64_t E, float* s) {
  set.scores_f32(q, k, ld, rows, E, 0.125f, s);
}
void scores(const AttentionRows& set, const float* q, const uint16_t* k, int64_t ld, int64_t rows, int64_t E, float* s) {
  set.scores_bf16(q, k, ld, rows, E, 0.125f, s);
}
void accumulate(const AttentionRows& set, const float* p, const float* v, int64_t ld, int64_t rows, int64_t E, float* o) {
  set.accumulate_f32(p, v, ld, rows, E, o);
}
void accumulate(const AttentionRows& set, const float* p, const uint16_t* v, int64_t ld, int64_t rows, int64_t E,
                float* o) {
  set.accumulate_bf16(p, v, ld, rows, E, o);
}

TEST_CASE_TEMPLATE("attention row kernels match the scalar reference at every vector level", Element, float, uint16_t) {
  const AttentionRows& ref = detail::kAttentionRowsScalar;
  for (const AttentionRows* set : vector_sets()) {
    CAPTURE(set->name);
    for (const int64_t E : {1, 15, 16, 33, 64, 100})
      for (const int64_t rows : {0, 1, 17, 130}) {
        CAPTURE(E);
        CAPTURE(rows);
        const int64_t ld = E + 3;
        const std::vector<float> q = uniform(E, 1 + E);
        const std::vector<Element> kv = as_elements(uniform(std::max<int64_t>(rows, 1) * ld, 2 + E + rows), Element{});
        std::vector<float> want(static_cast<size_t>(rows)), got(static_cast<size_t>(rows));
        scores(ref, q.data(), kv.data(), ld, rows, E, want.data());
        scores(*set, q.data(), kv.data(), ld, rows, E, got.data());
        check_close(got, want, 1e-5);

        // Softmax numerators over the reference scores, a few hidden (−inf).
        for (int64_t j = 0; j < rows; j += 5) want[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity();
        got = want;
        float m_want = 0.0f, m_got = 0.0f;
        const float l_want = ref.exp_row(want.data(), rows, &m_want);
        const float l_got = set->exp_row(got.data(), rows, &m_got);
        CHECK(m_got == m_want);
        CHECK(std::fabs(l_got - l_want) <= 1e-5 * (1.0 + l_want));
        check_close(got, want, 1e-6);

        std::vector<float> o_want(static_cast<size_t>(E), 0.5f), o_got = o_want;
        accumulate(ref, want.data(), kv.data(), ld, rows, E, o_want.data());
        accumulate(*set, want.data(), kv.data(), ld, rows, E, o_got.data());
        check_close(o_got, o_want, 1e-5);
      }
    // Every key hidden: m = −inf, numerators and sum 0 (the caller writes zeros and lse = +inf).
    std::vector<float> hidden(37, -std::numeric_limits<float>::infinity());
    float m = 0.0f;
    CHECK(set->exp_row(hidden.data(), 37, &m) == 0.0f);
    CHECK(m == -std::numeric_limits<float>::infinity());
    CHECK(*std::max_element(hidden.begin(), hidden.end()) == 0.0f);
  }
}

// Standard normal values already rounded to `dtype`, held in float64.
Tensor normal(const Shape& shape, uint64_t seed, DType dtype) {
  Generator g(seed);
  return randn(shape, kFloat64, &g).to(dtype).to(kFloat64);
}

struct DecodeCase {
  Shape q, k, v;
  bool causal = false, gqa = false;
  Tensor mask = {};
};

TEST_CASE("sdpa float32 and bfloat16 decode shapes match the float64 composition at every ISA level") {
  Generator g(7);
  const std::vector<DecodeCase> cases = {
      {{2, 3, 1, 64}, {2, 3, 37, 64}, {2, 3, 37, 64}},                  // one query against a cache
      {{1, 4, 3, 16}, {1, 2, 50, 16}, {1, 2, 50, 16}, true, true},      // a causal chunk, GQA
      {{2, 2, 1, 20}, {2, 2, 33, 20}, {2, 2, 33, 7}, false, false, ge(rand({2, 1, 1, 33}, kFloat64, &g), 0.3)},
      {{1, 2, 4, 8}, {1, 2, 70, 8}, {1, 2, 70, 8}, false, false, mul(rand({4, 70}, kFloat32, &g), -3.0)},
      {{1, 1, 1, 8}, {1, 1, 0, 8}, {1, 1, 0, 8}},                         // no keys: zeros
  };
  // bfloat16: one rounding of outputs of at most a few units; float32: sums of a few hundred
  // float32 products.
  for (const auto& precision : {std::pair{DType::BFloat16, 1e-2}, std::pair{DType::Float32, 1e-5}}) {
    const DType dtype = precision.first;
    const double tol = precision.second;
    CAPTURE(dtype);
    for (size_t index = 0; index < cases.size(); ++index) {
      const DecodeCase& c = cases[index];
      CAPTURE(index);
      const Tensor q = normal(c.q, 10 + index, dtype), v = normal(c.v, 30 + index, dtype);
      // Keys as a transposed (N, S, H, E) buffer, as a cache laid out by position would give: a row
      // stride of H·E.
      const Tensor k = normal({c.k[0], c.k[2], c.k[1], c.k[3]}, 20 + index, dtype).transpose(1, 2);
      const Tensor mask64 = c.mask.defined() && c.mask.dtype() != DType::Bool ? c.mask.to(kFloat64) : c.mask;
      // No keys at all: zeros (the composition cannot take a softmax over nothing).
      const Tensor want = c.k[2] == 0 ? zeros({c.q[0], c.q[1], c.q[2], c.v[3]}, kFloat64)
                                      : scaled_dot_product_attention(q, k, v, mask64, 0.0, c.causal, std::nullopt, c.gqa);
      Tensor reference;
      for (const CpuIsa isa : cpu_isas_supported()) {
        CAPTURE(cpu_isa_name(isa));
        CpuIsaGuard guard(isa);
        const Tensor got = scaled_dot_product_attention(q.to(dtype), k.to(dtype).transpose(1, 2).contiguous().transpose(1, 2),
                                                        v.to(dtype), c.mask, 0.0, c.causal, std::nullopt, c.gqa);
        CHECK(got.dtype() == dtype);
        REQUIRE(got.shape() == want.shape());
        CHECK(sub(got.to(kFloat64), want).abs().max().item<double>() <= tol);
        if (!reference.defined()) reference = got;
        CHECK(sub(got.to(kFloat64), reference.to(kFloat64)).abs().max().item<double>() <= tol);
      }
    }
  }
}

}  // namespace
}  // namespace weft
