// weft's own GEMM (tensor/cpu/gemm/) at every instruction-set level this machine supports (all
// of them in an emulation build), for float32, bfloat16 inputs and float64: each product against a
// naive product in double of the same values, and against the scalar reference kernel's result
// in the same run. The cases cover the layouts matmul hands over in place (transposed views,
// padded and repeated rows, both strides non-unit, batches), the edges of the tiles and blocks
// (M = 128 over 6-row tiles, N = 10, K = 784 in equal chunks, odd K for bf16 pairs, more columns
// than one column block), both the small (unpacked, one thread) and the blocked, threaded path,
// the transposed product of few rows times a transposed B (Note [Few rows times a transposed B]:
// whole rows of W streamed, or K cut into chunks), linear's fused bias, A, B or Bᵀ made block by
// block by a source (GemmBlockSource: how the 4-bit layer multiplies a weight it dequantizes), and
// a bfloat16 C rounded by the GEMM's own stores, bit for bit against the float32 product rounded.
//
// Error bound: each C element is a dot product, so it is compared with |got − exact| ≤
// tol · Σ_p |a_ip·b_pj|, the standard bound for a sum computed in floating point.
// The float64 product's bound (and the reference's own, in double too) is K·2^-53 each: with K at
// most 1100 in these cases, 2 · 1100 · 1.11e-16 ≈ 2.5e-13 between the two.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gemm_levels.h"
#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/gemm/packing.h"

using namespace weft;
using testing::random;

namespace {

constexpr double kFloat32Tol = 2e-5;
constexpr double kBFloat16Tol = 8e-3;  // the output is rounded to bfloat16 (2^-8 relative)
constexpr double kFloat64Tol = 2.5e-13;

double tolerance(DType dtype) {
  return dtype == kFloat32 ? kFloat32Tol : dtype == kFloat64 ? kFloat64Tol : kBFloat16Tol;
}

// The exact product of the values of a (…, M, K) and b (…, K, N) in double, and Σ|a||b|.
struct Reference {
  std::vector<double> value, magnitude;
};

Reference reference(const Tensor& a, const Tensor& b) {
  const Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a, b3 = b.dim() == 2 ? b.unsqueeze(0) : b;
  const int64_t batch = std::max(a3.size(0), b3.size(0)), m = a3.size(1), k = a3.size(2), n = b3.size(2);
  const auto av = a3.expand({batch, m, k}).contiguous().to_vector<double>();
  const auto bv = b3.expand({batch, k, n}).contiguous().to_vector<double>();
  Reference r{std::vector<double>(static_cast<size_t>(batch * m * n)), std::vector<double>(static_cast<size_t>(batch * m * n))};
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        const double x = av[static_cast<size_t>((s * m + i) * k + p)];
        for (int64_t j = 0; j < n; ++j) {
          const double y = bv[static_cast<size_t>((s * k + p) * n + j)];
          r.value[static_cast<size_t>((s * m + i) * n + j)] += x * y;
          r.magnitude[static_cast<size_t>((s * m + i) * n + j)] += std::abs(x * y);
        }
      }
  return r;
}

// The largest |got − want| / (magnitude + tiny) over all elements; one CHECK per product.
double worst_error(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& magnitude) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / (magnitude[i] + 1e-30));
  return worst;
}

struct Case {
  std::string name;
  Tensor a, b;
  // One product for each path through the GEMM (blocked, small, transposed, batch of 1, K chunks,
  // several column blocks, K = 1): the sweeps too slow under the sanitizers to take every case.
  bool stands_for_its_path = false;
};
constexpr bool kStandsForItsPath = true;

