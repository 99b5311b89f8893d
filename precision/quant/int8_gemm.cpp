// int8 GEMM: operand packing, the choice of kernel, threading, and the scalar reference.
#include "precision/quant/int8_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace weft::precision::quant {
namespace {

struct Kernel {
  void (*panel)(const kernels::Int8PanelArgs&);  // null: the scalar reference
  int64_t mr, nr;
  int64_t k_align;    // K is padded to a multiple of this
  int64_t row_block;  // rows of A per parallel item: a multiple of mr
  int64_t panel_block;  // panels of B per parallel item
  bool unsigned_a;    // VNNI: A stored as a + 128, with column compensation
  bool tiled_a;       // AMX: A stored as tiles (Note [Packed int8 operands])
  bool avx512_packers;  // packs and scans with the AVX-512 units (int8_pack_avx512.cpp)
};

// Bytes of k in one AMX tile row: AMX pads K to this and packs A as tiles of it.
constexpr int64_t kAmxTileBytes = 64;

// AMX items are larger: a block of A (256 rows × K) and eight panels of B stay in L2 while the
// kernel sweeps them, so each byte fetched from memory serves many more tiles — at AMX's rate
// 64 × 32 items would need more bandwidth than memory has.
Kernel kernel_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return {nullptr, 1, 1, 1, 64, 1, false, false, false};
    case CpuIsa::Avx2: return {kernels::int8_gemm_panel_avx2, 4, 16, 4, 64, 1, false, false, false};
    case CpuIsa::Avx512: return {kernels::int8_gemm_panel_avx512, 8, 32, 4, 64, 1, false, false, true};
    case CpuIsa::Avx512Vnni:
    case CpuIsa::Avx512Bf16: return {kernels::int8_gemm_panel_avx512vnni, 8, 32, 4, 64, 1, true, false, true};
    case CpuIsa::Amx: return {kernels::int8_gemm_panel_amx, 32, 32, kAmxTileBytes, 256, 8, false, true, true};
  }
  WEFT_FAIL("[int8_gemm] unknown instruction-set level");
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Whether p[0, count) holds -128; no early exit, so the scan vectorises.
bool holds_minus_128(const int8_t* p, int64_t count) {
  uint8_t any = 0;
  for (int64_t i = 0; i < count; ++i) any |= static_cast<uint8_t>(p[i] == -128);
  return any != 0;
}

// One panel of B: columns src[0 .. cols) (rows of b, k bytes each) into dst, whose K padding is
// already zero. The loop runs along the destination, so each of its cache lines is written once,
// whole; four k-groups at a time, one 16-byte read per column feeds four 4-byte writes. Sizes are
// plain values here, not captures: every byte store may alias a capture, which the compiler would
// then reload after each one.
void pack_b_panel(const int8_t* src, int64_t k, int64_t cols, int64_t nr, int8_t* dst) {
  const int64_t whole_groups = k / 4;
  int64_t g = 0;
  for (; g + 4 <= whole_groups; g += 4) {
    int8_t* out = dst + g * nr * 4;
    for (int64_t col = 0; col < cols; ++col) {
      uint32_t words[4];
      std::memcpy(words, src + col * k + 4 * g, sizeof(words));
      for (int64_t w = 0; w < 4; ++w) std::memcpy(out + (w * nr + col) * 4, &words[w], 4);
    }
  }
  for (; g < whole_groups; ++g)
    for (int64_t col = 0; col < cols; ++col) std::memcpy(dst + (g * nr + col) * 4, src + col * k + 4 * g, 4);
  for (int64_t col = 0; col < cols; ++col)
    for (int64_t l = whole_groups * 4; l < k; ++l) dst[(whole_groups * nr + col) * 4 + l % 4] = src[col * k + l];
}

