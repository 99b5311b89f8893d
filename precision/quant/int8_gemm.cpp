// int8 GEMM: operand packing, the choice of kernel, threading, and the scalar reference.
#include "precision/quant/int8_gemm.h"

#include <algorithm>
#include <cstring>

#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace weft::precision::quant {
namespace {

struct Kernel {
  void (*panel)(const kernels::Int8PanelArgs&);  // null: the scalar reference
  int64_t mr, nr;
  bool unsigned_a;  // VNNI: A stored as a + 128, with column compensation
};

Kernel kernel_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return {nullptr, 1, 1, false};
    case CpuIsa::Avx2: return {kernels::int8_gemm_panel_avx2, 4, 16, false};
    case CpuIsa::Avx512: return {kernels::int8_gemm_panel_avx512, 8, 32, false};
    case CpuIsa::Avx512Vnni:
    case CpuIsa::Avx512Bf16: return {kernels::int8_gemm_panel_avx512vnni, 8, 32, true};
  }
  WEFT_FAIL("[int8_gemm] unknown instruction-set level");
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

void check_range(const int8_t* p, int64_t count, const char* operand) {
  uint8_t any = 0;
  for (int64_t i = 0; i < count; ++i) any |= static_cast<uint8_t>(p[i] == -128);  // no early exit: vectorises
  if (!any) return;
  const int64_t at = std::find(p, p + count, int8_t{-128}) - p;
  WEFT_FAIL("[int8_gemm] operands must lie in [-127, 127] (vector-wise int8 codes); ", operand, " holds -128 at element ",
            at);
}

void check_sizes(int64_t m, int64_t n, int64_t k) {
  WEFT_CHECK(m >= 0 && n >= 0 && k >= 0, "[int8_gemm] sizes must be non-negative, got M=", m, ", N=", n, ", K=", k);
  WEFT_CHECK(k <= kInt8GemmMaxK, "[int8_gemm] K must be at most ", kInt8GemmMaxK,
             " so that an exact result fits in int32, got ", k);
}

// Rows of work per parallel item (a multiple of every kernel's mr).
constexpr int64_t kRowBlock = 64;
// Below this many multiply-adds a product runs on the calling thread: waking the other threads
// would cost more than it saves (and far more on a machine whose cores are busy).
constexpr int64_t kParallelWork = int64_t{1} << 20;

// parallel_for when the work is large enough, else a plain loop.
template <class Fn>
void for_items(int64_t items, int64_t work, Fn&& fn) {
  if (work < kParallelWork) {
    for (int64_t i = 0; i < items; ++i) fn(i);
  } else {
    parallel_for(items, fn);
  }
}

}  // namespace

void int8_gemm_reference(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += int32_t{a[i * k + l]} * int32_t{b[j * k + l]};
      c[i * n + j] = sum;
    }
}

PackedInt8Matrix pack_int8_matrix(const int8_t* b, int64_t n, int64_t k, CpuIsa isa) {
  check_sizes(0, n, k);
  WEFT_CHECK(isa <= cpu_isa_supported(), "[int8_gemm] cannot pack for ", cpu_isa_name(isa), ": this CPU supports up to ",
             cpu_isa_name(cpu_isa_supported()));
  check_range(b, n * k, "B");
  PackedInt8Matrix packed;
  packed.n_ = n;
  packed.k_ = k;
  packed.isa_ = isa;
  const Kernel kernel = kernel_for(isa);
  if (kernel.panel == nullptr) {
    packed.data_.assign(b, b + n * k);
    return packed;
  }
  const int64_t groups = round_up(k, 4) / 4;
  const int64_t panels = round_up(n, kernel.nr) / kernel.nr;
  packed.data_.assign(static_cast<size_t>(panels * groups * kernel.nr * 4), 0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t panel = j / kernel.nr, col = j % kernel.nr;
    for (int64_t l = 0; l < k; ++l)
      packed.data_[static_cast<size_t>(((panel * groups + l / 4) * kernel.nr + col) * 4 + l % 4)] = b[j * k + l];
  }
  if (kernel.unsigned_a) {
    packed.compensation_.assign(static_cast<size_t>(panels * kernel.nr), 0);
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += b[j * k + l];
      // The kernel's lanes wrap modulo 2^32; so does this.
      packed.compensation_[static_cast<size_t>(j)] = static_cast<int32_t>(static_cast<uint32_t>(sum * 128));
    }
  }
  return packed;
}

void int8_gemm(const int8_t* a, int64_t m, const PackedInt8Matrix& b, int32_t* c) {
  const int64_t n = b.n_, k = b.k_;
  check_sizes(m, n, k);
  check_range(a, m * k, "A");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum
    std::fill(c, c + m * n, 0);
    return;
  }
  const Kernel kernel = kernel_for(b.isa_);
  WEFT_CHECK(b.isa_ <= cpu_isa_supported(), "[int8_gemm] B was packed for ", cpu_isa_name(b.isa_),
             ", which this CPU does not support");
  if (kernel.panel == nullptr) {
    for_items((m + kRowBlock - 1) / kRowBlock, m * n * k, [&](int64_t block) {
      const int64_t row0 = block * kRowBlock, rows = std::min(kRowBlock, m - row0);
      int8_gemm_reference(a + row0 * k, b.data_.data(), c + row0 * n, rows, n, k);
    });
    return;
  }
  // A, padded to whole k-groups and register tiles (and shifted to unsigned for VNNI).
  const int64_t kp = round_up(k, 4), mp = round_up(m, kernel.mr);
  std::vector<uint8_t> ap(static_cast<size_t>(mp * kp), kernel.unsigned_a ? 128 : 0);
  for (int64_t i = 0; i < m; ++i) {
    uint8_t* row = ap.data() + i * kp;
    std::memcpy(row, a + i * k, static_cast<size_t>(k));
    if (kernel.unsigned_a)
      for (int64_t l = 0; l < k; ++l) row[l] ^= 0x80;  // a + 128
  }
  const int64_t groups = kp / 4;
  const int64_t panels = round_up(n, kernel.nr) / kernel.nr;
  const int64_t row_blocks = (mp + kRowBlock - 1) / kRowBlock;
  for_items(row_blocks * panels, m * n * k, [&](int64_t item) {
    const int64_t block = item / panels, panel = item % panels;
    const int64_t row0 = block * kRowBlock;
    kernels::Int8PanelArgs args;
    args.a = ap.data() + row0 * kp;
    args.a_stride = kp;
    args.b = b.data_.data() + panel * groups * kernel.nr * 4;
    args.compensation = kernel.unsigned_a ? b.compensation_.data() + panel * kernel.nr : nullptr;
    args.groups = groups;
    args.rows = std::min(kRowBlock, mp - row0);
    args.c = c + row0 * n + panel * kernel.nr;
    args.c_stride = n;
    args.c_rows = std::min(args.rows, m - row0);
    args.cols = std::min(kernel.nr, n - panel * kernel.nr);
    kernel.panel(args);
  });
}

void int8_gemm(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k) {
  int8_gemm(a, m, pack_int8_matrix(b, n, k, cpu_isa()), c);
}

}  // namespace weft::precision::quant
