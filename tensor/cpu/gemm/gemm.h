// weft's own matrix product for float32, for bfloat16 inputs accumulated in float32, and for
// float64.
//
// A BLIS-style GEMM: five loops around a register-blocked microkernel, with A and B packed into
// contiguous panels, the kernel chosen at run time from the active instruction-set level
// (tensor/cpu/isa.h; the kernel sets are listed in gemm_kernels.h). Packing reads its operand
// through (row stride, column stride), so transposed views, padded rows and rows repeated by
// expand (stride 0) cost nothing extra. Large products are split over the thread pool: one
// taller than wide into row blocks that all threads compute against each block of B they packed
// together (Note [Threads sharing one packed B] in gemm.cpp), one square or wider than tall into
// column blocks, each with its own packed B and no barrier; small ones (under ~4 MFLOP, e.g. the MLP's 10-wide last layer)
// run on the calling thread without packing A.
//
// c: (M, N) row-major, leading dimension ldc; c = a·b, or c += a·b when accumulating (how
// linear adds its bias: the bias is written into c first).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/cpu/aligned_vector.h"
#include "tensor/cpu/isa.h"

namespace weft::detail {

// A strided (rows, cols) matrix of float32 or bfloat16 (bits): element (i, j) at data[i·rs + j·cs].
struct GemmMatrix {
  const void* data;
  int64_t rs, cs;
  bool bf16;

  // The sub-matrix starting at (i, j).
  GemmMatrix at(int64_t i, int64_t j) const {
    const int64_t offset = i * rs + j * cs;
    return {static_cast<const char*>(data) + offset * (bf16 ? 2 : 4), rs, cs, bf16};
  }
};

// c(m×n) (+)= a(m×k) · b(k×n), plus bias[j] in column j of every row where a bias is given
// (linear's; only for a product that does not accumulate); a and b are both float32 or both
// bfloat16.
void gemm(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, float* c, int64_t ldc,
          bool accumulate, const float* bias = nullptr);

// One row of `row_bytes` bytes copied into each of `rows` rows, row i at c + i·ld_bytes, over the
// threads when there are many bytes: linear's bias broadcast over its output, which the product
// then adds to (gemm's paths whose tiles do not take the bias, and linear in other dtypes).
void bias_into_rows(int64_t rows, const void* bias, size_t row_bytes, void* c, int64_t ld_bytes);

// Whether gemm_to_bf16 takes an (m×k)·(k×n) product of bfloat16 operands at the active level: a
// kernel set that stores bfloat16 (AVX-512 BF16, AMX), and K in one chunk, so C is rounded once, from
// the float32 sums, as gemm() and a conversion would round it.
bool gemm_stores_bf16(int64_t m, int64_t n, int64_t k);
// The same for the product of these operands: also any K where the product is computed transposed
// in tiles (x·Wᵀ at a prompt's batch, AMX), whose tiles round C as they store it, after the last
// K chunk.
bool gemm_stores_bf16(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b);

// c(m×n) (+)= a(m×k) · b(k×n), a, b and c bfloat16: the bits of gemm() into float32 (C widened
// first, when accumulating) followed by a float32 -> bfloat16 conversion, without the float32 C.
// Only for products gemm_stores_bf16 accepts.
void gemm_to_bf16(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, uint16_t* c,
                  int64_t ldc, bool accumulate);

// Whether the tiles of a float32 product split along N, A read in place (a prompt's rows times a
// weight), read this B's rows in place instead of packing its blocks (Note [B's rows read in
// place] in gemm.cpp): rows contiguous, each starting on a cache line, not a multiple of 2 KiB apart.
bool gemm_reads_b_rows_in_place(const GemmMatrix& b);

// A, B or Bᵀ given by what makes it, block by block, instead of as memory (a 4-bit weight
// dequantized block by block: it never exists whole in float32). fill(context, r0, rows, p0, kc,
// out) writes the matrix's (r0 + r, p0 + p) to out[r·kc + p] for r < rows, p < kc: runs of its
// rows, as float32, or as bfloat16 bits when `bf16` (then the product is one of bfloat16
// operands, the other operand bfloat16 too). It is called from the pool's threads. As A: for at
// most a cache block (mc × kc) at a time, each block once per block of B's columns (nc: 4096 and
// more columns, once). As B or Bᵀ: each value once per product, NR rows of Bᵀ or a K block of B's
// rows at a time.
struct GemmBlockSource {
  void (*fill)(const void* context, int64_t r0, int64_t rows, int64_t p0, int64_t kc, void* out);
  const void* context;
  int64_t k_align = 1;  // as A or Bᵀ, K chunks (p0) start at multiples of this: runs the source makes fastest
  bool bf16 = false;    // out holds bfloat16 bits (uint16_t), not float32
};

// c(m×n) (+)= A(m×k) · b(k×n) with A from `a` and b of the source's dtype, by the blocked path
// whatever the size.
void gemm(int64_t m, int64_t n, int64_t k, const GemmBlockSource& a, const GemmMatrix& b, float* c, int64_t ldc,
          bool accumulate);

// c(m×n) (+)= a(m×k) · B(k×n) with a of the source's dtype and B from `b`, which makes Bᵀ's rows
// (n×k: x·Wᵀ with W made block by block) when b_source_transposed, else B's (k×n: g·W), by the
// blocked path whatever the size.
void gemm(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmBlockSource& b, bool b_source_transposed,
          float* c, int64_t ldc, bool accumulate);

// A whole bfloat16 B (k×n) packed once, ahead of the products that use it, in the K-pair panels
// the active level's bf16 kernel set reads (Note [bf16 K-pair panels] in packing.h): K chunk by K
// chunk (the chunks gemm() cuts K into), each chunk all of B's columns, panel by panel of NR. A
// product against it packs no B: every block the loops visit is already in place (a weight packed
// once for inference, tensor/cpu/packed_weights.h). The same panels as a per-call packing, so
// the product's bits are those of gemm() on the unpacked B.
struct GemmPackedB {
  const void* kernel;  // the GemmKernel it was packed for: products check that they use it
  int64_t k, n;
  int64_t kc_step;                    // K chunk length (the last may be shorter)
  std::vector<int64_t> chunk_offset;  // first element of each K chunk in data
  AlignedVector<uint16_t> data;