// Group `group` of mr rows of A (m × k) in its packed form at dst, padding included (zero, or 128
// for VNNI: a zero shifted), so the buffer needs no clearing first. Rows follow each other, kp
// bytes apart, or (tiled A) the group is a run of tiles, mr rows × 64 bytes each, so that the AMX
// kernel reads it front to back. Returns whether the rows hold -128 (checked while they are in
// cache, instead of in a pass of its own). AVX-512 levels copy, shift and check a row in one
// vector pass (int8_pack_avx512.cpp); the loops here are the reference.
bool pack_a_group(const Kernel& kernel, const int8_t* a, int64_t m, int64_t k, int64_t kp, int64_t group,
                  uint8_t* dst) {
  bool minus_128 = false;
  for (int64_t r = 0; r < kernel.mr; ++r) {
    const int64_t row = group * kernel.mr + r;
    const int8_t* src = row < m ? a + row * k : nullptr;
    if (src && kernel.avx512_packers && !kernel.tiled_a) {  // copies, shifts and scans in one pass
      minus_128 |= kernels::int8_pack_a_row_avx512(src, k, kp, kernel.unsigned_a, dst + r * kp);
      continue;
    }
    if (src) minus_128 |= holds_minus_128(src, k);
    if (kernel.tiled_a) {
      for (int64_t l = 0; l < kp; l += kAmxTileBytes) {
        uint8_t* out = dst + (l / kAmxTileBytes * kernel.mr + r) * kAmxTileBytes;
        if (src && l + kAmxTileBytes <= k) {
          std::memcpy(out, src + l, kAmxTileBytes);
        } else {
          std::memset(out, 0, kAmxTileBytes);
          if (src && l < k) std::memcpy(out, src + l, static_cast<size_t>(k - l));
        }
      }
      continue;
    }
    uint8_t* out = dst + r * kp;
    const uint8_t pad = kernel.unsigned_a ? 128 : 0;
    if (!src) {
      std::memset(out, pad, static_cast<size_t>(kp));
      continue;
    }
    std::memcpy(out, src, static_cast<size_t>(k));
    std::memset(out + k, pad, static_cast<size_t>(kp - k));
    if (kernel.unsigned_a)
      for (int64_t l = 0; l < k; ++l) out[l] ^= 0x80;  // a + 128
  }
  return minus_128;
}

void check_sizes(int64_t m, int64_t n, int64_t k) {
  WEFT_CHECK(m >= 0 && n >= 0 && k >= 0, "[int8_gemm] sizes must be non-negative, got M=", m, ", N=", n, ", K=", k);
  WEFT_CHECK(k <= kInt8GemmMaxK, "[int8_gemm] K must be at most ", kInt8GemmMaxK,
             " so that an exact result fits in int32, got ", k);
}

// Below this many multiply-adds a product runs on the calling thread: waking the other threads
// would cost more than it saves (and far more on a machine whose cores are busy).
constexpr int64_t kParallelWork = int64_t{1} << 20;
// Up to this many rows of A, an unpacked B is read in place (Note [A few rows: B in place]).
constexpr int64_t kInPlaceMaxRows = 4;
// Copying a byte while packing costs about what this many multiply-adds do.
constexpr int64_t kPackWorkPerByte = 8;

