// int8 GEMM panel kernel for AMX: tdpbssd on tiles, signed bytes times signed bytes.
//
// An AMX tile register holds up to 16 rows of 64 bytes. tdpbssd C, A, B takes A as 16 rows × 64
// int8 (16 rows of A, 64 values of k), B as 16 rows × 16 columns × 4 int8 (16 k-groups of 4,
// the layout of Note [Packed int8 operands], so a B tile is 16 consecutive groups of one panel's
// first or second 16 columns, rows 128 bytes apart), and adds the 16 × 16 int32 dot products into
// C: 16·16·64 multiply-adds in one instruction. Both operands are signed, so A needs neither the
// +128 shift nor the compensation of the VNNI kernel.
//
// Register tile: 32 rows × 32 columns, the eight tiles used as
//   C: 0 1     A: 4 (rows 0-15)    B: 6 (columns 0-15)
//      2 3        5 (rows 16-31)      7 (columns 16-31)
// so each loaded A and B tile serves two products. K is padded to a multiple of 64 (zero bytes),
// and A comes packed as tiles (Note [Packed int8 operands]): both operands stream front to back.
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/amx_tiles.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

using weft::detail::amx_configure_tiles;
using weft::detail::amx_release_tiles;
using weft::detail::amx_store_c;

constexpr int64_t kMr = 32;
constexpr int64_t kNr = 32;
constexpr int64_t kGroupsPerTile = 16;         // k-groups of 4 in one tile: 64 values of k
constexpr int64_t kBRowBytes = kNr * 4;        // one k-group of a packed panel
constexpr int kTileBytesPerRow = 64;
constexpr int64_t kATileBytes = 16 * kTileBytesPerRow;

// A: (32, 64·chunks) tiled rows · one B panel: (32, 64·chunks)ᵀ -> C: (32, 32) at c
void tile(const uint8_t* a, const int8_t* b, int64_t groups, int32_t* c, int64_t c_stride, int64_t rows, int64_t cols) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const bool two_row_tiles = rows > 16;  // rows past `rows` are zero padding: skip a tile of them
  for (int64_t g = 0; g < groups; g += kGroupsPerTile, a += 2 * kATileBytes, b += kGroupsPerTile * kBRowBytes) {
    // The next step's two B tiles (2 KB, from L2): tile loads do not wake the prefetchers the way
    // vector loads do (10 % on 128 × 512 × 784).
    for (int line = 0; line < 32; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(b + kGroupsPerTile * kBRowBytes) + 64 * line, _MM_HINT_T0);
    _tile_loadd(4, a, kTileBytesPerRow);
    _tile_loadd(6, b, kBRowBytes);
    _tile_loadd(7, b + 64, kBRowBytes);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    if (two_row_tiles) {
      _tile_loadd(5, a + kATileBytes, kTileBytesPerRow);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  amx_store_c(c, c_stride * 4, rows, cols);
}

}  // namespace

// Rows of 32 outside, panels inside: a strip of C is finished across all the call's panels
// before the next, so its stores touch 32 rows of pages, not every row of the block in turn (the
// page walks of a tall column of C cost more than its arithmetic).
void int8_gemm_panel_amx(const Int8PanelArgs& args) {
  amx_configure_tiles();
  const int64_t panel_bytes = args.groups * kBRowBytes;
  for (int64_t row0 = 0; row0 < args.c_rows; row0 += kMr) {
    const int64_t rows = args.c_rows - row0 < kMr ? args.c_rows - row0 : kMr;
    const uint8_t* a = args.a + row0 / kMr * args.a_stride;
    for (int64_t col0 = 0; col0 < args.cols; col0 += kNr) {
      const int64_t cols = args.cols - col0 < kNr ? args.cols - col0 : kNr;
      tile(a, args.b + col0 / kNr * panel_bytes, args.groups, args.c + row0 * args.c_stride + col0, args.c_stride, rows,
           cols);
    }
  }
  amx_release_tiles();
}

}  // namespace weft::precision::quant::kernels
