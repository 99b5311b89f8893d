// The int8 GEMM: every instruction-set path this machine (or the emulation build) supports
// against the scalar reference, in the same run, on shapes that exercise partial register tiles,
// partial k-groups, several row blocks and panels, and the extreme values; exact equality.
#include <doctest/doctest.h>

#include <array>
#include <random>

#include "precision/quant/int8_gemm.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision::quant;

namespace {

std::vector<int8_t> random_int8(int64_t count, std::mt19937& rng, int lo = -127, int hi = 127) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int8_t> v(static_cast<size_t>(count));
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

}  // namespace

TEST_CASE("int8 GEMM: every supported instruction set equals the scalar reference exactly") {
  std::mt19937 rng(11);
  struct Shape3 {
    int64_t m, n, k;
  };
  const Shape3 shapes[] = {{2, 3, 0}, {1, 1, 1},   {1, 17, 3},  {3, 5, 7},    {4, 16, 4},   {9, 33, 13},
                           {65, 40, 66}, {130, 70, 100}, {8, 300, 257}, {2, 1, 1000},
                           // AMX: whole 32×32 tiles stored in place, K a multiple of 64; two row
                           // blocks of 256 with a partial tile; B large enough to pack on threads.
                           {64, 64, 128}, {300, 45, 130}, {40, 1100, 1000},
                           // Each thread packing its own copy of A (Note [Each thread its own copy
                           // of A]): a partial k-group and panel, two row blocks.
                           {33, 520, 203}, {257, 300, 100},
                           // Fewer columns than a panel, computed as Cᵀ = B·Aᵀ (Note [Few columns:
                           // Cᵀ = B·Aᵀ]): the MLP's last layer, and a partial k-group.
                           {128, 10, 512}, {40, 3, 70}};
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const auto& s : shapes) {
      const auto a = random_int8(s.m * s.k, rng), b = random_int8(s.n * s.k, rng);
      std::vector<int32_t> expected(static_cast<size_t>(s.m * s.n)), got(expected.size(), -7);
      int8_gemm_reference(a.data(), b.data(), expected.data(), s.m, s.n, s.k);
      int8_gemm(a.data(), b.data(), got.data(), s.m, s.n, s.k);
      INFO("isa ", cpu_isa_name(isa), " M=", s.m, " N=", s.n, " K=", s.k);
      CHECK(got == expected);
    }
    // The extremes: ±127 everywhere, the largest sums of either sign.
    const int64_t m = 5, n = 19, k = 300;
    std::vector<int8_t> a(m * k, 127), b(n * k, -127);
    for (int64_t i = 0; i < k; i += 2) a[i] = -127;
    std::vector<int32_t> expected(m * n), got(m * n);
    int8_gemm_reference(a.data(), b.data(), expected.data(), m, n, k);
    int8_gemm(a.data(), b.data(), got.data(), m, n, k);
    CHECK(got == expected);
    std::vector<int8_t> pos(m * k, 127), neg(n * k, -127);
    int8_gemm(pos.data(), neg.data(), got.data(), m, n, k);
    CHECK(got[0] == -127 * 127 * k);
  }
}

TEST_CASE("int8 GEMM: packed weights are reused across products and keep their instruction set") {
  std::mt19937 rng(5);
  const int64_t n = 37, k = 45;
  const auto b = random_int8(n * k, rng);
  const PackedInt8Matrix packed = pack_int8_matrix(b.data(), n, k);
  CHECK(packed.rows() == n);
  CHECK(packed.cols() == k);
  CHECK(packed.isa() == cpu_isa());
  for (int64_t m : {1, 7, 64}) {
    const auto a = random_int8(m * k, rng);
    std::vector<int32_t> expected(m * n), got(m * n);
    int8_gemm_reference(a.data(), b.data(), expected.data(), m, n, k);
    int8_gemm(a.data(), m, packed, got.data());
    CHECK(got == expected);
  }
}

TEST_CASE("int8 GEMM: storage reused for a smaller B holds nothing of the larger one") {
  // The per-product B and repack_int8_matrix reuse storage without clearing it: the padding of a
  // partial k-group and of K must be written afresh after a B of -127.
  std::mt19937 rng(11);
  const int64_t big_n = 100, big_k = 300;
  const std::vector<int8_t> big_a(3 * big_k, 127), big_b(big_n * big_k, -127);
  std::vector<int32_t> big_c(3 * big_n);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    PackedInt8Matrix reused = pack_int8_matrix(big_b.data(), big_n, big_k);
    for (const auto& shape : std::vector<std::array<int64_t, 3>>{{5, 33, 37}, {2, 1, 5}, {40, 64, 130}}) {
      const int64_t m = shape[0], n = shape[1], k = shape[2];
      int8_gemm(big_a.data(), big_b.data(), big_c.data(), 3, big_n, big_k);  // fills the thread's storage
      const auto a = random_int8(m * k, rng), b = random_int8(n * k, rng);
      std::vector<int32_t> expected(m * n), got(m * n), got_repacked(m * n);
      int8_gemm_reference(a.data(), b.data(), expected.data(), m, n, k);
      int8_gemm(a.data(), b.data(), got.data(), m, n, k);
      repack_int8_matrix(reused, b.data(), n, k);
      int8_gemm(a.data(), m, reused, got_repacked.data());
      INFO("isa ", cpu_isa_name(isa), " M=", m, " N=", n, " K=", k);
      CHECK(got == expected);
      CHECK(got_repacked == expected);
      CHECK(reused.rows() == n);
      CHECK(reused.cols() == k);
    }
  }
}

