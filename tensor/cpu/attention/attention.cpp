// The fused CPU attention (contract: tensor/attention_kernels.h), FlashAttention-2 on a CPU:
// no L×S score matrix, one Br×Bc tile of it at a time.
//
// Layout: every tile is held transposed, keys down the rows and queries across the columns
// (attention_tiles.h), so the per-query softmax statistics are vectors and each product between
// tiles is an ordinary row-major GEMM tile c (+)= A·B with A read in place, which is what the
// GEMM's microkernels take (tensor/cpu/gemm/gemm_kernels.h: GemmTileF32 with a_packed false).
// Keys and values are read where they are when they are float32 with unit last stride (the
// transposed (B, T, H, hs) views of a model), else a tile at a time is widened into a buffer;
// queries are packed once per block, transposed and scaled.
//
// Forward, per (batch, head, block of Br queries) on weft's pool:
//   Qᵀ (E×Br) = scale·q[i0 : i0+Br]ᵀ;  m = −inf, l = 0, Oᵀ (Ev×Br) = 0
//   for each tile of Bc keys (causal: up to the block's last query only):
//     Sᵀ (Bc×Br) = K·Qᵀ;  + mask;  softmax_step (causal diagonal masked): Sᵀ ← Pᵀ, m, l, alpha
//     Oᵀ ← alpha·Oᵀ + Vᵀ·Pᵀ  (Pᵀ after dropout)
//   out = Oᵀᵀ / l, lse = m + log l (0 and +inf for a row with nothing kept).
// Backward, per (batch, key/value head) on the pool, over the query heads that share it, each
// head's queries (scaled Qᵀ, Q), dO (dOᵀ, dO), D = rowsum(dO∘O) and dQᵀ widened once:
//   for each key tile j, for each query block i (causal: those that reach the tile):
//     Pᵀ = exp(K·Qᵀ (+ mask) − lse);  dPᵀ = V·dOᵀ;  (dropout: Pᵀ_d = Z∘Pᵀ, dPᵀ ← Z∘dPᵀ)
//     dV_j += Pᵀ_d·dO_i;  dSᵀ = Pᵀ∘(dPᵀ − D);  dK_j += dSᵀ·Q_i;  dQᵀ_i += Kᵀ·dSᵀ
//   dq = scale·dQᵀᵀ per head; dk = scale·dK, dv = dV per key/value head.
// Work items own what they write (a block of out; a key/value head's dk, dv and its query heads'
// dq), so no two threads touch one output. The backward runs N·Hk items in parallel: one head
// and batch 1 runs on one thread. Memory: besides out and lse, the forward takes a few tiles per
// thread, and (E + Ev)·S floats per thread for keys and values it widens; the backward
// (2E + Ev)·L + (E + Ev)·S floats per thread, (E + 2Ev)·L more for inputs it widens (q, dO and out
// are read in place when float32), linear in the context.
// Blocks: Br = 128 queries (four zmm across a score tile; against 64, half the key/value traffic
// per product at long context), Bc = 64 keys.
//
// bfloat16 at CpuIsa::Amx runs the same loops with the products on AMX tiles (forward_amx,
// backward_amx below) and the elementwise steps fused with the rounding of what they produce for
// the next product (AttentionTilesBf16, attention_avx512bf16.cpp); every other dtype and level
// uses the float32 tiles. A float32 or bfloat16 forward of at most kRowsMaxQueries queries (a
// decode step) takes the row path at every level instead (forward_rows, attention_rows.h): one
// query row against the keys and values in place.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/attention_kernels.h"
#include "tensor/cpu/aligned_vector.h"
#include "tensor/cpu/amx_tiles.h"
#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/cpu/convert.h"
#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/isa.h"
#include "tensor/float_formats.h"
#include "tensor/parallel.h"
#include "tensor/philox.h"

