// B packed ahead (tensor/cpu/gemm/gemm.h: gemm_pack_b, gemm_packed) and the packed-weight cache
// that linear uses for inference (tensor/packed_weights.h), at every instruction-set level with
// bfloat16 K-pair kernels (AVX-512 BF16, AMX). A product against B packed ahead reads the same
// panels a per-call packing writes, so it must give gemm()'s bits exactly, for B row-major and
// transposed (a linear weight), ragged N, one K chunk and several, accumulating and not, with
// float32 and bfloat16 C. The cache: linear's bits with and without it; a weight changed in place
// (its version moves) repacked, not reused; a weight that requires grad, one row, a limit too
// small, a freed weight and a lowered limit all leave nothing held, and the product still right;
// a copy made at one level is made again at another.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/gemm/gemm.h"

using namespace weft;

namespace {

std::vector<CpuIsa> pair_levels() {
  std::vector<CpuIsa> levels;
  for (const CpuIsa isa : cpu_isas_supported())
    if (isa >= CpuIsa::Avx512Bf16) levels.push_back(isa);
  return levels;
}

Tensor bf16_normal(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kFloat32, &g).to(DType::BFloat16);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.shape() == b.shape());
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Sets a limit for a scope and empties the cache on both ends.
struct PackedLimit {
  explicit PackedLimit(int64_t bytes) {
    clear_packed_weights();
    set_packed_weight_limit(bytes);
  }
  ~PackedLimit() {
    set_packed_weight_limit(0);
    clear_packed_weights();
  }
};

}  // namespace

TEST_CASE("a B packed ahead gives gemm()'s bits at every level with bfloat16 K-pair kernels") {
  using detail::GemmMatrix;
  struct Shape3 {
    int64_t m, n, k;
  };
  const Shape3 shapes[] = {{2, 5, 32}, {37, 33, 100}, {130, 200, 768}, {9, 64, 1100}};
  for (const CpuIsa isa : pair_levels()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    for (const Shape3& s : shapes)
      for (const bool transposed : {false, true})
        for (const bool accumulate : {false, true}) {
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(transposed);
          CAPTURE(accumulate);
          REQUIRE(detail::gemm_packs_b_ahead(s.k, s.n));
          const Tensor a = bf16_normal({s.m, s.k}, 1);
          // B (k×n) row-major, or the transpose of a row-major W (n×k): linear's weight.
          const Tensor w = bf16_normal({s.n, s.k}, 2), b_rows = bf16_normal({s.k, s.n}, 3);
          const GemmMatrix am{a.data_ptr(), s.k, 1, true};
          const GemmMatrix bm = transposed ? GemmMatrix{w.data_ptr(), 1, s.k, true}
                                           : GemmMatrix{b_rows.data_ptr(), s.n, 1, true};
          const detail::GemmPackedB packed = detail::gemm_pack_b(s.k, s.n, bm);
          const Tensor start = randn({s.m, s.n}, kFloat32);
          Tensor want = start.clone(), got = start.clone();
          detail::gemm(s.m, s.n, s.k, am, bm, want.data<float>(), s.n, accumulate);
          detail::gemm_packed(s.m, s.n, s.k, am, packed, got.data<float>(), s.n, accumulate);
          CHECK(same_bits(got, want));
          // The product is not a copy of its start: B packed ahead is really read.
          CHECK(!same_bits(got, start));
          if (detail::gemm_stores_bf16(s.m, s.n, s.k)) {
            const Tensor start16 = start.to(DType::BFloat16);
            Tensor want16 = start16.clone(), got16 = start16.clone();
            detail::gemm_to_bf16(s.m, s.n, s.k, am, bm, static_cast<uint16_t*>(want16.data_ptr()), s.n, accumulate);
            detail::gemm_packed(s.m, s.n, s.k, am, packed, nullptr, s.n, accumulate,
                                static_cast<uint16_t*>(got16.data_ptr()));
            CHECK(same_bits(got16, want16));
          }
        }
    // Packed at this level, refused at another: its panels are another kernel set's.
    const Tensor w = bf16_normal({40, 64}, 4), a = bf16_normal({3, 64}, 5);
    const detail::GemmPackedB packed = detail::gemm_pack_b(64, 40, {w.data_ptr(), 1, 64, true});
    for (const CpuIsa other : pair_levels()) {
      if (other == isa) continue;
      CpuIsaGuard switched(other);
      std::vector<float> c(3 * 40);
      CHECK_THROWS_AS(detail::gemm_packed(3, 40, 64, {a.data_ptr(), 64, 1, true}, packed, c.data(), 40, false), Error);
    }
  }
}