// Cases in float32, whose bfloat16 run rounds the same values to bfloat16 (views kept), or in
// float64 (values that use all 53 bits, so the products round too).
std::vector<Case> cases(DType dtype) {
  const DType drawn = dtype == kFloat64 ? kFloat64 : kFloat32;
  auto r = [&](const Shape& shape, uint64_t seed) { return random(shape, seed, drawn).to(dtype); };
  std::vector<Case> out;
  out.push_back({"MLP forward 128x784 · (64x784)ᵀ: K in 4 chunks, M = 128 over 6-row tiles, threaded",
                 r({128, 784}, 1), r({64, 784}, 2).t()});
  out.push_back({"N = 10 against a transposed weight (small path, B packed)", r({128, 512}, 3), r({10, 512}, 4).t(),
                 kStandsForItsPath});
  out.push_back({"N = 10 row-major (small path, B read in place, masked columns)", r({128, 512}, 5), r({512, 10}, 6)});
  out.push_back({"dW = dYᵀ · x: A transposed, split along N", r({128, 96}, 7).t(), r({128, 200}, 8)});
  out.push_back({"dX = dY · W: row-major, split along M", r({300, 100}, 9), r({100, 90}, 10)});
  out.push_back({"more rows than one M block", r({1000, 40}, 11), r({40, 60}, 12)});
  out.push_back({"taller than wide, K in chunks: the threads share each packed block of B", r({400, 600}, 62),
                 r({600, 300}, 63), kStandsForItsPath});
  out.push_back({"row-major A packed: K not a multiple of 8, rows not of 6", r({301, 77}, 39), r({77, 33}, 40)});
  out.push_back({"transposed A (AVX-512: read in place, C narrow): rows not of 6, the threads share B",
                 r({200, 301}, 41).t(), r({200, 64}, 42), kStandsForItsPath});
  out.push_back({"transposed A packed: C wider than kColumnsInPlaceWidth", r({150, 301}, 83).t(),
                 r({150, 530}, 84)});
  out.push_back({"batch of 1 times a transposed weight (computed transposed, small)", r({1, 1100}, 43), r({700, 1100}, 44).t(),
                 kStandsForItsPath});
  out.push_back({"batch of 1, K shorter than a vector (dot products, tail only)", r({1, 5}, 53), r({40, 5}, 54).t()});
  out.push_back({"batch of 1, threaded (dot products over a split of W's rows)", r({1, 1100}, 55), r({2000, 1100}, 56).t()});
  out.push_back({"20 rows times a transposed weight with long rows (transposed, whole rows, threaded)", r({20, 1100}, 45),
                 r({300, 1100}, 46).t()});
  out.push_back({"40 rows times a transposed weight (transposed, threaded; K in chunks where xᵀ is wider than a panel)",
                 r({40, 700}, 47), r({600, 700}, 48).t(), kStandsForItsPath});
  out.push_back({"tiles one column wider than half a tile (9 of 16, 17 of 32)", r({30, 40}, 49), r({40, 25}, 50)});
  out.push_back({"tiles one column past three vectors (AVX-512: 49 of 64)", r({30, 40}, 51), r({40, 49}, 52)});
  out.push_back({"B in place, tiles of whole vectors short of a tile (AVX-512: 48 of 64)", r({33, 40}, 66),
                 r({40, 112}, 67)});
  out.push_back({"a prompt's rows times a transposed weight, K whole tiles (AMX: computed transposed in tiles, W read "
                 "in place, a last partial strip of W packed)",
                 r({40, 256}, 68), r({100, 256}, 69).t(), kStandsForItsPath});
  out.push_back({"the same, K in chunks and threaded", r({64, 2112}, 70), r({1000, 2112}, 71).t()});
  out.push_back({"a prompt's rows times a row-major B whose rows the tiles read in place (float32), K in chunks, "
                 "columns not whole tiles",
                 r({128, 800}, 72), r({800, 784}, 73)});
  out.push_back({"the same with columns that are whole tiles, split into blocks of whole tiles", r({128, 300}, 77),
                 r({300, 768}, 78), kStandsForItsPath});
  out.push_back({"a prompt's rows in place against a wide transposed weight (blocks of B cut to stay in L2)",
                 r({128, 300}, 79), r({2000, 300}, 80).t()});
  out.push_back({"more columns than one N block", r({8, 64}, 13), r({64, 8200}, 14), kStandsForItsPath});
  out.push_back({"row strips sweeping a wide block of B in parts, the last ones partial (AMX)", r({70, 100}, 64),
                 r({100, 1100}, 65)});
  out.push_back({"more columns than one N block, B transposed", r({8, 64}, 15), r({8200, 64}, 16).t()});
  out.push_back({"odd K, small", r({13, 19}, 17), r({19, 37}, 18)});
  out.push_back({"odd K, threaded", r({130, 301}, 19), r({301, 70}, 20)});
  out.push_back({"K = 1", r({40, 1}, 21), r({1, 50}, 22), kStandsForItsPath});
  out.push_back({"M = N = 1", r({1, 300}, 23), r({300, 1}, 24)});
  out.push_back({"both operands transposed", r({53, 37}, 25).t(), r({29, 53}, 26).t()});
  out.push_back({"rows padded (column slice)", r({37, 80}, 27).slice(1, 10, 63), r({53, 29}, 28)});
  out.push_back({"rows repeated by expand (stride 0)", r({1, 200}, 29).expand({150, 200}), r({200, 70}, 30)});
  out.push_back({"a column repeated by expand", r({37, 53}, 31), r({53, 1}, 32).expand({53, 29})});
  out.push_back({"strided in both dims", r({74, 212}, 33).slice(0, 0, 74, 2).slice(1, 0, 212, 2), r({106, 29}, 34)});
  out.push_back({"batched, broadcast against one matrix", r({3, 37, 53}, 35), r({53, 29}, 36)});
  out.push_back({"batched, each product threaded", r({2, 128, 200}, 37), r({2, 200, 100}, 38)});
  return out;
}

std::vector<double> product(const Case& c) { return matmul(c.a, c.b).to_vector<double>(); }

}  // namespace

TEST_CASE("weft's GEMM at every supported instruction-set level matches the exact product and the scalar kernel") {
  REQUIRE(cpu_gemm_library() == GemmLibrary::Weft);
  for (const DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    const double tol = tolerance(dtype);
    const std::vector<CpuIsa> levels = levels_with_own_gemm_kernels(dtype);
    for (const Case& c : cases(dtype)) {
      CAPTURE(c.name);
      CAPTURE(dtype);
      const Reference ref = reference(c.a, c.b);
      std::vector<double> scalar;
      {
        CpuIsaGuard guard(CpuIsa::Scalar);
        scalar = product(c);
      }
      for (const CpuIsa isa : levels) {
        CAPTURE(cpu_isa_name(isa));
        CpuIsaGuard guard(isa);
        const std::vector<double> got = isa == CpuIsa::Scalar ? scalar : product(c);
        CHECK(worst_error(got, ref.value, ref.magnitude) <= tol);
        CHECK(worst_error(got, scalar, ref.magnitude) <= 2 * tol);
      }
    }
  }
}

TEST_CASE("bfloat16 widened by the float32 kernels' packers gives the bits of the float32 product of the widened values") {
  // Below the pairs kernels (and where BF16 dot products do not pay) a bfloat16 product runs on
  // the float32 tiles, its operands widened as they are packed: the same sums in the same order as
  // float32 operands holding the same values, so the same bits, whatever layout each packer meets
  // (every case of the sweep above: transposed, strided, partial panels, threaded). A single row
  // times a transposed weight is the GEMV's, whose bfloat16 loops sum in their own order.
  for (const CpuIsa isa : levels_with_own_gemm_kernels(kFloat32)) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    if (cpu_gemm_kernel(kBFloat16).find("(bf16 widened)") == std::string::npos) continue;
    for (const Case& c : cases(kBFloat16)) {
      if (c.a.size(-2) == 1) continue;
      CAPTURE(c.name);
      CHECK(equal(matmul(c.a, c.b), matmul(c.a.to(kFloat32), c.b.to(kFloat32)).to(kBFloat16)));
    }
  }
}