namespace weft::detail {
namespace {

constexpr int64_t kBr = 128;  // queries per block: the columns of every tile
constexpr int64_t kBc = 64;  // keys per tile
constexpr float kInf = std::numeric_limits<float>::infinity();

using Buffer = AlignedVector<float>;

// Per-thread scratch, one buffer per slot, kept from call to call: a backward's per-head buffers
// are megabytes, and fresh ones are fresh pages every work item (their faults were ~5 % of a
// backward at T = 1024).
enum Slot { kQt, kRow, kScores, kOut, kMax, kSum, kAlpha, kKeys, kValues, kQRows, kDOutT, kDOut, kD, kDQt, kDK, kDV,
            kDScores, kDropped, kSlots };

float* scratch(Slot slot, int64_t n) {
  thread_local Buffer buffers[kSlots];
  Buffer& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// A leading dimension of at least n floats that starts rows an odd number of cache lines apart.
// The backward's transposed per-head buffers (E rows of L) are read 64 rows at a time as a
// product's operand; at L = 1024 or 4096 their rows fell in the same L1 sets and an operand that
// fits in L1 was fetched from L2 row by row.
int64_t spread_ld(int64_t n) { return ((n + 15) / 16 | 1) * 16; }

float* scratch_filled(Slot slot, int64_t n, float value) {
  float* p = scratch(slot, n);
  std::fill_n(p, n, value);
  return p;
}

const AttentionTiles& tiles_for(CpuIsa isa) {
  if (isa >= CpuIsa::Avx512) return kAttentionTilesAvx512;
  if (isa >= CpuIsa::Avx2) return kAttentionTilesAvx2;
  return kAttentionTilesScalar;
}

// The float32 GEMM microkernels of the level (the AVX-512 BF16 and AMX sets are bf16 panels).
const GemmKernel& gemm_for(CpuIsa isa) {
  if (isa >= CpuIsa::Avx512) return kGemmF32Avx512;
  if (isa >= CpuIsa::Avx2) return kGemmF32Avx2;
  return kGemmScalar;
}

// Note [What causal products leave out]
// A tile the causal diagonal crosses hides its (key j, query i) pairs with i < diag + j: half of
// such a tile's pairs, and at T = 256 such tiles are most of the work. Products whose rows are the
// tile's keys leave out, per microkernel tile of keys r0 .. r0 + mr, what every one of those keys
// hides:
// - kHiddenColumns (Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ: queries across C): C's columns below diag + r0, in
//   whole vectors of 16. The softmax step, probs and dscores then overwrite every hidden value
//   with −inf or 0, whatever stale value it holds (0 times a stale inf would be NaN).
// - kHiddenLeadingK (dV += Pᵀ·dO and dK += dSᵀ·Q, queries along K): terms p < diag + r0, whose A
//   values (P, dS) are 0. A sum from +0 never becomes −0, so leaving out its zero terms gives the
//   same bits.
// Products over the keys (Oᵀ += Vᵀ·Pᵀ, dQᵀ += Kᵀ·dSᵀ) keep every term: a 64-query panel of C
// needs all 64 keys of a diagonal tile. Float32, 12 heads × 64, causal, forward + backward, two
// threads (with D below vectorised): T = 256 2.01 -> 1.85 ms, T = 1024 26.0 -> 25.4 ms.
enum class LeaveOut { kNothing, kHiddenColumns, kHiddenLeadingK };

// c(m×n) (+)= A(m×k)·B(k×n) with A(r, p) = a[r·rs_a + p·cs_a], B(p, c) = b[p·ldb + c] and C
// row-major (ldc), one microkernel tile at a time, down each column panel of B; `leave_out` and
// `diag` say what a causal tile may leave out (Note [What causal products leave out]).
void product(const GemmKernel& g, int64_t m, int64_t n, int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
             const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
             LeaveOut leave_out = LeaveOut::kNothing, int64_t diag = kNoDiag) {
  for (int64_t c0 = 0; c0 < n; c0 += g.nr)
    for (int64_t r0 = 0; r0 < m; r0 += g.mr) {
      const int64_t first_kept = diag + r0;  // the first query the tile's first key sees
      int64_t col = c0, p0 = 0;
      if (leave_out == LeaveOut::kHiddenColumns && first_kept > c0) col = c0 + (first_kept - c0) / 16 * 16;
      if (leave_out == LeaveOut::kHiddenLeadingK && first_kept > 0) p0 = std::min(first_kept, k);
      const int64_t cols = std::min<int64_t>(g.nr, n - c0) - (col - c0);
      if (cols <= 0 || (p0 == k && accumulate)) continue;
      const GemmTileF32 tile{k - p0, a + r0 * rs_a + p0 * cs_a, rs_a, cs_a, false, b + p0 * ldb + col, ldb, false,
                             c + r0 * ldc + col, ldc, static_cast<int>(std::min<int64_t>(g.mr, m - r0)),
                             static_cast<int>(cols), accumulate};
      g.micro_f32(tile);
    }
}

// A 4-D tensor of storage type T read or written through its strides.
template <class T>
struct View4 {
  T* data;
  int64_t s0, s1, s2, s3;
  explicit View4(const Tensor& t)
      : data(static_cast<T*>(t.data_ptr())), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  T* row(int64_t n, int64_t h, int64_t i) const { return data + n * s0 + h * s1 + i * s2; }
};

// n values at p (stride in elements) widened into dst.
template <class T>
void load_row(const T* p, int64_t stride, int64_t n, float* dst) {
  convert_run<float, T>(reinterpret_cast<char*>(dst), sizeof(float), reinterpret_cast<const char*>(p),
                        stride * static_cast<int64_t>(sizeof(T)), n);
}

// n values from src rounded into p (stride in elements).
template <class T>
void store_row(T* p, int64_t stride, int64_t n, const float* src) {
  convert_run<T, float>(reinterpret_cast<char*>(p), stride * static_cast<int64_t>(sizeof(T)),
                        reinterpret_cast<const char*>(src), sizeof(float), n);
}

// Row r0 of a head where its rows can be read as they lie (float32 with unit column stride; `ld`
// set to their stride), else nullptr: they must be widened or gathered into scratch.
template <class T>
const float* rows_in_place(const View4<const T>& t, int64_t n, int64_t h, int64_t r0, int64_t& ld) {
  if constexpr (std::is_same_v<T, float>) {
    if (t.s3 == 1) {
      ld = t.s2;
      return t.row(n, h, r0);
    }
  }
  return nullptr;
}

// Rows r0 .. r0+rows of a key or value head as float32 rows: in place when they already are,
// else widened into the scratch `slot`. Returns the first row and sets `ld` to the row stride.
template <class T>
const float* rows_of(const View4<const T>& t, int64_t n, int64_t h, int64_t r0, int64_t rows, int64_t width,
                     Slot slot, int64_t& ld) {
  if (const float* in_place = rows_in_place(t, n, h, r0, ld)) return in_place;
  float* buffer = scratch(slot, rows * width);
  for (int64_t r = 0; r < rows; ++r) load_row(t.row(n, h, r0 + r), t.s3, width, buffer + r * width);
  ld = width;
  return buffer;
}

// Which head's rows each slot of this thread holds, and how many, for which forward call: calls
// are numbered across all input types, as the slots are shared by them.
struct WidenedRows {
  uint64_t call = 0;
  int64_t n = -1, h = -1, rows = 0;
};
thread_local WidenedRows t_widened[kSlots];
std::atomic<uint64_t> forward_calls{0};

// Rows 0 .. rows of a key or value head as float32 rows, like rows_of, but widened into the
// thread's `slot` (sized for `capacity` rows) only as far as no earlier work item of the same
// forward call (`call`) on this thread has widened them: parallel_for hands each thread a
// contiguous range of items, so a head's query blocks mostly run in order on one thread, and a
// block needs the rows of every block before it. Widened per key tile instead, every block widened
// them all again (bfloat16, 12 heads, T = 4096, one core: the forward 245 -> 227-235 ms).
template <class T>
const float* head_rows_of(const View4<const T>& t, uint64_t call, int64_t n, int64_t h, int64_t rows,
                          int64_t capacity, int64_t width, Slot slot, int64_t& ld) {
  ld = width;
  if (rows == 0) return nullptr;  // no keys to read (S = 0), and t may have no memory at all
  if (const float* in_place = rows_in_place(t, n, h, 0, ld)) return in_place;
  WidenedRows& w = t_widened[slot];
  if (w.call != call || w.n != n || w.h != h) w = {call, n, h, 0};
  float* buffer = scratch(slot, capacity * width);
  for (int64_t r = w.rows; r < rows; ++r) load_row(t.row(n, h, r), t.s3, width, buffer + r * width);
  w.rows = std::max(w.rows, rows);
  return buffer;
}

// dst(j, i) = src(i, j) for float32 rows × cols (leading dimensions ld_src, ld_dst): the AVX-512
// transposer where the level has it (a scalar loop of strided stores was a fifth of a T = 256
// float32 backward), else element by element.
void transpose_f32(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst, int64_t ld_dst,
                   CpuIsa isa) {
  if (isa >= CpuIsa::Avx512) return transpose_copy_avx512(src, false, ld_src, rows, cols, dst, false, ld_dst);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * ld_dst + i] = src[i * ld_src + j];
}

// Rows i0 .. i0+rows of head (n, h) of `dst` from a transposed float32 buffer: dst(i0 + i, d) =
// src(d, i) for d < width (src's leading dimension ld). The AVX-512 transposer where the rows are
// float32 or bfloat16 with unit stride and the level has it (rounding as store_row rounds), else
// row by row through `row` (width floats).
template <class T>
void store_transposed(const float* src, int64_t ld, int64_t width, int64_t rows, const View4<T>& dst, int64_t n,
                      int64_t h, int64_t i0, CpuIsa isa, float* row) {
  constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
  if ((std::is_same_v<T, float> || kBf16) && dst.s3 == 1 && isa >= CpuIsa::Avx512)
    return transpose_copy_avx512(src, false, ld, width, rows, dst.row(n, h, i0), kBf16, dst.s2);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t d = 0; d < width; ++d) row[d] = src[d * ld + i];
    store_row(dst.row(n, h, i0 + i), dst.s3, width, row);
  }
}