[[noreturn]] void fail_minus_128(const int8_t* p, int64_t count, const char* operand) {
  const int64_t at = std::find(p, p + count, int8_t{-128}) - p;
  WEFT_FAIL("[int8_gemm] operands must lie in [-127, 127] (vector-wise int8 codes); ", operand, " holds -128 at element ",
            at);
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

namespace {

// A packed copy of A up to this size is made by every thread (Note [Each thread its own copy of
// A]): it stays in the core's L2 beside its share of B.
constexpr int64_t kOwnCopyOfABytes = int64_t{512} << 10;

// The layout of B's panels for one kernel: K padded to whole k-groups of 4 (and AMX tiles), N to
// whole panels of nr columns.
struct PanelLayout {
  int64_t groups, whole_groups, panels, panel_bytes;
  PanelLayout(const Kernel& kernel, int64_t n, int64_t k)
      : groups(round_up(k, kernel.k_align) / 4),
        whole_groups(k / 4),
        panels(round_up(n, kernel.nr) / kernel.nr),
        panel_bytes(groups * kernel.nr * 4) {}
};

// Panels [first, first + count) of b: (n, k) into `data` (and, for VNNI, their columns'
// compensation). Each column's k-groups of 4 bytes go nr·4 bytes apart: a transpose of 4-byte
// words; AVX-512 levels transpose 16 × 16 words at a time and scan the rows for -128 and their
// sums with vector instructions (int8_pack_avx512.cpp). The packers write the columns' whole
// groups and the bytes of a partial one; the rest of that group and the groups padding K are
// cleared first. Columns past N in the last panel are left as they are:
// they only feed columns of C that are never stored. Returns whether the panels' rows of b hold
// -128 (checked while they are in cache).
bool pack_panels(const Kernel& kernel, const PanelLayout& layout, const int8_t* b, int64_t n, int64_t k,
                 int64_t first, int64_t count, int8_t* data, int32_t* compensation) {
  bool minus_128 = false;
  for (int64_t panel = first; panel < first + count; ++panel) {
    const int8_t* src = b + panel * kernel.nr * k;
    const int64_t cols = std::min(kernel.nr, n - panel * kernel.nr);
    int8_t* dst = data + panel * layout.panel_bytes;
    std::memset(dst + layout.whole_groups * kernel.nr * 4, 0,
                static_cast<size_t>((layout.groups - layout.whole_groups) * kernel.nr * 4));
    if (kernel.avx512_packers) {
      kernels::int8_pack_b_panel_avx512(src, k, cols, dst);
      int32_t* sums = compensation ? compensation + panel * kernel.nr : nullptr;
      minus_128 |= kernels::int8_scan_b_rows_avx512(src, k, cols, sums);
      continue;
    }
    pack_b_panel(src, k, cols, kernel.nr, dst);
    minus_128 |= holds_minus_128(src, cols * k);
    if (compensation == nullptr) continue;
    for (int64_t j = 0; j < cols; ++j) {
      int64_t sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += src[j * k + l];
      // The kernel's lanes wrap modulo 2^32; so does this.
      compensation[panel * kernel.nr + j] = static_cast<int32_t>(static_cast<uint32_t>(sum * 128));
    }
  }
  return minus_128;
}

// The storage of each calling thread for its packed copy of A: a fresh buffer would be cleared and
// page-faulted in on every product. It grows to the largest A the thread has multiplied.
uint8_t* thread_a_buffer(int64_t bytes) {
  thread_local detail::AlignedVector<uint8_t> buffer;
  if (buffer.size() < static_cast<size_t>(bytes)) buffer.resize(static_cast<size_t>(bytes));
  return buffer.data();
}

// C's rows [0, m) at panels [first, first + count), A packed at ap (kp bytes of k per row), on
// the calling thread: row blocks of the kernel's row_block, panels in its panel_block at a time.
void multiply_panels(const Kernel& kernel, const uint8_t* ap, int64_t kp, const int8_t* b_data,
                     const int32_t* compensation, int64_t groups, int64_t m, int64_t n, int64_t first, int64_t count,
                     int64_t row_block_first, int64_t row_block_count, int32_t* c) {
  const int64_t mp = round_up(m, kernel.mr), group_stride = kernel.mr * kp;
  for (int64_t block = row_block_first; block < row_block_first + row_block_count; ++block)
    for (int64_t panel = first; panel < first + count; panel += kernel.panel_block) {
      const int64_t row0 = block * kernel.row_block;
      kernels::Int8PanelArgs args;
      args.a = ap + row0 / kernel.mr * group_stride;
      args.a_stride = kernel.tiled_a ? group_stride : kp;
      args.b = b_data + panel * groups * kernel.nr * 4;
      args.compensation = compensation ? compensation + panel * kernel.nr : nullptr;
      args.groups = groups;
      args.rows = std::min(kernel.row_block, mp - row0);
      args.c = c + row0 * n + panel * kernel.nr;
      args.c_stride = n;
      args.c_rows = std::min(args.rows, m - row0);
      args.cols = std::min(std::min(kernel.panel_block, first + count - panel) * kernel.nr, n - panel * kernel.nr);
      kernel.panel(args);
    }
}

}  // namespace

// Packs b: (n, k) into `packed`, reusing its storage when it is large enough: every byte a product
// reads is written here, padding included, so the storage needs no clearing first.
void repack_int8_matrix(PackedInt8Matrix& packed, const int8_t* b, int64_t n, int64_t k, CpuIsa isa) {
  check_sizes(0, n, k);
  WEFT_CHECK(isa <= cpu_isa_supported(), "[int8_gemm] cannot pack for ", cpu_isa_name(isa), ": this CPU supports up to ",
             cpu_isa_name(cpu_isa_supported()));
  const Kernel kernel = kernel_for(isa);
  // A refused B leaves `packed` empty, never a packing that skipped its check. The scalar
  // reference keeps B as it is, so it is scanned here; the packers check what they pack.
  if (kernel.panel == nullptr) {
    if (holds_minus_128(b, n * k)) {
      packed = PackedInt8Matrix();
      fail_minus_128(b, n * k, "B");
    }
    packed.prepare(n, k, isa, 0, 0);
    packed.data_.assign(b, b + n * k);
    return;
  }
  const PanelLayout layout(kernel, n, k);
  packed.prepare(n, k, isa, layout.panels * layout.panel_bytes, kernel.unsigned_a ? layout.panels * kernel.nr : 0);
  int32_t* compensation = kernel.unsigned_a ? packed.compensation_.data() : nullptr;
  // Panel by panel on weft's threads (a 4096 × 4096 B is 16 MB, packed on every call of
  // int8_linear_matmul).
  std::atomic<bool> minus_128{false};
  parallel_for_if(n * k * kPackWorkPerByte >= kParallelWork, layout.panels, [&](int64_t panel) {
    if (pack_panels(kernel, layout, b, n, k, panel, 1, packed.data_.data(), compensation)) minus_128 = true;
  });
  if (minus_128) {
    packed = PackedInt8Matrix();
    fail_minus_128(b, n * k, "B");
  }
}

PackedInt8Matrix pack_int8_matrix(const int8_t* b, int64_t n, int64_t k, CpuIsa isa) {
  PackedInt8Matrix packed;
  repack_int8_matrix(packed, b, n, k, isa);
  return packed;
}

void int8_gemm(const int8_t* a, int64_t m, const PackedInt8Matrix& b, int32_t* c) {
  const int64_t n = b.n_, k = b.k_;
  check_sizes(m, n, k);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum
    std::fill(c, c + m * n, 0);
    return;
  }
  const Kernel kernel = kernel_for(b.isa_);
  WEFT_CHECK(b.isa_ <= cpu_isa_supported(), "[int8_gemm] B was packed for ", cpu_isa_name(b.isa_),
             ", which this CPU does not support");
  const int64_t row_block = kernel.row_block;
  if (kernel.panel == nullptr) {  // the scalar reference reads A as it is: scanned here
    if (holds_minus_128(a, m * k)) fail_minus_128(a, m * k, "A");
    parallel_for_if(m * n * k >= kParallelWork, (m + row_block - 1) / row_block, [&](int64_t block) {
      const int64_t row0 = block * row_block, rows = std::min(row_block, m - row0);
      int8_gemm_reference(a + row0 * k, b.data_.data(), c + row0 * n, rows, n, k);
    });
    return;
  }
  // A, padded to whole k-groups and register tiles (and shifted to unsigned for VNNI).
  const int64_t kp = round_up(k, kernel.k_align), mp = round_up(m, kernel.mr);
  uint8_t* ap = thread_a_buffer(mp * kp);  // the lambdas below run on other threads too: they use this one
  const int64_t group_stride = kernel.mr * kp;
  std::atomic<bool> minus_128{false};
  parallel_for_if(m * k * kPackWorkPerByte >= kParallelWork, mp / kernel.mr, [&](int64_t group) {
    if (pack_a_group(kernel, a, m, k, kp, group, ap + group * group_stride)) minus_128 = true;
  });
  if (minus_128) fail_minus_128(a, m * k, "A");
  const PanelLayout layout(kernel, n, k);
  const int64_t panel_blocks = (layout.panels + kernel.panel_block - 1) / kernel.panel_block;
  const int64_t row_blocks = (mp + row_block - 1) / row_block;
  const int32_t* compensation = kernel.unsigned_a ? b.compensation_.data() : nullptr;
  parallel_for_if(m * n * k >= kParallelWork, row_blocks * panel_blocks, [&](int64_t item) {
    const int64_t block = item / panel_blocks, panel = item % panel_blocks * kernel.panel_block;
    multiply_panels(kernel, ap, kp, b.data_.data(), compensation, layout.groups, m, n, panel,
                    std::min(kernel.panel_block, layout.panels - panel), block, 1, c);
  });
}

