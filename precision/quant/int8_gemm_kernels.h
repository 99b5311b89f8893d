// Entry points of the int8 GEMM kernel units (int8_gemm_<isa>.cpp), chosen at run time by
// int8_gemm.cpp. Plain declarations only: the units are compiled with their instruction set's
// flags (Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Note [Packed int8 operands]
// B (N, K) is packed into panels of `nr` columns with K padded to a multiple of 4 (64 for AMX,
// whose tiles take 64 values of k at once):
//   panel p, k-group g (4 values of k), column j, lane l  ->  byte ((p·groups + g)·nr + j)·4 + l
// so one vector load takes 4 consecutive k of nr/… columns (AVX2: 8 columns per ymm, AVX-512: 16
// per zmm), and an AMX tile is 16 consecutive groups of 16 columns, rows nr·4 bytes apart. A (M, K) is packed row-major with K padded the same way and M padded to a multiple of
// the kernel's `mr`; for the VNNI kernel its bytes are stored as a + 128 (unsigned), and
// `compensation[n] = 128 · Σk B[n, k]` is subtracted from each column (cpu-kernels.md §4).
// Padding is zero, so it adds nothing. Both live in cache-line aligned storage
// (tensor/cpu/aligned_vector.h): a tile row or zmm load that spans two lines halves the AMX
// kernel's rate.
#pragma once

#include <cstdint>

namespace weft::precision::quant::kernels {

struct Int8PanelArgs {
  const uint8_t* a;             // packed A, first row of the rows to compute
  int64_t a_stride;             // bytes from one row to the next (padded K), or for AMX from one
                                // group of 32 rows to the next
  const int8_t* b;              // a packed B panel (AMX: the first of consecutive panels)
  const int32_t* compensation;  // the panel's nr entries (VNNI only; null otherwise)
  int64_t groups;               // padded K / 4
  int64_t rows;                 // rows of A to compute: a multiple of the kernel's mr
  int32_t* c;                   // C at the tile's first row and the panel's first column
  int64_t c_stride;             // elements per row of C
  int64_t c_rows;               // rows of C to store (<= rows; the rest are padding)
  int64_t cols;                 // columns of C to store (<= nr; AMX: across consecutive panels)
};

// Each computes C[rows, cols] = A · Bᵀ for one panel. mr / nr: AVX2 4 / 16, AVX-512 8 / 32, AMX 32 / 32.
void int8_gemm_panel_avx2(const Int8PanelArgs& args);
void int8_gemm_panel_avx512(const Int8PanelArgs& args);
void int8_gemm_panel_avx512vnni(const Int8PanelArgs& args);
void int8_gemm_panel_amx(const Int8PanelArgs& args);

// The product at a few rows of A, B row-major and read in place (no packing): c[i·ldc + j] =
// Σ a[i·k + t] · b[j·k + t] for i < M, j < n, B read once for all M rows; rows[M - 1] takes M
// (1 to 4) rows of A. Each returns true when B holds -128, whose products it does not compute
// exactly; A must not hold it. One table per level (int8_gemv_avx2.cpp, int8_gemv_avx512.cpp,
// int8_gemv_avx512vnni.cpp); int8_gemm.cpp splits A into groups of 4 rows and B over threads.
using Int8GemvRows = bool (*)(const int8_t* a, const int8_t* b, int64_t n, int64_t k, int32_t* c, int64_t ldc);
// They fetch B's rows kGemvAheadBytes ahead (tensor/cpu/gemv_kernels.h), as the 16-bit rows'
// kernels do.
struct Int8Gemv {
  Int8GemvRows rows[4];
};
extern const Int8Gemv kInt8GemvAvx2;
extern const Int8Gemv kInt8GemvAvx512;
extern const Int8Gemv kInt8GemvAvx512Vnni;

// Packs one 32-column panel of B: rows src[0 .. cols) of b (k bytes each, cols <= 32) into dst,
// whose padding is already zero. The AVX-512 levels' packer; int8_gemm.cpp has the portable one.
void int8_pack_b_panel_avx512(const int8_t* src, int64_t k, int64_t cols, int8_t* dst);

// Whether rows src[0 .. rows) of b (k bytes each) hold -128; when `compensation` is not null it
// also writes compensation[j] = 128 · Σ_l src[j·k + l], wrapped to int32 (the VNNI kernel's
// compensation). The AVX-512 levels' scan; pack_panels in int8_gemm.cpp has the portable one.
bool int8_scan_b_rows_avx512(const int8_t* src, int64_t k, int64_t rows, int32_t* compensation);

// One row of A (k bytes) into its packed row of kp bytes (kp ≥ k), as a + 128 when `to_unsigned`
// (the VNNI kernel's A), the padding zero (128 when shifted); returns whether the row holds -128.
// The AVX-512 levels' packer of row-major A; pack_a_group in int8_gemm.cpp has the portable one.
bool int8_pack_a_row_avx512(const int8_t* src, int64_t k, int64_t kp, bool to_unsigned, uint8_t* dst);

}  // namespace weft::precision::quant::kernels