// x(r, c) *= factor for r < rows, c < cols of a buffer with leading dimension ld.
void scale_block(float* x, int64_t ld, int64_t rows, int64_t cols, float factor) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[r * ld + c] *= factor;
}

// The mask of (n, h) for queries i0.. (cols) and keys j0.. (rows) added to the transposed score
// tile s: a bool mask sets what it hides to −inf, a float mask is added.
template <class M>
void add_mask(const Tensor& mask, int64_t n, int64_t h, int64_t i0, int64_t j0, int rows, int cols, float* s,
              int64_t ld) {
  const M* base = static_cast<const M*>(mask.data_ptr()) + n * mask.stride(0) + h * mask.stride(1) +
                  i0 * mask.stride(2) + j0 * mask.stride(3);
  const int64_t si = mask.stride(2), sj = mask.stride(3);
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) {
      const M value = base[i * si + j * sj];
      if constexpr (std::is_same_v<M, bool>) {
        if (!value) s[j * ld + i] = -kInf;
      } else {
        s[j * ld + i] += convert<float>(value);
      }
    }
}

void add_mask_any(const Tensor& mask, int64_t n, int64_t h, int64_t i0, int64_t j0, int rows, int cols, float* s,
                  int64_t ld) {
  switch (mask.dtype()) {
    case DType::Bool: return add_mask<bool>(mask, n, h, i0, j0, rows, cols, s, ld);
    case DType::Float32: return add_mask<float>(mask, n, h, i0, j0, rows, cols, s, ld);
    case DType::BFloat16: return add_mask<BFloat16>(mask, n, h, i0, j0, rows, cols, s, ld);
    case DType::Float16: return add_mask<Half>(mask, n, h, i0, j0, rows, cols, s, ld);
    default: WEFT_FAIL("[scaled_dot_product_attention] internal: mask of dtype ", mask.dtype());
  }
}

// The dropout of Note [Attention dropout stream] on a transposed tile: dst(j, i) = src(j, i)·scale
// where the weight of query i0 + i and key j0 + j in head `head` (= n·Hq + h) is kept, else 0.
struct Dropout {
  uint64_t key;
  float keep, scale;
  int64_t L, S;
  bool active() const { return keep < 1.0f; }
  void apply(const float* src, float* dst, int64_t ld, int rows, int cols, int64_t head, int64_t i0,
             int64_t j0) const {
    for (int j = 0; j < rows; ++j) {
      const uint64_t first = static_cast<uint64_t>(((head * S + j0 + j) * L) + i0);
      PhiloxBlock block{};
      uint64_t group = ~uint64_t{0};
      for (int i = 0; i < cols; ++i) {
        const uint64_t index = first + static_cast<uint64_t>(i);
        if (index / 4 != group) {
          group = index / 4;
          block = philox_group(key, group);
        }
        dst[j * ld + i] = philox_uniform(block.w[index % 4]) < keep ? src[j * ld + i] * scale : 0.0f;
      }
    }
  }
};

Dropout dropout_of(double p, uint64_t key, int64_t L, int64_t S) {
  const float keep = static_cast<float>(1.0 - p);
  return {key, keep, keep > 0.0f ? 1.0f / keep : 0.0f, L, S};
}

// The causal diagonal's place in a tile of keys j0.. × queries i0.. (attention_tiles.h), or
// kNoDiag when no (key, query) pair of the tile is hidden.
int64_t diag_of(bool causal, int64_t i0, int64_t j0, int64_t rows) {
  return causal && j0 + rows - 1 > i0 ? j0 - i0 : kNoDiag;
}

// The columns of a tile of keys j0.. × queries i0 .. i0+br that its products and steps cover:
// queries before the causal diagonal's start (i < diag) see none of the tile's keys, so the tile
// starts `skip` columns in (whole AMX panels of 32), with the diagonal's place relative to there.
// The block's last key tile is half such queries; at T = 256 a sixth of the forward's products.
struct TileColumns {
  int64_t skip;
  int cols;
  int64_t diag;
};

TileColumns tile_columns(bool causal, int64_t i0, int64_t j0, int64_t rows, int64_t br) {
  const int64_t diag = diag_of(causal, i0, j0, rows);
  const int64_t skip = diag >= br ? br : diag > 0 ? diag / 32 * 32 : 0;
  return {skip, static_cast<int>(br - skip), diag == kNoDiag ? kNoDiag : diag - skip};
}

// The scale the bf16 path's fused step (AttentionTilesBf16) is left to apply to a tile of unscaled
// scores s: a mask is added to scaled scores, so with one the scale and the mask go on first and 1
// is left.
float masked_scale(const Tensor& mask, float scale, int64_t n, int64_t h, int64_t i0, int64_t j0, int rows, int cols,
                   float* s) {
  if (!mask.defined()) return scale;
  if (scale != 1.0f) scale_block(s, kBr, rows, cols, scale);
  add_mask_any(mask, n, h, i0, j0, rows, cols, s, kBr);
  return 1.0f;
}