// Note [Each thread its own copy of A]: with B packed for one product, the usual split packs B
// and A on all threads and then hands out blocks of C, so each thread reads half of what it
// multiplies from the other core's cache, with three parallel regions per product (512³ on the
// AMX Xeon: 125 µs a call against 98 µs for packing and multiplying apart). When A is the smaller
// operand and fits in L2, each thread instead takes a contiguous share of B's panels, packs them,
// packs all of A for itself and computes its columns of C: one parallel region, and every byte it
// reads was written on its core. At the MLP's shapes, 128 × 512 × 784 and × 512: 80 → 71 and
// 49 → 42 µs a call; at 512³, where A is as large as B, the duplicated packing eats the gain.
//
// Note [Few columns: Cᵀ = B·Aᵀ]: a kernel tile is mr rows of A by nr columns of B in its vector
// lanes, so C with fewer columns than nr (the MLP's last layer: 10 of 32) leaves most lanes idle.
// Where tiles the other way round would cover less (N padded to mr by M padded to nr), C is
// computed transposed, B as the left operand, and transposed back; the integers are the same.
// 128 × 10 × 512, Zen 4: 11.2 -> 7.6 µs.
//
// Note [A few rows: B in place]: at a few rows of A (a layer decoding one token) the product reads
// all of B for little arithmetic, so its cost is B's bytes: packing B first reads it, writes a
// copy and reads that. From AVX2 up, the kernels::Int8Gemv tables (vpdpbusd from AVX-512 VNNI)
// read B as it is, split by rows of B over weft's threads; a layer then needs no packed copy of
// its weight beside the codes.
void int8_gemm(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k) {
  const CpuIsa level = cpu_isa();
  check_sizes(m, n, k);
  if (m > 0 && m <= kInPlaceMaxRows && n > 0 && k > 0 && level >= CpuIsa::Avx2) {
    const int64_t parts = m * n * k >= kParallelWork ? std::min<int64_t>(num_threads(), (n + 15) / 16) : 1;
    const kernels::Int8Gemv& gemv = level >= CpuIsa::Avx512Vnni ? kernels::kInt8GemvAvx512Vnni
                                    : level >= CpuIsa::Avx512   ? kernels::kInt8GemvAvx512
                                                                : kernels::kInt8GemvAvx2;
    std::atomic<bool> minus_128{false};
    parallel_for_if(parts > 1, parts, [&](int64_t part) {
      const int64_t first = n * part / parts, count = n * (part + 1) / parts - first;
      for (int64_t i = 0; i < m; i += 4) {
        const auto rows = gemv.rows[std::min<int64_t>(m - i, 4) - 1];
        if (rows(a + i * k, b + first * k, count, k, c + i * n + first, n)) minus_128 = true;
      }
    });
    if (minus_128) fail_minus_128(b, n * k, "B");
    if (holds_minus_128(a, m * k)) fail_minus_128(a, m * k, "A");
    return;
  }
  // B packed into storage this thread keeps, as A is: a fresh allocation would be page-faulted in
  // on every product (1024³: 990 µs a call against 690 µs packing and multiplying in warm storage).
  thread_local PackedInt8Matrix packed_b;
  const CpuIsa isa = level;
  const Kernel kernel = kernel_for(isa);
  const bool few_columns = kernel.panel != nullptr && n < kernel.nr &&
                           round_up(n, kernel.mr) * round_up(m, kernel.nr) < round_up(m, kernel.mr) * kernel.nr;
  if (few_columns) {
    thread_local std::vector<int32_t> c_transposed;
    c_transposed.resize(static_cast<size_t>(m * n));
    try {
      int8_gemm(b, a, c_transposed.data(), n, m, k);
    } catch (const Error&) {  // -128 in an operand: named as the caller knows it, B first
      if (holds_minus_128(b, n * k)) fail_minus_128(b, n * k, "B");
      if (holds_minus_128(a, m * k)) fail_minus_128(a, m * k, "A");
      throw;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] = c_transposed[static_cast<size_t>(j * m + i)];
    return;
  }
  const int64_t kp = round_up(k, kernel.k_align), mp = round_up(m, kernel.mr);
  const PanelLayout layout(kernel, n, k);
  const int64_t parts = std::min<int64_t>(num_threads(), layout.panels);
  const bool own_a = kernel.panel != nullptr && parts > 1 && m * n * k >= kParallelWork && m <= n &&
                     mp * kp <= kOwnCopyOfABytes;
  if (!own_a) {
    repack_int8_matrix(packed_b, b, n, k, isa);
    return int8_gemm(a, m, packed_b, c);
  }
  packed_b.prepare(n, k, isa, layout.panels * layout.panel_bytes, kernel.unsigned_a ? layout.panels * kernel.nr : 0);
  int8_t* b_data = packed_b.data_.data();
  int32_t* compensation = kernel.unsigned_a ? packed_b.compensation_.data() : nullptr;
  const int64_t row_blocks = (mp + kernel.row_block - 1) / kernel.row_block;
  // The operands are checked for -128 by the packers; a part that finds one computes nothing, and
  // the error (B first, as repack_int8_matrix reports it) comes after the region.
  std::atomic<bool> minus_128_a{false}, minus_128_b{false};
  parallel_for(parts, [&](int64_t part) {
    const int64_t first = layout.panels * part / parts, count = layout.panels * (part + 1) / parts - first;
    const bool bad_b = pack_panels(kernel, layout, b, n, k, first, count, b_data, compensation);
    uint8_t* ap = thread_a_buffer(mp * kp);
    bool bad_a = false;
    for (int64_t group = 0; group < mp / kernel.mr; ++group)
      bad_a |= pack_a_group(kernel, a, m, k, kp, group, ap + group * kernel.mr * kp);
    if (bad_b) minus_128_b = true;
    if (bad_a) minus_128_a = true;
    if (!bad_a && !bad_b)
      multiply_panels(kernel, ap, kp, b_data, compensation, layout.groups, m, n, first, count, 0, row_blocks, c);
  });
  if (minus_128_b) fail_minus_128(b, n * k, "B");
  if (minus_128_a) fail_minus_128(a, m * k, "A");
}

}  // namespace weft::precision::quant