TEST_CASE("int8 GEMM refuses -128, oversized K, and packing above the CPU's level") {
  std::vector<int8_t> a = {1, -128, 3}, b = {1, 2, 3};
  std::vector<int32_t> c(1);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CHECK_THROWS_WITH_AS(int8_gemm(a.data(), b.data(), c.data(), 1, 1, 3),
                         "[int8_gemm] operands must lie in [-127, 127] (vector-wise int8 codes); A holds -128 at element 1",
                         Error);
    CHECK_THROWS_WITH_AS(int8_gemm(b.data(), a.data(), c.data(), 1, 1, 3), doctest::Contains("B holds -128"), Error);
  }
  // The packers find -128 on every path: each thread its own A (m ≤ n), the shared split (m > n),
  // B packed once, C computed transposed (the operands swapped inside); the first element is
  // named, B before A.
  std::mt19937 rng(3);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const auto& shape : std::vector<std::array<int64_t, 3>>{{40, 1100, 1000}, {600, 45, 130}, {128, 10, 512}}) {
      const int64_t m = shape[0], n = shape[1], k = shape[2];
      auto big_a = random_int8(m * k, rng), big_b = random_int8(n * k, rng);
      std::vector<int32_t> big_c(static_cast<size_t>(m * n));
      INFO("isa ", cpu_isa_name(isa), " M=", m, " N=", n, " K=", k);
      big_a[static_cast<size_t>(m * k - 5)] = -128;
      CHECK_THROWS_WITH_AS(int8_gemm(big_a.data(), big_b.data(), big_c.data(), m, n, k),
                           doctest::Contains(("A holds -128 at element " + std::to_string(m * k - 5)).c_str()), Error);
      const PackedInt8Matrix packed = pack_int8_matrix(big_b.data(), n, k);
      CHECK_THROWS_WITH_AS(int8_gemm(big_a.data(), m, packed, big_c.data()), doctest::Contains("A holds -128"), Error);
      big_b[static_cast<size_t>(n * k / 2)] = -128;
      CHECK_THROWS_WITH_AS(int8_gemm(big_a.data(), big_b.data(), big_c.data(), m, n, k),
                           doctest::Contains(("B holds -128 at element " + std::to_string(n * k / 2)).c_str()), Error);
      PackedInt8Matrix refused = pack_int8_matrix(big_a.data(), 2, k);  // not empty before
      CHECK_THROWS_WITH_AS(repack_int8_matrix(refused, big_b.data(), n, k), doctest::Contains("B holds -128"), Error);
      CHECK(refused.empty());
    }
  }
  CHECK_THROWS_WITH_AS(pack_int8_matrix(b.data(), 1, kInt8GemmMaxK + 1), doctest::Contains("K must be at most"), Error);
  if (cpu_isa_supported() < CpuIsa::Amx)
    CHECK_THROWS_WITH_AS(pack_int8_matrix(b.data(), 1, 3, CpuIsa::Amx), doctest::Contains("cannot pack for"),
                         Error);
}

TEST_CASE("int8 GEMM at a few rows reads B in place: exact at every level, on threads, at the extremes") {
  // Up to 4 rows from AVX2 up (Note [A few rows: B in place]): partial 32- and 64-byte chunks of
  // K, partial groups of 4 rows of B, one thread and several (N·K·M past the threading threshold).
  std::mt19937 rng(5);
  const std::array<int64_t, 3> shapes[] = {{1, 1, 1},    {1, 7, 63},    {2, 9, 64},   {3, 4, 65},
                                           {4, 13, 200}, {1, 2048, 768}, {4, 3000, 129}, {2, 5, 4097},
                                           {1, 6, 31},   {3, 5, 33}};
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const auto& shape : shapes) {
      const int64_t m = shape[0], n = shape[1], k = shape[2];  // not bindings: INFO captures them (clang 14)
      const auto a = random_int8(m * k, rng), b = random_int8(n * k, rng);
      std::vector<int32_t> expected(static_cast<size_t>(m * n)), got(expected.size(), -7);
      int8_gemm_reference(a.data(), b.data(), expected.data(), m, n, k);
      int8_gemm(a.data(), b.data(), got.data(), m, n, k);
      INFO("isa ", cpu_isa_name(isa), " M=", m, " N=", n, " K=", k);
      CHECK(got == expected);
    }
    // The largest K, every product ±127²: sums of ±127²·K, which only just fit in int32.
    const int64_t k = kInt8GemmMaxK, m = 3, n = 5;
    std::vector<int8_t> a(static_cast<size_t>(m * k), 127), b(static_cast<size_t>(n * k), 127);
    std::fill(a.begin() + k, a.begin() + 2 * k, int8_t{-127});
    for (int64_t j = 0; j < k; j += 2) a[static_cast<size_t>(2 * k + j)] = -127;
    std::fill(b.begin(), b.begin() + k, int8_t{-127});
    std::vector<int32_t> got(static_cast<size_t>(m * n));
    int8_gemm(a.data(), b.data(), got.data(), m, n, k);
    INFO("isa ", cpu_isa_name(isa));
    CHECK(got[0] == -127 * 127 * k);
    CHECK(got[1] == 127 * 127 * k);
    CHECK(got[n] == 127 * 127 * k);
    CHECK(got[n + 1] == -127 * 127 * k);
    CHECK(got[2 * n] == (k % 2 == 0 ? 0 : 127 * 127));  // alternating -127, 127, ... against -127
  }
}