// bfloat16 at CpuIsa::Amx: the forward's two products on AMX tiles (kGemmBf16Amx's microkernel,
// 32×32 float32 C from bf16 K-pair panels, tdpbf16ps), the softmax as above. A first pass packs
// every key/value head once (a whole-tensor copy, but per-tile packing would transpose each value
// tile again for every query block): K as plain rows padded to whole AMX steps (E to a multiple of
// 32), Vᵀ per tile of kBc keys (Ev rows of kBc). Per query block, q is packed into K-pair panels
// once; per tile, Pᵀ is rounded to bf16 pairs (as PyTorch's bf16 kernels round P). The scale
// multiplies the float32 scores, so q is never rounded again (a power of two such as 1/8 for heads
// of 64 gives the bits it would have given on q). The packing and the final transpose of Oᵀ into
// the output rows go through the AVX-512 packers (every AMX CPU has AVX-512BW) where rows are
// contiguous, scalar loops otherwise.
void forward_amx(const AttentionForward& a) {
  using Bits = AlignedVector<uint16_t>;
  const int64_t N = a.q.size(0), Hq = a.q.size(1), L = a.q.size(2), E = a.q.size(3);
  const int64_t Hk = a.k.size(1), S = a.k.size(2), Ev = a.v.size(3), group = Hq / Hk;
  const View4<const BFloat16> q(a.q), k(a.k), v(a.v);
  const View4<BFloat16> out(a.out);
  float* const lse = a.lse.data<float>();
  const AttentionTiles& tiles = kAttentionTilesAvx512;
  const AttentionTilesBf16& fused = kAttentionTilesBf16Avx512Bf16;
  const GemmKernel& amx = kGemmBf16Amx;
  const float scale = static_cast<float>(a.scale);
  const Dropout dropout = dropout_of(a.dropout_p, a.dropout_key, L, S);
  const int64_t e_pad = (E + 31) / 32 * 32, ev_pad = (Ev + 31) / 32 * 32, s_pad = (S + kBc - 1) / kBc * kBc;
  Bits keys(static_cast<size_t>(N * Hk * s_pad * e_pad), 0), values(static_cast<size_t>(N * Hk * s_pad * ev_pad), 0);
  // Keys as rows of e_pad values; each block of kBc values transposed into ev_pad rows of kBc keys
  // (the A operand of P·V as plain rows), by the AVX-512 row packer where a row's values are
  // adjacent.
  parallel_for(N * Hk, [&](int64_t item) {
    const int64_t n = item / Hk, hk = item % Hk;
    uint16_t* kp = keys.data() + item * s_pad * e_pad;
    uint16_t* vp = values.data() + item * s_pad * ev_pad;
    for (int64_t j = 0; j < S; ++j) {
      const BFloat16* kr = k.row(n, hk, j);
      if (k.s3 == 1) std::memcpy(kp + j * e_pad, kr, static_cast<size_t>(E) * sizeof(uint16_t));
      else
        for (int64_t e = 0; e < E; ++e) kp[j * e_pad + e] = kr[e * k.s3].bits;
    }
    for (int64_t j0 = 0; j0 < S; j0 += kBc) {
      uint16_t* tile = vp + j0 / kBc * ev_pad * kBc;
      const auto* block = reinterpret_cast<const uint16_t*>(v.row(n, hk, j0));
      if (pack_rows_avx512(block, v.s3, v.s2, Ev, std::min(kBc, S - j0), kBc, 32, tile)) continue;
      for (int64_t j = j0; j < std::min(S, j0 + kBc); ++j)
        for (int64_t d = 0; d < Ev; ++d) tile[d * kBc + j - j0] = v.row(n, hk, j)[d * v.s3].bits;
    }
  });
  const int64_t blocks = (L + kBr - 1) / kBr, e_pairs = e_pad / 2, panels = kBr / 32;

  parallel_for(N * Hq * blocks, [&](int64_t item) {
    const int64_t n = item / (Hq * blocks), h = item / blocks % Hq, hk = h / group;
    const int64_t i0 = item % blocks * kBr, br = std::min(kBr, L - i0);
    const int cols = static_cast<int>(br);
    thread_local Bits q_pairs, p_pairs;
    q_pairs.assign(static_cast<size_t>(panels * e_pairs * 64), 0);
    p_pairs.resize(static_cast<size_t>(panels * (kBc / 2) * 64));
    // The queries as K-pair panels, unscaled: the scale multiplies the scores (exactly, for a
    // power of two such as 1/√64, as it would have multiplied q).
    const auto* q_block = reinterpret_cast<const uint16_t*>(q.row(n, h, i0));
    if (!pack_pairs_avx512(q_block, q.s2, q.s3, br, E, e_pairs, 32, q_pairs.data()))
      for (int64_t i = 0; i < br; ++i) {
        const BFloat16* qr = q.row(n, h, i0 + i);
        uint16_t* panel = q_pairs.data() + i / 32 * e_pairs * 64 + i % 32 * 2;
        for (int64_t e = 0; e < E; ++e) panel[e / 2 * 64 + e % 2] = qr[e * q.s3].bits;
      }
    float* row = scratch(kRow, std::max(E, Ev));
    float* s = scratch(kScores, kBc * kBr);
    float* ot = scratch_filled(kOut, ev_pad * kBr, 0.0f);
    float* m = scratch_filled(kMax, kBr, -kInf);
    float* l = scratch_filled(kSum, kBr, 0.0f);
    float* alpha = scratch(kAlpha, kBr);
    const uint16_t* kp = keys.data() + (n * Hk + hk) * s_pad * e_pad;
    const uint16_t* vp = values.data() + (n * Hk + hk) * s_pad * ev_pad;
    amx_configure_tiles();
    const int64_t end = a.is_causal ? std::min(S, i0 + br) : S;
    for (int64_t j0 = 0; j0 < end; j0 += kBc) {
      const int64_t bc = std::min(kBc, end - j0);
      const int rows = static_cast<int>(bc);
      const TileColumns t = tile_columns(a.is_causal, i0, j0, bc, br);
      const int64_t c = t.skip;
      for (int64_t r0 = 0; r0 < bc; r0 += 32)
        for (int64_t c0 = c; c0 < br; c0 += 32)
          amx.micro_bf16({e_pairs, kp + (j0 + r0) * e_pad, q_pairs.data() + c0 / 32 * e_pairs * 64, s + r0 * kBr + c0,
                          kBr, static_cast<int>(std::min<int64_t>(32, bc - r0)),
                          static_cast<int>(std::min<int64_t>(32, br - c0)), false});
      float* const sc = s + c;
      uint16_t* const pc = p_pairs.data() + c / 32 * (kBc / 2) * 64;
      const float tile_scale = masked_scale(a.mask, scale, n, h, i0 + c, j0, rows, t.cols, sc);
      if (dropout.active()) {
        // Dropout drops float32 probabilities after the sums: the steps one by one.
        if (tile_scale != 1.0f) scale_block(sc, kBr, rows, t.cols, tile_scale);
        tiles.softmax_step(sc, kBr, rows, t.cols, t.diag, m + c, l + c, alpha + c);
        dropout.apply(sc, sc, kBr, rows, t.cols, n * Hq + h, i0 + c, j0);
        attention_pairs_avx512(sc, kBr, rows, t.cols, kBc / 2, pc);
      } else {
        fused.softmax_step_pairs(sc, kBr, rows, t.cols, t.diag, tile_scale, m + c, l + c, alpha + c, kBc / 2, pc);
      }
      tiles.rescale(ot + c, kBr, static_cast<int>(Ev), t.cols, alpha + c);
      const uint16_t* vt = vp + j0 / kBc * ev_pad * kBc;
      for (int64_t r0 = 0; r0 < Ev; r0 += 32)
        for (int64_t c0 = c; c0 < br; c0 += 32)
          amx.micro_bf16({kBc / 2, vt + r0 * kBc, p_pairs.data() + c0 / 32 * (kBc / 2) * 64, ot + r0 * kBr + c0, kBr,
                          static_cast<int>(std::min<int64_t>(32, Ev - r0)),
                          static_cast<int>(std::min<int64_t>(32, br - c0)), true});
    }
    float* lse_row = lse + (n * Hq + h) * L + i0;
    for (int64_t i = 0; i < br; ++i) {
      alpha[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      lse_row[i] = l[i] > 0.0f ? m[i] + std::log(l[i]) : kInf;
    }
    // Oᵀ's columns divided by their sums, then transposed into the output rows, rounded.
    tiles.rescale(ot, kBr, static_cast<int>(Ev), cols, alpha);
    store_transposed(ot, kBr, Ev, br, out, n, h, i0, CpuIsa::Amx, row);
  });
}

// At most this many queries per (batch, head) go down the row path: a decode step (one query per
// head; a few for a short chunk) whose padding into tiles of kBr queries would be most of the work.
constexpr int64_t kRowsMaxQueries = 4;

const AttentionRows& rows_for(CpuIsa isa) {
  if (isa >= CpuIsa::Avx512) return kAttentionRowsAvx512;
  return isa >= CpuIsa::Avx2 ? kAttentionRowsAvx2 : kAttentionRowsScalar;
}

// The decode path (attention_rows.h): per (batch, head, query) the scores of every key the query
// sees, the mask added, one softmax over them, the value rows summed with the probabilities. Keys
// and values are read where they lie (the KV cache's rows), so nothing is packed or padded. Causal
// (top-left aligned, as the tile path): query i sees keys j <= i. T is float or BFloat16.
template <class T>
void forward_rows(const AttentionForward& a) {
  const int64_t N = a.q.size(0), Hq = a.q.size(1), L = a.q.size(2), E = a.q.size(3);
  const int64_t Hk = a.k.size(1), S = a.k.size(2), Ev = a.v.size(3), group = Hq / Hk;
  const View4<const T> q(a.q), k(a.k), v(a.v);
  const View4<T> out(a.out);
  float* const lse = a.lse.data<float>();
  const AttentionRows& kernels = rows_for(cpu_isa());
  const float scale = static_cast<float>(a.scale);
  parallel_for(N * Hq * L, [&](int64_t item) {
    const int64_t n = item / (Hq * L), h = item / L % Hq, i = item % L, hk = h / group;
    const int64_t keys = a.is_causal ? std::min(S, i + 1) : S;
    float* query = scratch(kQt, E);
    float* s = scratch(kScores, std::max<int64_t>(keys, 1));
    float* o = scratch_filled(kOut, Ev, 0.0f);
    load_row(q.row(n, h, i), q.s3, E, query);
    if constexpr (std::is_same_v<T, float>)
      kernels.scores_f32(query, k.row(n, hk, 0), k.s2, keys, E, scale, s);
    else
      kernels.scores_bf16(query, reinterpret_cast<const uint16_t*>(k.row(n, hk, 0)), k.s2, keys, E, scale, s);
    if (a.mask.defined()) add_mask_any(a.mask, n, h, i, 0, static_cast<int>(keys), 1, s, 1);
    float m = 0.0f;
    const float l = kernels.exp_row(s, keys, &m);
    if constexpr (std::is_same_v<T, float>)
      kernels.accumulate_f32(s, v.row(n, hk, 0), v.s2, keys, Ev, o);
    else
      kernels.accumulate_bf16(s, reinterpret_cast<const uint16_t*>(v.row(n, hk, 0)), v.s2, keys, Ev, o);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t d = 0; d < Ev; ++d) o[d] *= inv;
    store_row(out.row(n, h, i), out.s3, Ev, o);
    lse[(n * Hq + h) * L + i] = l > 0.0f ? m + std::log(l) : kInf;
  });
}

