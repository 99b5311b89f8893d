// Portable packing of GEMM operands into the panels the microkernels read (gemm_kernels.h).
//
// A block of A (mc×kc) becomes ceil(mc/MR) panels, each kc steps of MR values (rows past mc
// are zero); a block of B (kc×nc) becomes ceil(nc/NR) panels, each kc steps of NR values
// (columns past nc are zero). So the microkernel always reads whole panels, and the zero rows
// and columns only produce values that are never stored. bfloat16 sources are widened to float32
// here, exactly (a bfloat16 is the top half of a float32).
//
// Note [bf16 K-pair panels]
// The AVX-512 BF16 kernel multiplies pairs of bfloat16 along K (vdpbf16ps: fp32 lane j gains
// a[2q]·b[2q] + a[2q+1]·b[2q+1]), so its panels keep bf16 and interleave K in pairs:
//   A: a[(q·MR + i)·2 + t] = A(i, 2q+t)     B: b[(q·NR + j)·2 + t] = B(2q+t, j)
// for q < ceil(kc/2); an odd kc is padded with a zero step. One 32-bit broadcast of A and one
// zmm load of B (16 columns × 2 steps) then feed one instruction. The AMX kernel (tiles of 16
// pairs) pads the pairs to a multiple of 16 with zeros, and takes A as plain rows instead:
//   A: a[(i·pairs·2) + p] = A(i, p) (row i of the block; a panel is mr such rows)
// because its A tile is 16 rows of 32 consecutive values of k.
#pragma once

#include <cstdint>

#include "tensor/cpu/gemm/gemm.h"

namespace weft::detail {

void pack_a_f32(const GemmMatrix& a, int64_t mc, int64_t kc, int mr, float* dst);
void pack_b_f32(const GemmMatrix& b, int64_t kc, int64_t nc, int nr, float* dst);
// `pairs` is the packed length in K-pairs: at least ceil(kc/2), the rest zero.
void pack_a_bf16_pairs(const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, int mr, uint16_t* dst);
void pack_b_bf16_pairs(const GemmMatrix& b, int64_t kc, int64_t nc, int64_t pairs, int nr, uint16_t* dst);
void pack_a_bf16_rows(const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, int mr, uint16_t* dst);

// dst(j, i) = src(i, j) for i < rows, j < cols; each side float32, or bfloat16 bits when its flag
// is set (widened exactly, rounded to nearest even), with leading dimensions ld_src and ld_dst.
// The reference of transpose_copy_avx512 (gemm_kernels.h), by 16 × 16 blocks so both sides stay
// in L1.
void transpose_copy(const void* src, bool src_bf16, int64_t ld_src, int64_t rows, int64_t cols, void* dst,
                    bool dst_bf16, int64_t ld_dst);

// x(rows×cols) of bfloat16 bits widened into float32: row-major, dst[i·cols + j], or, when
// column_major, dst[j·rows + i] (for an x read down its columns, so the copy keeps its layout).
void widen_bf16(const GemmMatrix& x, int64_t rows, int64_t cols, bool column_major, float* dst);

}  // namespace weft::detail