TEST_CASE("weft's GEMM fuses linear's bias at every level, in float32, bfloat16 and float64") {
  for (const DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    const double tol = tolerance(dtype);
    const std::vector<CpuIsa> levels = levels_with_own_gemm_kernels(dtype);
    // Small (N = 10) and threaded (N = 64, K = 784; N = 300 with the packed W as B) products, and
    // two computed transposed (more outputs than rows: 64 × 300, and a batch of 1).
    for (const auto& shape :
         std::vector<std::pair<int64_t, int64_t>>{{128, 10}, {128, 64}, {128, 300}, {64, 300}, {1, 300}}) {
      const int64_t batch = shape.first, out_features = shape.second;  // not bindings: clang 14's CAPTURE refuses those
      const DType drawn = dtype == kFloat64 ? kFloat64 : kFloat32;
      const Tensor x = random({batch, 784}, 40, drawn).to(dtype), w = random({out_features, 784}, 41, drawn).to(dtype);
      const Tensor b = random({out_features}, 42, drawn).to(dtype);
      Reference ref = reference(x, w.t());
      const auto bias = b.to_vector<double>();
      for (size_t i = 0; i < ref.value.size(); ++i) {
        ref.value[i] += bias[i % static_cast<size_t>(out_features)];
        ref.magnitude[i] += std::abs(bias[i % static_cast<size_t>(out_features)]);
      }
      for (const CpuIsa isa : levels) {
        CAPTURE(cpu_isa_name(isa));
        CAPTURE(dtype);
        CAPTURE(batch);
        CAPTURE(out_features);
        CpuIsaGuard guard(isa);
        const Tensor y = linear(x, w, b);
        CHECK(y.dtype() == dtype);
        CHECK(worst_error(y.to_vector<double>(), ref.value, ref.magnitude) <= tol);
      }
    }
  }
}