  size_t bytes() const { return data.size() * sizeof(uint16_t); }
};

// Whether B of a product of bfloat16 operands with k×n B can be packed ahead at the active level:
// a kernel set of K-pair panels (AVX-512 BF16, AMX), and K of at least one pair block (shorter
// products take the float32 paths: Note [Small bfloat16 products]).
bool gemm_packs_b_ahead(int64_t k, int64_t n);

// b (k×n, bfloat16) packed for the active level; only where gemm_packs_b_ahead.
GemmPackedB gemm_pack_b(int64_t k, int64_t n, const GemmMatrix& b);

// c(m×n) (+)= a(m×k) · B with B packed ahead (packed.k == k, packed.n == n, packed for the active
// level); a bfloat16. With c_bf16 (where gemm_stores_bf16) C is rounded to bfloat16 there and c is
// unused, as gemm_to_bf16.
void gemm_packed(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmPackedB& b, float* c, int64_t ldc,
                 bool accumulate, uint16_t* c_bf16 = nullptr);

// The kernel set gemm() uses for float32 (bf16 = false) or bfloat16 inputs at level `isa`.
const char* gemm_kernel_name(CpuIsa isa, bool bf16);

// A strided (rows, cols) float64 matrix: element (i, j) at data[i·rs + j·cs].
struct GemmMatrixF64 {
  const double* data;
  int64_t rs, cs;
};

// c(m×n) (+)= a(m×k) · b(k×n) in float64, both operands packed whatever the shape (gemm_f64.cpp).
void gemm_f64(int64_t m, int64_t n, int64_t k, const GemmMatrixF64& a, const GemmMatrixF64& b, double* c, int64_t ldc,
              bool accumulate);

// The kernel set gemm_f64() uses at level `isa`.
const char* gemm_f64_kernel_name(CpuIsa isa);

}  // namespace weft::detail