template <class T>
void forward_typed(const AttentionForward& a) {
  const int64_t N = a.q.size(0), Hq = a.q.size(1), L = a.q.size(2), E = a.q.size(3);
  const int64_t Hk = a.k.size(1), S = a.k.size(2), Ev = a.v.size(3), group = Hq / Hk;
  const View4<const T> q(a.q), k(a.k), v(a.v);
  const View4<T> out(a.out);
  float* const lse = a.lse.data<float>();
  const CpuIsa isa = cpu_isa();
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, float>) {
    const bool rows_in_place = a.k.stride(3) == 1 && a.v.stride(3) == 1;
    if (L <= kRowsMaxQueries && a.dropout_p == 0.0 && rows_in_place) return forward_rows<T>(a);
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (isa == CpuIsa::Amx) return forward_amx(a);
  }
  const AttentionTiles& tiles = tiles_for(isa);
  const GemmKernel& gemm = gemm_for(isa);
  const float scale = static_cast<float>(a.scale);
  const Dropout dropout = dropout_of(a.dropout_p, a.dropout_key, L, S);
  const int64_t blocks = (L + kBr - 1) / kBr;
  const uint64_t call = ++forward_calls;

  parallel_for(N * Hq * blocks, [&](int64_t item) {
    const int64_t n = item / (Hq * blocks), h = item / blocks % Hq, hk = h / group;
    const int64_t i0 = item % blocks * kBr, br = std::min(kBr, L - i0);
    float* qt = scratch(kQt, E * kBr);
    float* row = scratch(kRow, std::max(E, Ev));
    float* s = scratch(kScores, kBc * kBr);
    float* ot = scratch_filled(kOut, Ev * kBr, 0.0f);
    float* m = scratch_filled(kMax, kBr, -kInf);
    float* l = scratch_filled(kSum, kBr, 0.0f);
    float* alpha = scratch(kAlpha, kBr);
    int64_t q_ld = 0;
    const float* q_rows = rows_of(q, n, h, i0, br, E, kQRows, q_ld);
    transpose_f32(q_rows, q_ld, br, E, qt, kBr, isa);
    scale_block(qt, kBr, E, br, scale);
    const int64_t keys = a.is_causal ? std::min(S, i0 + br) : S;
    int64_t k_ld = 0, v_ld = 0;
    const float* const k_head = head_rows_of(k, call, n, hk, keys, S, E, kKeys, k_ld);
    const float* const v_head = head_rows_of(v, call, n, hk, keys, S, Ev, kValues, v_ld);
    for (int64_t j0 = 0; j0 < keys; j0 += kBc) {
      const int64_t bc = std::min(kBc, keys - j0);
      const int rows = static_cast<int>(bc);
      const float* const kt = k_head + j0 * k_ld;
      const float* const vt = v_head + j0 * v_ld;
      const TileColumns t = tile_columns(a.is_causal, i0, j0, bc, br);
      const int64_t c = t.skip;
      float* const sc = s + c;
      product(gemm, bc, t.cols, E, kt, k_ld, 1, qt + c, kBr, sc, kBr, false, LeaveOut::kHiddenColumns, t.diag);
      if (a.mask.defined()) add_mask_any(a.mask, n, h, i0 + c, j0, rows, t.cols, sc, kBr);
      tiles.softmax_step(sc, kBr, rows, t.cols, t.diag, m + c, l + c, alpha + c);
      if (dropout.active()) dropout.apply(sc, sc, kBr, rows, t.cols, n * Hq + h, i0 + c, j0);
      tiles.rescale(ot + c, kBr, static_cast<int>(Ev), t.cols, alpha + c);
      product(gemm, Ev, t.cols, bc, vt, 1, v_ld, sc, kBr, ot + c, kBr, true);
    }
    float* lse_row = lse + (n * Hq + h) * L + i0;
    for (int64_t i = 0; i < br; ++i) {
      alpha[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      lse_row[i] = l[i] > 0.0f ? m[i] + std::log(l[i]) : kInf;
    }
    // Oᵀ's columns divided by their sums, then transposed into the output rows.
    tiles.rescale(ot, kBr, static_cast<int>(Ev), static_cast<int>(br), alpha);
    store_transposed(ot, kBr, Ev, br, out, n, h, i0, isa, row);
  });
}