TEST_CASE("linear's bias handed to the GEMM gives the bits of the bias taken as C's first rows") {
  // Note [Linear's bias in the tiles]: the blocked path's float32 tiles of the first K chunk find
  // the bias in their rows of C; every other path (small, transposed, AMX and AVX-512 BF16 pairs)
  // copies it into C's rows first, as linear did for all. bias + sum is one addition either way, so
  // every path and level must give the bits of copying the bias and accumulating, on 1 or 3 threads.
  // One product per path (the whole sweep took minutes under the sanitizers).
  const int saved = num_threads();
  for (const DType dtype : {kFloat32, kBFloat16})
    for (const Case& c : cases(dtype)) {
      if (!c.stands_for_its_path) continue;
      CAPTURE(c.name);
      CAPTURE(dtype);
      const int64_t m = c.a.size(0), k = c.a.size(1), n = c.b.size(1);
      const bool bf16 = dtype == kBFloat16;
      const detail::GemmMatrix a{c.a.data_ptr(), c.a.stride(0), c.a.stride(1), bf16};
      const detail::GemmMatrix b{c.b.data_ptr(), c.b.stride(0), c.b.stride(1), bf16};
      const std::vector<float> bias = random({n}, 90, kFloat32).to_vector<float>();
      for (const CpuIsa isa : levels_with_own_gemm_kernels(dtype)) {
        CAPTURE(cpu_isa_name(isa));
        CpuIsaGuard guard(isa);
        std::vector<float> want(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i) std::copy(bias.begin(), bias.end(), want.begin() + i * n);
        set_num_threads(1);
        detail::gemm(m, n, k, a, b, want.data(), n, /*accumulate=*/true);
        for (const int threads : {1, 3}) {
          CAPTURE(threads);
          set_num_threads(threads);
          std::vector<float> got(static_cast<size_t>(m * n), std::nanf(""));
          detail::gemm(m, n, k, a, b, got.data(), n, /*accumulate=*/false, bias.data());
          CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  set_num_threads(saved);
}

TEST_CASE("weft's GEMM gives the same bits whatever the thread count") {
  // Blocked products (taller than wide: row blocks against a shared packed B, A packed or read in
  // place), small ones split by rows (N = 10, B packed per part; K = 10), and some computed
  // transposed, split over W's rows.
  const std::vector<std::pair<Tensor, Tensor>> products = {
      {random({300, 500}, 50, kFloat32), random({500, 200}, 51, kFloat32)},
      {random({400, 600}, 62, kFloat32), random({600, 300}, 63, kFloat32)},
      {random({128, 512}, 52, kFloat32), random({10, 512}, 53, kFloat32).t()},
      {random({128, 10}, 54, kFloat32), random({10, 512}, 55, kFloat32)},
      // Computed transposed: whole rows (K = 1100), K in chunks (K = 784), one row (dot products).
      {random({20, 1100}, 56, kFloat32), random({300, 1100}, 57, kFloat32).t()},
      {random({1, 1100}, 60, kFloat32), random({3000, 1100}, 61, kFloat32).t()},
      {random({64, 784}, 58, kFloat32), random({512, 784}, 59, kFloat32).t()},
      // Split along N, B's rows read in place (Note [B's rows read in place]).
      {random({128, 800}, 68, kFloat32), random({800, 784}, 69, kFloat32)},
      {random({128, 300}, 70, kFloat32), random({300, 768}, 71, kFloat32)},
      // A read in place against a wide B: blocks of B cut to stay in L2 (kStreamedBlockBytes), more
      // of them on one thread than on three.
      {random({128, 300}, 72, kFloat32), random({2000, 300}, 73, kFloat32).t()},
      // float64: row blocks against a shared packed B, K in chunks; and fewer row tiles than
      // threads, so each block of B's panels is shared out as well.
      {random({400, 600}, 64), random({600, 300}, 65)},
      {random({4, 300}, 66), random({2000, 300}, 67).t()}};
  const int saved = num_threads();
  for (size_t i = 0; i < products.size(); ++i) {
    CAPTURE(i);
    const Tensor& a = products[i].first;
    const Tensor& b = products[i].second;
    set_num_threads(1);
    const Tensor one = matmul(a, b);
    set_num_threads(3);
    const Tensor three = matmul(a, b);
    CHECK(std::memcmp(one.data_ptr(), three.data_ptr(), one.nbytes()) == 0);
  }
  set_num_threads(saved);
}

TEST_CASE("the AVX-512 packer of bf16 K-pair panels writes the portable packer's bytes") {
  // Every panel byte, padding included, for both fast layouts (a lane's steps adjacent: x·Wᵀ's B
  // and a row-major A; a step's lanes adjacent: a row-major B and gᵀ as A), at the widths of A
  // (12) and B (32), with partial panels, odd steps, runs past 16 pairs, and pairs padded past
  // the steps as the AMX set pads them. A dropped or misplaced pair would shift a product by one
  // term in K, which the products' tolerance above could miss.
  const auto isas = cpu_isas_supported();
  if (std::find(isas.begin(), isas.end(), CpuIsa::Avx512Bf16) == isas.end()) return;
  CpuIsaGuard guard(CpuIsa::Avx512Bf16);
  for (const int width : {12, 32})
    for (const int64_t lanes : {1, 12, 13, 16, 17, 32, 45, 70})
      for (const int64_t steps : {1, 2, 3, 31, 32, 33, 64, 70})
        for (const int64_t extra_pairs : {0, 5})
          for (const bool steps_adjacent : {true, false}) {
            CAPTURE(width);
            CAPTURE(lanes);
            CAPTURE(steps);
            CAPTURE(extra_pairs);
            CAPTURE(steps_adjacent);
            const int64_t pairs = (steps + 1) / 2 + extra_pairs;
            // The source is padded (leading dimension + 3) so that reads past a row would show.
            const int64_t lane_stride = steps_adjacent ? steps + 3 : 1, step_stride = steps_adjacent ? 1 : lanes + 3;
            std::vector<uint16_t> src(static_cast<size_t>((lanes + 3) * (steps + 3)));
            for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u + 1);
            const int64_t panels = (lanes + width - 1) / width;
            std::vector<uint16_t> fast(static_cast<size_t>(panels * pairs * width * 2), 0xDEAD);
            std::vector<uint16_t> portable(fast.size(), 0xBEEF);
            REQUIRE(detail::pack_pairs_avx512(src.data(), lane_stride, step_stride, lanes, steps, pairs, width,
                                              fast.data()));
            // pack_a_bf16_pairs takes A's rows as the lanes: A(l, s) = src[l·lane_stride + s·step_stride].
            detail::pack_a_bf16_pairs(detail::GemmMatrix{src.data(), lane_stride, step_stride, true}, lanes, steps,
                                      pairs, width, portable.data());
            CHECK(fast == portable);
          }
  // Neither stride 1 is left to the portable packer.
  std::vector<uint16_t> src(64), dst(64);
  CHECK_FALSE(detail::pack_pairs_avx512(src.data(), 2, 8, 4, 4, 2, 12, dst.data()));
}

TEST_CASE("the AVX-512 packer of bf16 A as plain rows writes the portable packer's bytes") {
  // The AMX set's A read down its columns (gᵀ in a weight gradient): every byte of the block,
  // padding included, against pack_a_bf16_rows, with partial 32 × 32 blocks in both directions, an
  // odd K, and rows padded with more zeros than one 32-step run. Layouts it leaves to the portable
  // packer (rows in memory) say so.
  const auto isas = cpu_isas_supported();
  if (std::find(isas.begin(), isas.end(), CpuIsa::Avx512) == isas.end()) return;
  constexpr int kMr = 32;
  for (const int64_t mc : {1, 15, 16, 17, 32, 45, 70})
    for (const int64_t kc : {1, 2, 31, 32, 33, 64, 95})
      for (const int64_t extra_width : {0, 32}) {
        CAPTURE(mc);
        CAPTURE(kc);
        CAPTURE(extra_width);
        const int64_t width = (kc + 31) / 32 * 32 + extra_width;
        // A(i, p) = src[i + p·cs]; the leading dimension is padded so that reads past a column would show.
        const int64_t cs = mc + 3;
        std::vector<uint16_t> src(static_cast<size_t>(cs * kc));
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u + 1);
        const int64_t panels = (mc + kMr - 1) / kMr;
        std::vector<uint16_t> fast(static_cast<size_t>(panels * kMr * width), 0xDEAD);
        std::vector<uint16_t> portable(fast.size(), 0xBEEF);
        REQUIRE(detail::pack_rows_avx512(src.data(), 1, cs, mc, kc, width, kMr, fast.data()));
        detail::pack_a_bf16_rows(detail::GemmMatrix{src.data(), 1, cs, true}, mc, kc, width / 2, kMr, portable.data());
        CHECK(fast == portable);
      }
  std::vector<uint16_t> src(64), dst(64 * 32);
  CHECK_FALSE(detail::pack_rows_avx512(src.data(), 8, 1, 4, 8, 32, kMr, dst.data()));  // rows in memory
  CHECK_FALSE(detail::pack_rows_avx512(src.data(), 1, 8, 4, 40, 32, kMr, dst.data()));  // rows narrower than K's runs
}

TEST_CASE("a bfloat16 C stored by the GEMM itself has the bits of the float32 product then rounded") {
  // gemm_to_bf16 against gemm into float32 followed by the scalar conversion (float_to_bfloat16),
  // C widened first when accumulating, bit for bit: partial tiles, the one-thread and the threaded
  // paths (split along M and along N), K from its least (2) to one whole chunk, transposed and
  // strided operands, and values that round to infinity, a NaN with its sign bit set (made
  // 0x7FC0), zeros of either sign and float32 denormals (kept, not flushed: the tiles round with
  // vcvtne2ps2bf16 only where a row has neither).
  struct Product {
    const char* name;
    int64_t m, n, k;
    bool a_transposed, b_transposed;
  };
  const std::vector<Product> products = {{"partial tiles, one thread", 13, 37, 19, false, false},
                                         {"K = 2, the least it takes", 40, 70, 2, false, false},
                                         {"split along M, B transposed", 300, 200, 400, false, true},
                                         {"split along N, A transposed", 128, 784, 128, true, false},
                                         {"both transposed", 97, 61, 45, true, true},
                                         {"small, split by row tiles over the threads", 100, 40, 200, false, false},
                                         {"K = 32, one AMX tile deep", 45, 33, 32, false, true},
                                         {"a prompt times a transposed weight (AMX: in tiles, transposed)", 40, 100, 256,
                                          false, true},
                                         {"the same, threaded", 64, 1000, 512, false, true}};
  bool ran = false;
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    if (!detail::gemm_stores_bf16(64, 64, 64)) continue;  // this level's kernel set stores float32 only
    ran = true;
    std::vector<Product> all = products;
    const int64_t kc = isa == CpuIsa::Avx512Bf16 ? detail::kGemmBf16Avx512Bf16.kc
                       : isa == CpuIsa::Amx      ? detail::kGemmBf16Amx.kc
                                                 : 0;
    if (kc > 0) {
      all.push_back({"K = one whole chunk", 60, 90, kc, false, false});
      CHECK_FALSE(detail::gemm_stores_bf16(60, 90, kc + 1));
      // Past one chunk only a product computed transposed in AMX tiles rounds C itself.
      all.push_back({"a prompt times a transposed weight, K in three chunks", 40, 100, 2 * kc + 64, false, true});
      all.push_back({"K in three chunks, B not transposed", 40, 100, 2 * kc + 64, false, false});
    }
    CHECK_FALSE(detail::gemm_stores_bf16(60, 90, 1));
    for (const Product& p : all)
      for (const bool accumulate : {false, true}) {
        CAPTURE(p.name);
        CAPTURE(accumulate);
        // The layouts of the operands made below.
        const detail::GemmMatrix a_layout{nullptr, p.a_transposed ? 1 : p.k, p.a_transposed ? p.m : 1, true};
        const detail::GemmMatrix b_layout{nullptr, p.b_transposed ? 1 : p.n, p.b_transposed ? p.k : 1, true};
        if (!detail::gemm_stores_bf16(p.m, p.n, p.k, a_layout, b_layout)) {
          // AMX pads K to whole tiles of 32: a shorter K is left to the float32 path; so is a K of
          // several chunks but in transposed tiles.
          CHECK(((isa == CpuIsa::Amx && p.k < 32) || (p.k > kc && !(isa == CpuIsa::Amx && p.b_transposed))));
          continue;
        }
        Tensor a = p.a_transposed ? random({p.k, p.m}, 70, kFloat32).to(kBFloat16).t()
                                  : random({p.m, p.k}, 70, kFloat32).to(kBFloat16);
        {  // A's last row the least normal bfloat16: its products with B's values below 1 are denormal
          a = a.contiguous();
          auto* bits = static_cast<uint16_t*>(a.data_ptr());
          for (int64_t j = 0; j < p.k; ++j) bits[(p.m - 1) * p.k + j] = 0x0080;
          if (p.a_transposed) a = a.t().contiguous().t();
        }
        Tensor b = p.b_transposed ? random({p.n, p.k}, 71, kFloat32).to(kBFloat16).t()
                                  : random({p.k, p.n}, 71, kFloat32).to(kBFloat16);
        if (p.k > 2) {  // an infinite sum and a NaN among the products
          b = b.contiguous();
          auto* bits = static_cast<uint16_t*>(b.data_ptr());
          bits[0] = 0x7F7F;  // the largest bfloat16: row 0 of A times it overflows
          bits[1] = 0xFFC1;  // a NaN: sign set, a payload
          if (p.b_transposed) b = b.t().contiguous().t();
        }
        const Tensor c0 = random({p.m, p.n}, 72, kFloat32).to(kBFloat16);
        auto* c0_bits = static_cast<uint16_t*>(c0.data_ptr());
        c0_bits[0] = 0x8000;  // -0
        for (int64_t j = 0; j < p.n; ++j) c0_bits[(p.m - 1) * p.n + j] = 0x0003;  // denormals, when accumulating
        const detail::GemmMatrix am{a.data_ptr(), a.stride(0), a.stride(1), true};
        const detail::GemmMatrix bm{b.data_ptr(), b.stride(0), b.stride(1), true};
        std::vector<float> wide(static_cast<size_t>(p.m * p.n));
        for (size_t i = 0; i < wide.size(); ++i) wide[i] = bfloat16_to_float(c0_bits[i]);
        detail::gemm(p.m, p.n, p.k, am, bm, wide.data(), p.n, accumulate);
        std::vector<uint16_t> want(wide.size()), got(c0_bits, c0_bits + wide.size());
        for (size_t i = 0; i < wide.size(); ++i) want[i] = float_to_bfloat16(wide[i]);
        detail::gemm_to_bf16(p.m, p.n, p.k, am, bm, got.data(), p.n, accumulate);
        CHECK(got == want);
      }
  }
  if (!ran) MESSAGE("no level here has a kernel set that stores bfloat16 (AVX-512 BF16, AMX): nothing to check");
}

