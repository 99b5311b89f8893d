// AMX GEMM kernel set: bfloat16 inputs, float32 accumulation in tiles (ISA kernel unit: Note [ISA
// kernel units] in tensor/cpu/simd.h).
//
// tdpbf16ps C, A, B adds to each of C's 16 × 16 fp32 values the dot product of a row of A (32
// bf16 values of k) with a column of B (16 K-pairs of one column): 8192 multiply-adds in one
// instruction, sixteen times a vdpbf16ps. B tiles come from the K-pair panels every bf16 set uses
// (16 pairs × 16 columns, rows NR·4 bytes apart); A tiles need 32 consecutive values of k per row,
// so this set packs A as plain rows (Note [bf16 K-pair panels] in packing.h) and pads K to whole
// tiles of 16 pairs with zeros. Register tile 32 × 32, the eight tiles used as
//   C: 0 1     A: 4 (rows 0-15)    B: 6 (columns 0-15)
//      2 3        5 (rows 16-31)      7 (columns 16-31)
// Like vdpbf16ps, the instruction treats bf16 denormals as zero and flushes denormal results, so
// results differ from the float32 kernels in the last bits; tests compare with a tolerance.
// A bfloat16 C (GemmTileBf16::c_bf16, gemm_to_bf16) goes through a float32 copy of the 32 × 32
// block on the stack: widened into it when accumulating, stored from the tiles into it and rounded
// row by row (float_to_bf16_x32, the rounding of the conversion kernels), so a bf16-mixed product
// writes its bfloat16 result once instead of a float32 C and a conversion pass over it. A product
// computed transposed stores its tiles the same way, transposed on the way out
// (GemmTileBf16::transposed).
#include "tensor/cpu/amx_tiles.h"
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 32, kNr = 32;
constexpr int64_t kPairsPerTile = 16;

// C's 32 × 32 block from a bfloat16 C: rows × cols of it widened into a zero-padded float32 copy.
void load_c_bf16(const uint16_t* c, int64_t ldc, int rows, int cols) {
  alignas(64) float wide[kMr * kNr] = {};
  const __mmask32 mask = lane_mask32(cols);
  for (int r = 0; r < rows; ++r) {
    const __m512i bits = _mm512_maskz_loadu_epi16(mask, c + r * ldc);
    _mm512_store_ps(wide + r * kNr, bf16_to_float_x16(_mm512_castsi512_si256(bits)));
    _mm512_store_ps(wide + r * kNr + 16, bf16_to_float_x16(_mm512_extracti64x4_epi64(bits, 1)));
  }
  amx_load_c(wide, kNr * 4, kMr, kNr);
}

// The tiles' rows × cols corner rounded into a bfloat16 C.
void store_c_bf16(uint16_t* c, int64_t ldc, int rows, int cols) {
  alignas(64) float wide[kMr * kNr];
  amx_store_c(wide, kNr * 4, kMr, kNr);
  const __mmask32 mask = lane_mask32(cols);
  for (int r = 0; r < rows; ++r) {
    const __m512i bits = float_to_bf16_x32(_mm512_load_ps(wide + r * kNr), _mm512_load_ps(wide + r * kNr + 16));
    _mm512_mask_storeu_epi16(c + r * ldc, mask, bits);
  }
}