// AMX products: c (+)= A·B over whole 32×32 C tiles of kGemmBf16Amx's microkernel, A a panel of
// plain bf16 rows (2·pairs values each, at least 32 rows readable), B K-pair panels of 32 columns
// (`pairs` each), c float32 with leading dimension ldc.
void amx_product(int64_t m, int64_t n, int64_t pairs, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc,
                 bool accumulate) {
  for (int64_t r0 = 0; r0 < m; r0 += 32)
    for (int64_t c0 = 0; c0 < n; c0 += 32)
      kGemmBf16Amx.micro_bf16({pairs, a + r0 * pairs * 2, b + c0 * pairs * 2, c + r0 * ldc + c0, ldc,
                               static_cast<int>(std::min<int64_t>(32, m - r0)),
                               static_cast<int>(std::min<int64_t>(32, n - c0)), accumulate});
}

// K-pair panels over the columns of `rows` rows at x (row i at x + i·row_stride, feature f at
// f·stride), width features: panel p holds dst[(p·pairs + q)·64 + 2j + t] = x(32p + j)[2q + t]
// (the Bᵀ of a product whose K runs over the features), zero past `rows` and `width` up to
// `pairs`, `panels`. The AVX-512 pair packer where it has the layout, else value by value.
void pairs_over_features(const BFloat16* x, int64_t row_stride, int64_t rows, int64_t width, int64_t stride,
                         int64_t pairs, int64_t panels, uint16_t* dst) {
  const int64_t written = (rows + 31) / 32;
  std::fill_n(dst + written * pairs * 64, (panels - written) * pairs * 64, uint16_t{0});
  if (pack_pairs_avx512(reinterpret_cast<const uint16_t*>(x), row_stride, stride, rows, width, pairs, 32, dst)) return;
  std::fill_n(dst, written * pairs * 64, uint16_t{0});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t f = 0; f < width; ++f)
      dst[i / 32 * pairs * 64 + f / 2 * 64 + i % 32 * 2 + f % 2] = x[i * row_stride + f * stride].bits;
}

// K-pair panels over the rows (K runs over i): dst[(p·pairs + q)·64 + 2c + t] = x(2q + t)[32p + c],
// likewise.
void pairs_over_rows(const BFloat16* x, int64_t row_stride, int64_t rows, int64_t width, int64_t stride,
                     int64_t pairs, int64_t panels, uint16_t* dst) {
  if (pack_pairs_avx512(reinterpret_cast<const uint16_t*>(x), stride, row_stride, width, rows, pairs, 32, dst)) return;
  std::fill_n(dst, panels * pairs * 64, uint16_t{0});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t f = 0; f < width; ++f)
      dst[(f / 32 * pairs + i / 2) * 64 + f % 32 * 2 + i % 2] = x[i * row_stride + f * stride].bits;
}

// rows × cols of a float32 tile (ld) as bf16 rows of `width` values, zero-padded to `padded_rows`.
void bf16_rows(const float* src, int64_t ld, int rows, int cols, int64_t width, int64_t padded_rows, uint16_t* dst) {
  std::fill_n(dst, padded_rows * width, uint16_t{0});
  for (int r = 0; r < rows; ++r) float_to_bfloat16_avx512(src + r * ld, dst + r * width, cols);
}