TEST_CASE("a product computed transposed in AMX tiles has the bits of the usual path") {
  // Note [Few rows times a transposed B, in AMX tiles]: x·Wᵀ for a few rows of bfloat16 is computed
  // as Cᵀ = W·xᵀ, W read in place, and transposed. The usual orientation, W packed into K-pair
  // panels, is what a B packed ahead runs (gemm_packed): the two must agree bit for bit,
  // into float32 or a rounded bfloat16 C (rounded once, also with K in several chunks),
  // accumulating onto C or not, with K in one chunk or several (of the transposed product's 4096
  // values, and of the usual path's 1024), a last partial strip of W's rows, on one thread and on
  // several.
  const auto isas = cpu_isas_supported();
  if (std::find(isas.begin(), isas.end(), CpuIsa::Amx) == isas.end()) {
    MESSAGE("no AMX here: nothing to check");
    return;
  }
  CpuIsaGuard guard(CpuIsa::Amx);
  struct Shape3 {
    int64_t m, n, k;
  };
  for (const Shape3 p : {Shape3{40, 100, 256}, Shape3{64, 1000, 512}, Shape3{24, 70, 2112}, Shape3{128, 1024, 768},
                         Shape3{16, 120, 4160}})
    for (const bool accumulate : {false, true}) {
      const int64_t m = p.m, n = p.n, k = p.k;  // not bindings: CAPTURE takes them (clang 14)
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(accumulate);
      const Tensor x = random({m, k}, 80, kFloat32).to(kBFloat16), w = random({n, k}, 81, kFloat32).to(kBFloat16);
      const Tensor c0 = random({m, n}, 82, kFloat32);
      const detail::GemmMatrix xm{x.data_ptr(), k, 1, true}, wt{w.data_ptr(), 1, k, true};
      // wt is B = Wᵀ read down its columns; gemm_pack_b takes B (k×n) as a strided matrix.
      const detail::GemmPackedB packed = detail::gemm_pack_b(k, n, wt);
      std::vector<float> got = c0.to_vector<float>(), want = got;
      detail::gemm(m, n, k, xm, wt, got.data(), n, accumulate);
      detail::gemm_packed(m, n, k, xm, packed, want.data(), n, accumulate);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      // Rounded into a bfloat16 C by the transposing copy, whatever the K chunks: the usual path's
      // float32 sums onto C widened, then rounded.
      REQUIRE(detail::gemm_stores_bf16(m, n, k, xm, wt));
      const Tensor c16 = c0.to(kBFloat16);
      const auto* bits = static_cast<const uint16_t*>(c16.data_ptr());
      std::vector<uint16_t> got16(bits, bits + m * n), want16(got16.size());
      std::vector<float> wide(got16.size());
      for (size_t i = 0; i < wide.size(); ++i) wide[i] = bfloat16_to_float(bits[i]);
      detail::gemm_to_bf16(m, n, k, xm, wt, got16.data(), n, accumulate);
      detail::gemm_packed(m, n, k, xm, packed, wide.data(), n, accumulate);
      for (size_t i = 0; i < wide.size(); ++i) want16[i] = float_to_bfloat16(wide[i]);
      CHECK(got16 == want16);
    }
}