// The tiles' rows × cols corner stored transposed into `out` (GemmTileBf16::transposed): rows of
// the output are the tiles' columns. Each 16 × 16 quarter is transposed in registers, and a row of
// the output takes its two halves from the upper and lower quarters (a product computed
// transposed writes its C here directly, not through a float32 Cᵀ and a transposing pass).
void store_c_transposed(const GemmTransposedOut& out, int rows, int cols) {
  alignas(64) float wide[kMr * kNr];
  amx_store_c(wide, kNr * 4, kMr, kNr);
  for (int j0 = 0; j0 < cols; j0 += 16) {
    __m512i upper[16], lower[16];  // upper[q]: the tiles' rows 0-15 of column j0 + q; lower: 16-31
    for (int r = 0; r < 16; ++r) upper[r] = _mm512_load_si512(wide + r * kNr + j0);
    transpose16x16_epi32(upper);
    if (rows > 16) {
      for (int r = 0; r < 16; ++r) lower[r] = _mm512_load_si512(wide + (16 + r) * kNr + j0);
      transpose16x16_epi32(lower);
    } else {
      for (int r = 0; r < 16; ++r) lower[r] = _mm512_setzero_si512();
    }
    const int count = cols - j0 < 16 ? cols - j0 : 16;
    for (int q = 0; q < count; ++q) {
      const __m512 lo = _mm512_castsi512_ps(upper[q]), hi = _mm512_castsi512_ps(lower[q]);
      if (out.bf16) {
        _mm512_mask_storeu_epi16(static_cast<uint16_t*>(out.data) + (j0 + q) * out.ld, lane_mask32(rows),
                                 float_to_bf16_x32(lo, hi));
      } else {
        float* row = static_cast<float*>(out.data) + (j0 + q) * out.ld;
        _mm512_mask_storeu_ps(row, lane_mask(rows), lo);
        if (rows > 16) _mm512_mask_storeu_ps(row + 16, lane_mask(rows - 16), hi);
      }
    }
  }
}

// c(m×n) (+)= A(m × 2·kpairs) · B(2·kpairs × n), A as rows, B as a K-pair panel of 32 columns.
// A read in place must have its 32 rows and 2·kpairs values per row readable (no padding).
// The driver has configured the tiles for the block (begin_block): reading the configuration back
// per tile waits for the tile instructions in flight, ~6 % of a bf16-mixed MLP step.
void micro_bf16(const GemmTileBf16& t) {
  if (t.accumulate && t.c_bf16) {
    load_c_bf16(t.c_bf16, t.ldc, t.m, t.n);
  } else if (t.accumulate) {
    amx_load_c(t.c, t.ldc * 4, t.m, t.n);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  // A's rows packed, kpairs·2 values each, or read in place lda apart (a product computed
  // transposed: Note [Few rows times a transposed B, in AMX tiles] in gemm.cpp).
  const int64_t a_row_values = t.a_packed ? t.kpairs * 2 : t.lda;
  const int64_t a_row_bytes = a_row_values * 2;
  const uint16_t* a = t.a;
  const uint16_t* a_lower = t.a + 16 * a_row_values;  // rows 16-31
  const uint16_t* b = t.b;
  const bool two_row_tiles = t.m > 16;  // rows past m are zero padding: skip a tile of them
  for (int64_t q = 0; q < t.kpairs; q += kPairsPerTile) {
    for (int r = 0; r < t.prefetch_rows; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(t.a_prefetch + r * a_row_values + q * 2), _MM_HINT_T1);
    _tile_loadd(4, a + q * 2, a_row_bytes);
    _tile_loadd(6, b, kNr * 4);
    _tile_loadd(7, b + 32, kNr * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two_row_tiles) {
      _tile_loadd(5, a_lower + q * 2, a_row_bytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    b += kPairsPerTile * kNr * 2;
  }
  if (t.transposed.data != nullptr) store_c_transposed(t.transposed, t.m, t.n);
  else if (t.c_bf16) store_c_bf16(t.c_bf16, t.ldc, t.m, t.n);
  else amx_store_c(t.c, t.ldc * 4, t.m, t.n);
}

}  // namespace

const GemmKernel kGemmBf16Amx = {
    .name = "amx 32x32",
    .mr = kMr, .nr = kNr,
    .mc = 256, .kc = 1024, .nc = 4096,  // kc counts bf16 steps (512 pairs, 32 tiles)
    .nc_sweep = 512,                    // 1 MB of B against 512 KB of A in L2 (2 MB)
    .bf16_pairs = true,
    .micro_f32 = nullptr,
    .micro_bf16 = micro_bf16,
    .pack_b = nullptr,
    .pack_a = nullptr,
    .dot_rows = nullptr,
    .pair_block = kPairsPerTile,
    .a_rows = true,
    .begin_block = amx_configure_tiles,
    .pack_pairs = pack_pairs_avx512,
    .stores_bf16 = true,
    .pack_rows = pack_rows_avx512,
};

}  // namespace weft::detail