// The backward of bfloat16 at CpuIsa::Amx: the five products on AMX tiles, everything else as the
// float32 tiles do. Per key/value head K and V are packed once (rows, and Kᵀ per key tile); per
// query head q and dO once, in the K-pair panels both of their products need; per tile Pᵀ and dSᵀ
// are rounded to bf16 rows, dSᵀ also to K-pair panels.
void backward_amx(const AttentionBackward& a) {
  using Bits = AlignedVector<uint16_t>;
  const int64_t N = a.q.size(0), Hq = a.q.size(1), L = a.q.size(2), E = a.q.size(3);
  const int64_t Hk = a.k.size(1), S = a.k.size(2), Ev = a.v.size(3), group = Hq / Hk;
  const View4<const BFloat16> q(a.q), k(a.k), v(a.v), out(a.out), grad_out(a.grad_out);
  const View4<BFloat16> grad_q(a.grad_q), grad_k(a.grad_k), grad_v(a.grad_v);
  const float* const lse = a.lse.data<float>();
  const AttentionTilesBf16& fused = kAttentionTilesBf16Avx512Bf16;
  const float scale = static_cast<float>(a.scale);
  const Dropout dropout = dropout_of(a.dropout_p, a.dropout_key, L, S);
  const int64_t e_pad = (E + 31) / 32 * 32, ev_pad = (Ev + 31) / 32 * 32, s_pad = (S + kBc - 1) / kBc * kBc;
  const int64_t blocks = (L + kBr - 1) / kBr, l_pad = blocks * kBr;
  const int64_t e_pairs = e_pad / 2, ev_pairs = ev_pad / 2, i_pairs = kBr / 2, j_pairs = kBc / 2;

  parallel_for(N * Hk, [&](int64_t item) {
    const int64_t n = item / Hk, hk = item % Hk;
    Bits k_rows(static_cast<size_t>(s_pad * e_pad), 0), v_rows(static_cast<size_t>(s_pad * ev_pad), 0);
    Bits k_t(static_cast<size_t>(s_pad * e_pad), 0);
    for (int64_t j = 0; j < S; ++j) {
      uint16_t* k_row = k_rows.data() + j * e_pad;
      uint16_t* v_row = v_rows.data() + j * ev_pad;
      if (k.s3 == 1) std::memcpy(k_row, k.row(n, hk, j), static_cast<size_t>(E) * sizeof(uint16_t));
      else
        for (int64_t e = 0; e < E; ++e) k_row[e] = k.row(n, hk, j)[e * k.s3].bits;
      if (v.s3 == 1) std::memcpy(v_row, v.row(n, hk, j), static_cast<size_t>(Ev) * sizeof(uint16_t));
      else
        for (int64_t d = 0; d < Ev; ++d) v_row[d] = v.row(n, hk, j)[d * v.s3].bits;
    }
    // Kᵀ per key tile: E rows of kBc keys (the A of dS·K).
    for (int64_t j0 = 0; j0 < S; j0 += kBc) {
      uint16_t* tile = k_t.data() + j0 / kBc * e_pad * kBc;
      const auto* block = reinterpret_cast<const uint16_t*>(k.row(n, hk, j0));
      if (pack_rows_avx512(block, k.s3, k.s2, E, std::min(kBc, S - j0), kBc, 32, tile)) continue;
      for (int64_t j = j0; j < std::min(S, j0 + kBc); ++j)
        for (int64_t e = 0; e < E; ++e) tile[e * kBc + j - j0] = k.row(n, hk, j)[e * k.s3].bits;
    }
    Bits q_by_e(static_cast<size_t>(l_pad * e_pad)), do_by_d(static_cast<size_t>(l_pad * ev_pad));
    Bits q_by_i(static_cast<size_t>(l_pad * e_pad)), do_by_i(static_cast<size_t>(l_pad * ev_pad));
    Bits p_rows(static_cast<size_t>(kBc * kBr)), ds_rows(static_cast<size_t>(kBc * kBr));
    Bits ds_pairs(static_cast<size_t>(kBr / 32 * j_pairs * 64));
    float* dsum = scratch(kD, L);
    const int64_t l_ld = spread_ld(L);
    float* dqt = scratch(kDQt, e_pad * l_ld);
    float* dk = scratch_filled(kDK, s_pad * e_pad, 0.0f);
    float* dv = scratch_filled(kDV, s_pad * ev_pad, 0.0f);
    float* p = scratch(kScores, kBc * kBr);
    float* dp = scratch(kDScores, kBc * kBr);
    float* pd = dropout.active() ? scratch(kDropped, kBc * kBr) : nullptr;
    float* orow = scratch(kOut, 2 * Ev);
    float* row = scratch(kRow, std::max(E, Ev));
    amx_configure_tiles();
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t ib = 0; ib < blocks; ++ib) {
        const int64_t i0 = ib * kBr, br = std::min(kBr, L - i0);
        const BFloat16* q_rows = q.row(n, h, i0);
        const BFloat16* do_rows = grad_out.row(n, h, i0);
        pairs_over_features(q_rows, q.s2, br, E, q.s3, e_pairs, kBr / 32, q_by_e.data() + i0 * e_pad);
        pairs_over_features(do_rows, grad_out.s2, br, Ev, grad_out.s3, ev_pairs, kBr / 32, do_by_d.data() + i0 * ev_pad);
        pairs_over_rows(q_rows, q.s2, br, E, q.s3, i_pairs, e_pad / 32, q_by_i.data() + i0 * e_pad);
        pairs_over_rows(do_rows, grad_out.s2, br, Ev, grad_out.s3, i_pairs, ev_pad / 32, do_by_i.data() + i0 * ev_pad);
      }
      for (int64_t i = 0; i < L; ++i) {
        load_row(grad_out.row(n, h, i), grad_out.s3, Ev, orow);
        load_row(out.row(n, h, i), out.s3, Ev, orow + Ev);
        float d = 0.0f;
        for (int64_t e = 0; e < Ev; ++e) d += orow[e] * orow[Ev + e];
        dsum[i] = d;
      }
      std::fill_n(dqt, e_pad * l_ld, 0.0f);
      const float* lse_head = lse + (n * Hq + h) * L;
      for (int64_t j0 = 0; j0 < S; j0 += kBc) {
        const int64_t bc = std::min(kBc, S - j0);
        const int rows = static_cast<int>(bc);
        for (int64_t i0 = a.is_causal ? j0 / kBr * kBr : 0; i0 < L; i0 += kBr) {
          const int64_t br = std::min(kBr, L - i0);
          const int cols = static_cast<int>(br);
          // Pᵀ and dQᵀ's products skip the queries that see none of the tile's keys
          // (tile_columns); the steps run over the whole block, their probabilities 0 there, so
          // that the products whose K runs over the queries read zeros.
          const TileColumns t = tile_columns(a.is_causal, i0, j0, bc, br);
          if (t.cols <= 0) continue;
          const int64_t c = t.skip;
          amx_product(bc, br - c, e_pairs, k_rows.data() + j0 * e_pad, q_by_e.data() + (i0 + c) * e_pad, p + c, kBr,
                      false);
          const float tile_scale = masked_scale(a.mask, scale, n, h, i0, j0, rows, cols, p);
          // Pᵀ's bf16 rows come with it, unless dropout is to drop from it first.
          fused.probs_rows(p, kBr, rows, cols, diag_of(a.is_causal, i0, j0, bc), tile_scale, lse_head + i0, j_pairs,
                           dropout.active() ? nullptr : p_rows.data());
          amx_product(bc, br, ev_pairs, v_rows.data() + j0 * ev_pad, do_by_d.data() + i0 * ev_pad, dp, kBr, false);
          if (dropout.active()) {
            dropout.apply(p, pd, kBr, rows, cols, n * Hq + h, i0, j0);
            dropout.apply(dp, dp, kBr, rows, cols, n * Hq + h, i0, j0);
            bf16_rows(pd, kBr, rows, cols, kBr, kBc, p_rows.data());
          }
          amx_product(bc, Ev, i_pairs, p_rows.data(), do_by_i.data() + i0 * ev_pad, dv + j0 * ev_pad, ev_pad, true);
          fused.dscores_bf16(p, dp, kBr, rows, cols, dsum + i0, j_pairs, ds_rows.data(), ds_pairs.data());
          amx_product(bc, E, i_pairs, ds_rows.data(), q_by_i.data() + i0 * e_pad, dk + j0 * e_pad, e_pad, true);
          amx_product(E, br - c, j_pairs, k_t.data() + j0 / kBc * e_pad * kBc, ds_pairs.data() + c / 32 * j_pairs * 64,
                      dqt + i0 + c, l_ld, true);
        }
      }
      // dQᵀ scaled, then transposed into dq's rows, rounded.
      scale_block(dqt, l_ld, E, L, scale);
      store_transposed(dqt, l_ld, E, L, grad_q, n, h, 0, CpuIsa::Amx, row);
    }
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t e = 0; e < E; ++e) row[e] = dk[j * e_pad + e] * scale;
      store_row(grad_k.row(n, hk, j), grad_k.s3, E, row);
      store_row(grad_v.row(n, hk, j), grad_v.s3, Ev, dv + j * ev_pad);
    }
  });
}