TEST_CASE("B's rows read in place give the bits of B packed") {
  // Note [B's rows read in place]: a prompt's rows times a row-major float32 B, split along N, read
  // B's rows in place where they start on cache lines and are not a multiple of 2 KiB apart, and
  // pack B's blocks otherwise. The same values with rows 1024 floats apart take the packed path;
  // each tile sums the same products in the same order either way, at every level, so the bits agree.
  const int64_t m = 128, k = 800, n = 784;
  const Tensor x = random({m, k}, 74, kFloat32), b = random({k, n}, 75, kFloat32);
  Tensor padded = zeros({k, 1024}).slice(1, 0, n);
  padded.copy_(b);
  const detail::GemmMatrix bm{b.data_ptr(), n, 1, false}, pm{padded.data_ptr(), 1024, 1, false};
  REQUIRE(detail::gemm_reads_b_rows_in_place(bm));
  REQUIRE_FALSE(detail::gemm_reads_b_rows_in_place(pm));
  CHECK_FALSE(detail::gemm_reads_b_rows_in_place(detail::GemmMatrix{b.data_ptr(), 512, 1, false}));
  CHECK_FALSE(detail::gemm_reads_b_rows_in_place(detail::GemmMatrix{static_cast<float*>(b.data_ptr()) + 1, n, 1, false}));
  CHECK_FALSE(detail::gemm_reads_b_rows_in_place(detail::GemmMatrix{b.data_ptr(), 1, n, false}));
  for (const CpuIsa isa : levels_with_own_gemm_kernels(kFloat32)) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    for (const bool accumulate : {false, true}) {
      CAPTURE(accumulate);
      const std::vector<float> c0 = random({m, n}, 76, kFloat32).to_vector<float>();
      std::vector<float> got = c0, want = c0;
      detail::gemm(m, n, k, detail::GemmMatrix{x.data_ptr(), k, 1, false}, bm, got.data(), n, accumulate);
      detail::gemm(m, n, k, detail::GemmMatrix{x.data_ptr(), k, 1, false}, pm, want.data(), n, accumulate);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("A's columns read in place give the bits of A packed and of A's rows read in place") {
  // Note [A's columns read in place]: a float32 A stored by columns (gᵀ of a weight gradient) is
  // read in place by the AVX-512 set where C is narrow. The same values with both strides
  // non-unit are packed, and stored by rows are read in place by rows; each tile sums the same
  // products in the same order, so all three give the same bits, at every level, taller than
  // wide (threads share B) and wider than tall (split along N).
  struct Shape3 {
    int64_t m, k, n;
  };
  for (const Shape3 s : {Shape3{300, 200, 64}, Shape3{96, 128, 200}, Shape3{384, 768, 128}}) {
    CAPTURE(s.m);
    const Tensor stored = random({s.k, s.m}, 85, kFloat32), b = random({s.k, s.n}, 86, kFloat32);
    Tensor spread = zeros({2 * s.k, 2 * s.m}).slice(0, 0, 2 * s.k, 2).slice(1, 0, 2 * s.m, 2);
    spread.copy_(stored);
    const Tensor rows = stored.t().contiguous();
    const detail::GemmMatrix by_columns{stored.data_ptr(), 1, s.m, false};
    const detail::GemmMatrix packed{spread.data_ptr(), spread.stride(1), spread.stride(0), false};
    const detail::GemmMatrix by_rows{rows.data_ptr(), s.k, 1, false};
    const detail::GemmMatrix bm{b.data_ptr(), s.n, 1, false};
    for (const CpuIsa isa : levels_with_own_gemm_kernels(kFloat32)) {
      CAPTURE(cpu_isa_name(isa));
      CpuIsaGuard guard(isa);
      for (const bool accumulate : {false, true}) {
        CAPTURE(accumulate);
        const std::vector<float> c0 = random({s.m, s.n}, 87, kFloat32).to_vector<float>();
        std::vector<float> got = c0, from_packed = c0, from_rows = c0;
        detail::gemm(s.m, s.n, s.k, by_columns, bm, got.data(), s.n, accumulate);
        detail::gemm(s.m, s.n, s.k, packed, bm, from_packed.data(), s.n, accumulate);
        detail::gemm(s.m, s.n, s.k, by_rows, bm, from_rows.data(), s.n, accumulate);
        CHECK(std::memcmp(got.data(), from_packed.data(), got.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(got.data(), from_rows.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("the AVX2 and AVX-512 float32 tiles asked to fetch lines compute the same sums") {
  // Note [The next block of B, fetched]: the tile spreads prefetches over its K steps, from a
  // counter beside the product's loop. However many lines it is asked for (none, fewer than its
  // steps, more), every step's FMAs still run: C is the tile's without fetching, bit for bit.
  const auto isas = cpu_isas_supported();
  auto has = [&](CpuIsa isa) { return std::find(isas.begin(), isas.end(), isa) != isas.end(); };
  std::vector<const detail::GemmKernel*> sets;
  if (has(CpuIsa::Avx2)) sets.push_back(&detail::kGemmF32Avx2);
  if (has(CpuIsa::Avx512)) sets.push_back(&detail::kGemmF32Avx512);
  for (const detail::GemmKernel* set : sets) {
    CAPTURE(set->name);
    const int64_t kc = 37, mr = set->mr, nr = set->nr;
    const std::vector<float> a = random({mr, kc}, 90, kFloat32).to_vector<float>();
    const std::vector<float> b = random({kc, nr}, 91, kFloat32).to_vector<float>();
    std::vector<char> lines(64 * 200);
    auto run = [&](int count) {
      std::vector<float> c(static_cast<size_t>(mr * nr), 0.0f);
      detail::GemmTileF32 t{kc, a.data(), kc, 1, false, b.data(), nr, true, c.data(), nr,
                            static_cast<int>(mr), static_cast<int>(nr), false};
      t.fetch = {lines.data(), 64 * 3, 3, 1, count};
      set->micro_f32(t);
      return c;
    };
    const std::vector<float> want = run(0);
    for (const int count : {1, 5, 36, 37, 150}) {
      CAPTURE(count);
      const std::vector<float> got = run(count);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the AVX-512 transposing copy writes the reference's bits") {
  // transpose_copy_avx512 against transpose_copy (packing.cpp) for each side float32 or bfloat16,
  // ragged blocks both ways, and values the rounding must treat as the conversions do: halfway
  // cases, a NaN with a payload, infinities, denormals, -0. Cells past the copy keep their bytes.
  const auto isas = cpu_isas_supported();
  if (std::find(isas.begin(), isas.end(), CpuIsa::Avx512) == isas.end()) return;
  std::vector<float> values(64 * 70);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i * 37 % 1001) - 500) / 7.0f;
  values[3] = std::nanf("7");
  values[5] = -std::numeric_limits<float>::infinity();
  values[8] = 1e-40f;  // a float32 denormal
  values[9] = -0.0f;
  values[11] = 1.00390625f;  // halfway between two bfloat16: rounds to even
  std::vector<uint16_t> values16(values.size());
  for (size_t i = 0; i < values.size(); ++i) values16[i] = float_to_bfloat16(values[i]);
  for (const int64_t rows : {1, 15, 16, 17, 40})
    for (const int64_t cols : {1, 16, 31, 33})
      for (const bool src_bf16 : {false, true})
        for (const bool dst_bf16 : {false, true}) {
          CAPTURE(rows);
          CAPTURE(cols);
          CAPTURE(src_bf16);
          CAPTURE(dst_bf16);
          const int64_t ld_src = cols + 5, ld_dst = rows + 3;  // padded, so a stray read or write would show
          const void* src = src_bf16 ? static_cast<const void*>(values16.data()) : static_cast<const void*>(values.data());
          std::vector<uint32_t> fast(static_cast<size_t>(cols * ld_dst), 0xDEADBEEF), slow = fast;
          detail::transpose_copy_avx512(src, src_bf16, ld_src, rows, cols, fast.data(), dst_bf16, ld_dst);
          detail::transpose_copy(src, src_bf16, ld_src, rows, cols, slow.data(), dst_bf16, ld_dst);
          CHECK(fast == slow);
        }
}

TEST_CASE("the kernel in use is named for each dtype and level") {
  {
    CpuIsaGuard guard(CpuIsa::Scalar);
    CHECK(cpu_gemm_kernel(kFloat32) == "weft scalar 4x8 fp32");
    CHECK(cpu_gemm_kernel(kBFloat16) == "weft scalar 4x8 fp32 (bf16 widened)");
  }
  if (cpu_isa_supported() >= CpuIsa::Avx2) {
    CpuIsaGuard guard(CpuIsa::Avx2);
    CHECK(cpu_gemm_kernel(kFloat32) == "weft avx2 6x16 fp32");
  }
  if (cpu_isa_supported() >= CpuIsa::Avx512Bf16) {
    CpuIsaGuard guard(CpuIsa::Avx512Bf16);
    CHECK(cpu_gemm_kernel(kFloat32) == "weft avx512 6x64 fp32");
    CHECK(cpu_gemm_kernel(kBFloat16) == "weft avx512_bf16 12x32 bf16 pairs");
  }
  {
    CpuIsaGuard guard(CpuIsa::Scalar);
    CHECK(cpu_gemm_kernel(kFloat64) == "weft scalar 4x8 fp64");
  }
  if (cpu_isa_supported() >= CpuIsa::Avx2) {
    CpuIsaGuard guard(CpuIsa::Avx2);
    CHECK(cpu_gemm_kernel(kFloat64) == "weft avx2 6x8 fp64");
  }
  if (cpu_isa_supported() >= CpuIsa::Avx512) {
    CpuIsaGuard guard(CpuIsa::Avx512);
    CHECK(cpu_gemm_kernel(kFloat64) == "weft avx512 6x32 fp64");
  }
}

TEST_CASE("the float64 packers of lanes with contiguous steps write the panel layout, zeros past the lanes") {
  // M(l, s) = src[l·lane_stride + s]; panels of `width` lanes, dst[(panel·steps + s)·width + l % width].
  // The lane stride is longer than the steps (a padded row), and 0 (a row repeated by expand).
  const std::vector<std::pair<CpuIsa, const detail::GemmKernelF64*>> sets = {
      {CpuIsa::Avx2, &detail::kGemmF64Avx2}, {CpuIsa::Avx512, &detail::kGemmF64Avx512}};
  int ran = 0;
  for (const auto& entry : sets) {
    const CpuIsa isa = entry.first;  // not bindings: clang 14's CAPTURE refuses those
    const detail::GemmKernelF64* set = entry.second;
    if (cpu_isa_supported() < isa) continue;
    for (const int width : {set->mr, set->nr})
      for (const int64_t lanes : {1, 5, 13, 37})
        for (const int64_t steps : {1, 7, 19})
          for (const int64_t lane_stride : {steps + 3, int64_t{0}}) {
            CAPTURE(cpu_isa_name(isa));
            CAPTURE(width);
            CAPTURE(lanes);
            CAPTURE(steps);
            CAPTURE(lane_stride);
            std::vector<double> src(static_cast<size_t>(std::max<int64_t>(lanes * lane_stride, steps)));
            for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0 + static_cast<double>(i) / 8;
            const int64_t panels = (lanes + width - 1) / width;
            std::vector<double> want(static_cast<size_t>(panels * steps * width), 0.0);
            for (int64_t l = 0; l < lanes; ++l)
              for (int64_t s = 0; s < steps; ++s)
                want[static_cast<size_t>((l / width * steps + s) * width + l % width)] =
                    src[static_cast<size_t>(l * lane_stride + s)];
            std::vector<double> got(want.size(), -7.0);
            set->pack_by_steps(src.data(), lane_stride, lanes, steps, width, got.data());
            CHECK(got == want);
            ++ran;
          }
  }
  if (ran == 0) MESSAGE("this CPU has no vector level: nothing to check");
}

namespace {

// A matrix in memory (float32, or bfloat16 bits) served to the GEMM as a GemmBlockSource,
// counting the blocks asked for at a K offset off the requested alignment (there must be none).
struct RowsSource {
  const void* data;
  int64_t ld, k_align;
  bool bf16;
};
std::atomic<int64_t> g_misaligned_blocks{0};

void fill_rows(const void* context, int64_t r0, int64_t rows, int64_t p0, int64_t kc, void* out) {
  const auto& s = *static_cast<const RowsSource*>(context);
  if (p0 % s.k_align != 0) ++g_misaligned_blocks;
  const size_t size = s.bf16 ? 2 : 4;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(out) + r * kc * size,
                static_cast<const char*>(s.data) + ((r0 + r) * s.ld + p0) * size, static_cast<size_t>(kc) * size);
}

// Runs `product` (c (+)= a·b with an operand from a source, writing into the buffer it is given,
// which starts as c0) at every instruction-set level, against the exact product.
void check_source_product(const Tensor& a, const Tensor& b, const Tensor& c0, bool accumulate,
                          const std::function<void(float*)>& product) {
  Reference ref = reference(a, b);
  if (accumulate) {
    const auto start = c0.to_vector<double>();
    for (size_t i = 0; i < ref.value.size(); ++i) {
      ref.value[i] += start[i];
      ref.magnitude[i] += std::abs(start[i]);
    }
  }
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    std::vector<float> c = c0.to_vector<float>();
    g_misaligned_blocks = 0;
    product(c.data());
    CHECK(g_misaligned_blocks == 0);
    CHECK(worst_error(std::vector<double>(c.begin(), c.end()), ref.value, ref.magnitude) <= kFloat32Tol);
  }
}

}  // namespace

namespace {

struct SourceShape {
  int64_t m, n, k, k_align;
  bool transposed, accumulate;  // B stored as Bᵀ (n×k, B read down its columns); C accumulated into
};

// c (+)= a·b for each shape, in float32 and in bfloat16, with a (m×k) made by a source (A rows) or
// b: stored k×n, or n×k as Bᵀ, made by a source (B's rows, or Bᵀ's), the other operand in memory.
void check_source_cases(const std::vector<SourceShape>& shapes, bool a_from_source) {
  const uint64_t seed = a_from_source ? 70 : 73;
  for (const DType dtype : {kFloat32, kBFloat16})
    for (const SourceShape& s : shapes) {
      CAPTURE(dtype);
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(s.transposed);
      const bool bf16 = dtype == kBFloat16;
      const Tensor a = random({s.m, s.k}, seed, kFloat32).to(dtype);
      const Tensor stored =
          (s.transposed ? random({s.n, s.k}, seed + 1, kFloat32) : random({s.k, s.n}, seed + 1, kFloat32)).to(dtype);
      const Tensor c0 = random({s.m, s.n}, seed + 2, kFloat32);
      const int64_t stored_rs = s.transposed ? 1 : s.n, stored_cs = s.transposed ? s.k : 1;
      const RowsSource rows = a_from_source ? RowsSource{a.data_ptr(), s.k, s.k_align, bf16}
                                            : RowsSource{stored.data_ptr(), s.transposed ? s.k : s.n, s.k_align, bf16};
      const detail::GemmBlockSource source{fill_rows, &rows, s.k_align, bf16};
      check_source_product(a, s.transposed ? stored.t() : stored, c0, s.accumulate, [&](float* c) {
        if (a_from_source)
          detail::gemm(s.m, s.n, s.k, source, {stored.data_ptr(), stored_rs, stored_cs, bf16}, c, s.n, s.accumulate);
        else
          detail::gemm(s.m, s.n, s.k, {a.data_ptr(), s.k, 1, bf16}, source, s.transposed, c, s.n, s.accumulate);
      });
    }
}

}  // namespace

TEST_CASE("weft's GEMM with A from a block source matches the exact product at every level") {
  // Taller than wide (threads sharing packed B, row blocks, K in aligned chunks), wider than tall
  // (column parts, the source read in place), many row blocks, a tiny product, B read down its
  // columns (x·Wᵀ computed as W·xᵀ, how the 4-bit product uses it), and accumulating into C. In
  // bfloat16 too: the rows made a strip at a time and read in place as K-pairs by the AVX-512 BF16
  // set (whole pairs), or made a block at a time and packed (an odd K, whose last pair is padded;
  // the levels without bfloat16 pairs, which widen them).
  check_source_cases({{300, 40, 500, 64, false, false},
                      {50, 700, 130, 1, false, false},
                      {4100, 8, 70, 64, true, false},
                      {7, 5, 3, 1, false, false},
                      {400, 32, 1000, 64, true, true},
                      {30, 20, 77, 1, true, false}},
                     true);
}

TEST_CASE("weft's GEMM with B or Bᵀ made by a block source matches the exact product at every level") {
  // The source makes Bᵀ's rows (x·Wᵀ, the 4-bit layer's forward): wider than tall (column parts,
  // A read in place), taller than wide (threads packing the shared B between them), K in aligned
  // chunks with a short last one, N not a multiple of the 32 columns of a panel, a tiny product,
  // accumulating into C. Or B's rows (g·W, its input gradient): column parts; one thread, runs of
  // 256 columns with a short last one, two K blocks; threads sharing the packed B; a tiny product;
  // accumulating. In bfloat16 too, packed into K-pairs (or widened) from the source's scratch.
  // (The sanitizer build runs the AVX-512 levels emulated at -O0: keep them small.)
  check_source_cases({{32, 300, 784, 64, true, false},
                      {300, 45, 600, 64, true, false},
                      {7, 5, 3, 1, true, false},
                      {64, 70, 130, 1, true, true},
                      {16, 784, 512, 1, false, false},
                      {2, 600, 300, 1, false, false},
                      {300, 45, 600, 1, false, false},
                      {3, 5, 7, 1, false, false},
                      {40, 70, 130, 1, false, true}},
                     false);
}
