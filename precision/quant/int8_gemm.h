// int8 × int8 -> int32 matrix products, exact: C = A·Bᵀ, the core of LLM.int8().
//
//   a: (M, K) int8 · b: (N, K) int8, both row-major -> c: (M, N) int32
//
// Operands must lie in [-127, 127], the range vector-wise quantization produces (the vpmaddubsw
// kernels rely on it: cpu-kernels.md §4); -128 is refused, on every instruction set, so a result
// never depends on the CPU. K is limited so that no exact result can overflow int32.
//
// The kernel is chosen from cpu_isa() (tensor/cpu/isa.h): AMX tdpbssd tiles on CPUs with AMX,
// VNNI vpdpbusd on AVX-512 VNNI CPUs, vpmaddubsw on AVX-512BW and on AVX2, and the scalar
// reference below them; all give identical results. B is packed into the chosen kernel's panel
// layout (Note [Packed int8 operands] in int8_gemm_kernels.h); a layer whose weights do not change
// packs them once (PackedInt8Matrix). The product runs on weft's threads, split over blocks of
// rows and panels of columns. The packed copy of A lives in a buffer each thread that packs one
// keeps (it grows to the largest A the thread has packed), and so does B's when it is packed for
// one product (int8_gemm with an unpacked b, where each thread may pack its own copy of a small
// A: Note [Each thread its own copy of A] in int8_gemm.cpp). An unpacked b multiplied at a few rows
// (up to 4: decoding) from AVX2 up is read in place, not packed (Note [A few rows: B in place]).
#pragma once

#include <cstdint>

#include "tensor/cpu/aligned_vector.h"
#include "tensor/cpu/isa.h"

namespace weft::precision::quant {

// 127² · K must fit in int32.
inline constexpr int64_t kInt8GemmMaxK = 2147483647 / (127 * 127);

// B packed for one instruction-set level's kernel.
class PackedInt8Matrix {
 public:
  PackedInt8Matrix() = default;
  int64_t rows() const { return n_; }  // N
  int64_t cols() const { return k_; }  // K
  CpuIsa isa() const { return isa_; }
  bool empty() const { return n_ == 0 && k_ == 0; }

 private:
  friend void repack_int8_matrix(PackedInt8Matrix& packed, const int8_t* b, int64_t n, int64_t k, CpuIsa isa);
  friend void int8_gemm(const int8_t* a, int64_t m, const PackedInt8Matrix& b, int32_t* c);
  friend void int8_gemm(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k);
  // Takes the shape of a packing of b: (n, k) into `bytes` of panels (and, for VNNI,
  // `compensation_values` zeroed entries), reusing the storage when it is large enough.
  void prepare(int64_t n, int64_t k, CpuIsa isa, int64_t bytes, int64_t compensation_values) {
    n_ = n;
    k_ = k;
    isa_ = isa;
    if (data_.size() < static_cast<size_t>(bytes)) data_.resize(static_cast<size_t>(bytes));
    compensation_.assign(static_cast<size_t>(compensation_values), 0);
  }
  int64_t n_ = 0, k_ = 0;
  CpuIsa isa_ = CpuIsa::Scalar;
  detail::AlignedVector<int8_t> data_;          // panels (or B itself for the scalar reference), maybe more
  detail::AlignedVector<int32_t> compensation_;  // 128 · Σk B[n, k] per padded column (VNNI only)
};

// Packs b: (n, k) for `isa`'s kernel (which must be supported). Throws weft::Error on -128, on
// k > kInt8GemmMaxK, or on negative sizes (repack_int8_matrix then leaves `packed` empty).
PackedInt8Matrix pack_int8_matrix(const int8_t* b, int64_t n, int64_t k, CpuIsa isa = cpu_isa());
// The same into `packed`, whose storage is reused when large enough.
void repack_int8_matrix(PackedInt8Matrix& packed, const int8_t* b, int64_t n, int64_t k, CpuIsa isa = cpu_isa());

// c = a · bᵀ with b's packing's kernel; a: (m, b.cols()), c: (m, b.rows()). Throws weft::Error on
// -128 in a (or b), found while packing: c may then have been partly written.
void int8_gemm(const int8_t* a, int64_t m, const PackedInt8Matrix& b, int32_t* c);
// The same, packing b for cpu_isa() first.
void int8_gemm(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k);

// The scalar reference every kernel is tested against (no range checks of its own).
void int8_gemm_reference(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k);

}  // namespace weft::precision::quant