template <class T>
void backward_typed(const AttentionBackward& a) {
  const int64_t N = a.q.size(0), Hq = a.q.size(1), L = a.q.size(2), E = a.q.size(3);
  const int64_t Hk = a.k.size(1), S = a.k.size(2), Ev = a.v.size(3), group = Hq / Hk;
  const View4<const T> q(a.q), k(a.k), v(a.v), out(a.out), grad_out(a.grad_out);
  const View4<T> grad_q(a.grad_q), grad_k(a.grad_k), grad_v(a.grad_v);
  const float* const lse = a.lse.data<float>();
  const CpuIsa isa = cpu_isa();
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (isa == CpuIsa::Amx) return backward_amx(a);
  }
  const AttentionTiles& tiles = tiles_for(isa);
  const AttentionRows& dots = rows_for(isa);
  const GemmKernel& gemm = gemm_for(isa);
  const float scale = static_cast<float>(a.scale);
  const Dropout dropout = dropout_of(a.dropout_p, a.dropout_key, L, S);

  parallel_for(N * Hk, [&](int64_t item) {
    const int64_t n = item / Hk, hk = item % Hk;
    const int64_t l_ld = spread_ld(L);
    float* qt = scratch(kQt, E * l_ld);
    float* dot = scratch(kDOutT, Ev * l_ld);
    float* dsum = scratch(kD, L);
    float* dqt = scratch(kDQt, E * l_ld);
    float* dk = scratch_filled(kDK, S * E, 0.0f);
    float* dv = scratch_filled(kDV, S * Ev, 0.0f);
    float* p = scratch(kScores, kBc * kBr);
    float* dp = scratch(kDScores, kBc * kBr);
    float* pd = dropout.active() ? scratch(kDropped, kBc * kBr) : nullptr;
    float* row = scratch(kRow, std::max(E, Ev));
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      // q, dO and out as float32 rows, read in place where they already are.
      int64_t q_ld = 0, do_ld = 0, o_ld = 0;
      const float* qrows = rows_of(q, n, h, 0, L, E, kQRows, q_ld);
      const float* dorows = rows_of(grad_out, n, h, 0, L, Ev, kDOut, do_ld);
      const float* orows = rows_of(out, n, h, 0, L, Ev, kOut, o_ld);
      transpose_f32(qrows, q_ld, L, E, qt, l_ld, isa);
      scale_block(qt, l_ld, E, L, scale);
      transpose_f32(dorows, do_ld, L, Ev, dot, l_ld, isa);
      // D = rowsum(dO∘O), each row a dot product as the decode path scores a key.
      for (int64_t i = 0; i < L; ++i) dots.scores_f32(dorows + i * do_ld, orows + i * o_ld, 0, 1, Ev, 1.0f, dsum + i);
      std::fill_n(dqt, E * l_ld, 0.0f);
      const float* lse_head = lse + (n * Hq + h) * L;
      for (int64_t j0 = 0; j0 < S; j0 += kBc) {
        const int64_t bc = std::min(kBc, S - j0);
        const int rows = static_cast<int>(bc);
        int64_t k_ld = 0, v_ld = 0;
        const float* kt = rows_of(k, n, hk, j0, bc, E, kKeys, k_ld);
        const float* vt = rows_of(v, n, hk, j0, bc, Ev, kValues, v_ld);
        for (int64_t i0 = a.is_causal ? j0 / kBr * kBr : 0; i0 < L; i0 += kBr) {
          const TileColumns t = tile_columns(a.is_causal, i0, j0, bc, std::min(kBr, L - i0));
          if (t.cols <= 0) continue;
          // The tile's queries from ic on (tile_columns); pc, dpc, pdc the tiles' columns there.
          const int64_t ic = i0 + t.skip;
          float* const pc = p + t.skip;
          float* const dpc = dp + t.skip;
          product(gemm, bc, t.cols, E, kt, k_ld, 1, qt + ic, l_ld, pc, kBr, false, LeaveOut::kHiddenColumns, t.diag);
          if (a.mask.defined()) add_mask_any(a.mask, n, h, ic, j0, rows, t.cols, pc, kBr);
          tiles.probs(pc, kBr, rows, t.cols, t.diag, lse_head + ic);
          product(gemm, bc, t.cols, Ev, vt, v_ld, 1, dot + ic, l_ld, dpc, kBr, false, LeaveOut::kHiddenColumns, t.diag);
          const float* kept = pc;
          if (dropout.active()) {
            float* const pdc = pd + t.skip;
            dropout.apply(pc, pdc, kBr, rows, t.cols, n * Hq + h, ic, j0);
            dropout.apply(dpc, dpc, kBr, rows, t.cols, n * Hq + h, ic, j0);
            kept = pdc;
          }
          product(gemm, bc, Ev, t.cols, kept, kBr, 1, dorows + ic * do_ld, do_ld, dv + j0 * Ev, Ev, true,
                  LeaveOut::kHiddenLeadingK, t.diag);
          tiles.dscores(pc, dpc, kBr, rows, t.cols, t.diag, dsum + ic);
          product(gemm, bc, E, t.cols, dpc, kBr, 1, qrows + ic * q_ld, q_ld, dk + j0 * E, E, true,
                  LeaveOut::kHiddenLeadingK, t.diag);
          product(gemm, E, t.cols, bc, kt, 1, k_ld, dpc, kBr, dqt + ic, l_ld, true);
        }
      }
      scale_block(dqt, l_ld, E, L, scale);
      store_transposed(dqt, l_ld, E, L, grad_q, n, h, 0, isa, row);
    }
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t e = 0; e < E; ++e) row[e] = dk[j * E + e] * scale;
      store_row(grad_k.row(n, hk, j), grad_k.s3, E, row);
      store_row(grad_v.row(n, hk, j), grad_v.s3, Ev, dv + j * Ev);
    }
  });
}

template <class Fn>
void visit_attention_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::BFloat16: return fn(BFloat16{});
    case DType::Float16: return fn(Half{});
    default: WEFT_FAIL("[scaled_dot_product_attention] internal: the fused kernel got ", dtype);
  }
}

}  // namespace

void cpu_attention_forward(const AttentionForward& a) {
  visit_attention_dtype(a.q.dtype(), [&](auto tag) { forward_typed<decltype(tag)>(a); });
}

void cpu_attention_backward(const AttentionBackward& a) {
  visit_attention_dtype(a.q.dtype(), [&](auto tag) { backward_typed<decltype(tag)>(a); });
}

const char* cpu_attention_kernel_name(DType dtype) {
  const CpuIsa isa = cpu_isa();
  return dtype == DType::BFloat16 && isa == CpuIsa::Amx ? "amx" : tiles_for(isa).name;
}

}  // namespace weft::detail