TEST_CASE("linear keeps a frozen bfloat16 weight packed, with the bits of the unpacked product") {
  NoGradGuard no_grad;
  for (const CpuIsa isa : pair_levels()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    int64_t held = 0;  // the weight's packed copy: its bytes and padding to whole panels
    const Tensor x = bf16_normal({2, 24, 96}, 11);  // 48 rows
    const Tensor weight = bf16_normal({80, 96}, 12), bias = bf16_normal({80}, 13);
    const Tensor want = linear(x, weight, bias);
    {
      PackedLimit limit(int64_t{1} << 30);
      const Tensor first = linear(x, weight, bias);
      CHECK(same_bits(first, want));
      held = packed_weight_bytes();
      CHECK(held >= 80 * 96 * 2);
      CHECK(same_bits(linear(x, weight, bias), want));  // the packed copy reused
      CHECK(packed_weight_bytes() == held);
      // No bias, and the weight as the transposed view of a stored [in, out] (GPT-2's Conv1D);
      // a weight that requires grad is never packed, so it gives the unpacked bits.
      const Tensor stored = weight.t().contiguous();
      CHECK(same_bits(linear(x, stored.t()), linear(x, stored.t().clone().requires_grad_())));
      CHECK(same_bits(linear(x, weight, bias), want));

      // Changed in place: its version moves, so the copy is made again, not reused.
      const Tensor doubled_want = linear(x, mul(weight, 2.0).requires_grad_(), bias);
      CHECK(!same_bits(doubled_want, want));
      const int64_t before = packed_weight_bytes();
      Tensor(weight).mul_(2.0);
      CHECK(same_bits(linear(x, weight, bias), doubled_want));
      CHECK(packed_weight_bytes() == before);  // replaced, not added
      Tensor(weight).mul_(0.5);

      // A lower limit than what is held drops it all.
      set_packed_weight_limit(1);
      CHECK(packed_weight_bytes() == 0);
    }
    {
      PackedLimit limit(int64_t{1} << 30);
      // One row reads the weight in place (batch-1 kernels); a weight that requires grad changes
      // every step: neither is packed.
      (void)linear(x.narrow(1, 0, 1).narrow(0, 0, 1), weight, bias);
      CHECK(packed_weight_bytes() == 0);
      const Tensor trained = weight.clone().requires_grad_();
      CHECK(same_bits(linear(x, trained, bias), want));
      CHECK(packed_weight_bytes() == 0);
      // A float32 x promotes the product to float32: no bfloat16 weight to pack.
      (void)linear(x.to(kFloat32), weight, bias);
      CHECK(packed_weight_bytes() == 0);
    }
    {
      PackedLimit limit(80 * 96);  // half the weight's bytes: no room
      CHECK(same_bits(linear(x, weight, bias), want));
      CHECK(packed_weight_bytes() == 0);
    }
    {
      PackedLimit limit(int64_t{1} << 30);
      // A freed weight's copy goes when the next one is made.
      {
        const Tensor temporary = bf16_normal({64, 96}, 14);
        (void)linear(x, temporary);
        CHECK(packed_weight_bytes() >= 64 * 96 * 2);
      }
      (void)linear(x, weight, bias);
      CHECK(packed_weight_bytes() == held);
    }
  }
}

TEST_CASE("a weight packed at one level is packed again at another, never read as the other's panels") {
  NoGradGuard no_grad;
  const std::vector<CpuIsa> levels = pair_levels();
  if (levels.size() < 2) return;
  const Tensor x = bf16_normal({40, 64}, 31), weight = bf16_normal({48, 64}, 32);
  std::vector<Tensor> want;
  for (const CpuIsa isa : levels) {
    CpuIsaGuard guard(isa);
    want.push_back(linear(x, weight));
  }
  PackedLimit limit(int64_t{1} << 30);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < levels.size(); ++i) {
      CAPTURE(cpu_isa_name(levels[i]));
      CpuIsaGuard guard(levels[i]);
      CHECK(same_bits(linear(x, weight), want[i]));
      CHECK(packed_weight_bytes() > 0);
    }
}

TEST_CASE("the packed-weight cache is off by default and at levels without bfloat16 K-pair kernels") {
  NoGradGuard no_grad;
  CHECK(packed_weight_limit() == 0);
  const Tensor x = bf16_normal({16, 64}, 21), weight = bf16_normal({32, 64}, 22);
  (void)linear(x, weight);
  CHECK(packed_weight_bytes() == 0);
  PackedLimit limit(int64_t{1} << 30);
  for (const CpuIsa isa : cpu_isas_supported()) {
    if (isa >= CpuIsa::Avx512Bf16) continue;
    CpuIsaGuard guard(isa);
    (void)linear(x, weight);
    CHECK(packed_weight_bytes() == 0);
  }
}
