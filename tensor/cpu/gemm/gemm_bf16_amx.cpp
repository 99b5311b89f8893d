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
#include "tensor/cpu/amx_tiles.h"
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 32, kNr = 32;
constexpr int64_t kPairsPerTile = 16;

// c(m×n) (+)= A(m × 2·kpairs) · B(2·kpairs × n), A as rows, B as a K-pair panel of 32 columns.
// The driver has configured the tiles for the block (begin_block): reading the configuration back
// per tile waits for the tile instructions in flight, ~6 % of a bf16-mixed MLP step.
void micro_bf16(const GemmTileBf16& t) {
  if (t.accumulate) {
    amx_load_c(t.c, t.ldc * 4, t.m, t.n);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t a_row_bytes = t.kpairs * 4;
  const uint16_t* a = t.a;
  const uint16_t* a_lower = t.a + 16 * t.kpairs * 2;  // rows 16-31
  const uint16_t* b = t.b;
  const bool two_row_tiles = t.m > 16;  // rows past m are zero padding: skip a tile of them
  for (int64_t q = 0; q < t.kpairs; q += kPairsPerTile) {
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
  amx_store_c(t.c, t.ldc * 4, t.m, t.n);
}

}  // namespace

const GemmKernel kGemmBf16Amx = {
    .name = "amx 32x32",
    .mr = kMr, .nr = kNr,
    .mc = 256, .kc = 512, .nc = 4096,  // kc counts bf16 steps (256 pairs, 16 tiles)
    .nc_sweep = 512,                    // 512 KB of B against 256 KB of A in L2
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
};

}  // namespace weft::detail
