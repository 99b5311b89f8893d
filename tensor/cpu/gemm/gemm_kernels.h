// The contract between weft's GEMM driver (gemm.cpp) and its per-instruction-set kernels.
//
// A kernel set is a register tile MR×NR, cache blocks for it, a microkernel that computes one C
// tile, and optionally fast packers for B and A. The driver (the five BLIS loops) cuts C into tiles
// and the shared dimension K into chunks of at most KC, packs panels of A and B (packing.cpp), and
// calls the microkernel once per tile and chunk. A product of one row times a transposed B (a
// matrix-vector product W·x) runs as dot products of W's rows instead, when the set has them. The
// sets:
//
//   scalar       4×8    portable C++, the reference the others are tested against (gemm_scalar.cpp)
//   avx2         6×16   12 ymm accumulators, FMA (gemm_f32_avx2.cpp)
//   avx512       6×64   24 zmm accumulators; 12×32 for C at most 32 columns wide (gemm_f32_avx512.cpp)
//   avx512_bf16  12×32  bf16 K-pairs, vdpbf16ps into fp32 (gemm_bf16_avx512bf16.cpp)
//   amx          32×32  bf16 tiles, tdpbf16ps into fp32 (gemm_bf16_amx.cpp)
//
// float64 has sets of its own (GemmKernelF64, driven by gemm_f64.cpp), with both operands packed:
//
//   scalar       4×8    portable C++, the reference (gemm_scalar.cpp)
//   avx2         6×8    12 ymm accumulators of four doubles (gemm_f64_avx2.cpp)
//   avx512       6×32   24 zmm accumulators of eight doubles (gemm_f64_avx512.cpp)
//
// Plain declarations only: this header is included by ISA kernel units (Note [ISA kernel units]
// in tensor/cpu/simd.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

// Cache lines as runs: `count` lines from the `line`-th of the run at `run`, run_lines to a run,
// runs `stride` bytes apart.
struct GemmLineRuns {
  const char* run = nullptr;  // the run of the first line
  int64_t stride = 0;         // bytes from run to run
  int run_lines = 0;          // lines per run
  int line = 0;               // the first line's place in its run
  int count = 0;              // lines to fetch
};

// Fetches a tile's GemmLineRuns into L2 spread over its kc K steps, one line every few steps
// (Note [The next block of B, fetched] in gemm.cpp): step() before each step. A counter beside
// the product's loop, so every step's FMAs run whatever the count.
class GemmLineFetcher {
 public:
  GemmLineFetcher(const GemmLineRuns& runs, int64_t kc)
      : run_(runs.run), stride_(runs.stride), run_lines_(runs.run_lines), line_(runs.line), left_(runs.count),
        every_(left_ <= 0 ? 0 : kc >= left_ ? kc / left_ : 1), countdown_(every_) {}

  void step() {
    if (left_ <= 0 || --countdown_ != 0) return;
    countdown_ = every_;
    __builtin_prefetch(run_ + 64 * line_, 0, 2);  // prefetcht1: into L2
    --left_;
    if (++line_ == run_lines_) {
      line_ = 0;
      run_ += stride_;
    }
  }

 private:
  const char* run_;
  int64_t stride_;
  int run_lines_, line_, left_;
  int64_t every_, countdown_;
};

// One C tile: c(m×n) = Σ_{p<kc} A(i,p)·B(p,j), added to c when `accumulate`, with m ≤ MR, n ≤ NR.
//   A: a packed panel, a[p·MR + i], when a_packed; else A(i,p) = a[i·rs_a + p·cs_a].
//   B: B(p,j) = b[p·ldb + j]; when b_padded each row has NR readable values (a packed panel,
//      zero beyond n), else only n.
//   C: row-major with leading dimension ldc.
// The tile may also ask for `fetch` lines into L2 while it runs, spread over its K steps (a block
// of B a later pack reads: Note [The next block of B, fetched] in gemm.cpp); it changes no result.
struct GemmTileF32 {
  int64_t kc;
  const float* a;
  int64_t rs_a, cs_a;
  bool a_packed;
  const float* b;
  int64_t ldb;
  bool b_padded;
  float* c;
  int64_t ldc;
  int m, n;
  bool accumulate;
  GemmLineRuns fetch = {};
};
using GemmMicroF32 = void (*)(const GemmTileF32& tile);

// One C tile from bf16 panels packed in K-pairs (Note [bf16 K-pair panels] in packing.h):
// A: a[(q·MR + i)·2 + t] = A(i, 2q+t), B: b[(q·NR + j)·2 + t] = B(2q+t, j), for q < kpairs; or,
// unless a_packed (kernel sets with a_rows_in_place), A's rows in place: a[i·lda + 2q + t].
// C is float32 at c, or, when c_bf16 is set (kernel sets with stores_bf16), bfloat16 at c_bf16:
// the float32 sums (plus C widened, when accumulating) rounded as the copy kernels round.
// prefetch_rows rows at a_prefetch (lda apart, A in place) are fetched into L2 over the K steps,
// for a later tile to find there (kernel sets with a_rows may honor it; it changes no result).
// With `transposed` set (kernel sets with a_rows), the tile's sums go there transposed instead of
// into C: element (i, j) to row j, column i of it, float32 or rounded to bfloat16 as c_bf16 is; C
// (c, ldc) is then only read, when accumulating.
struct GemmTransposedOut {
  void* data = nullptr;
  int64_t ld = 0;
  bool bf16 = false;
};
struct GemmTileBf16 {
  int64_t kpairs;
  const uint16_t* a;
  const uint16_t* b;
  float* c;
  int64_t ldc;
  int m, n;
  bool accumulate;
  uint16_t* c_bf16 = nullptr;
  int64_t lda = 0;  // may be 0: rows repeated by expand
  bool a_packed = true;
  const uint16_t* a_prefetch = nullptr;
  int prefetch_rows = 0;
  GemmTransposedOut transposed = {};
};
using GemmMicroBf16 = void (*)(const GemmTileBf16& tile);

// Packs B(p, j), p < kc, j < nc, into ceil(nc/NR) panels of kc×NR floats (zero-padded columns),
// where B(p, j) = src[p·rs + j·cs] is float32, or bfloat16 bits when `bf16`. Returns false for
// layouts it has no fast path for (the driver then uses the portable packer).
using GemmPackB = bool (*)(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst);

// Packs A(i, p), i < mc, p < kc, into ceil(mc/MR) panels of kc×MR floats (zero-padded rows), where
// A(i, p) = src[i·rs + p·cs] as for GemmPackB. Returns false for layouts it has no fast path for.
using GemmPackA = bool (*)(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst);

// Packs A(i, p), i < mc, p < kc, bfloat16 bits at src[i·rs + p·cs], as plain rows (Note [bf16
// K-pair panels] in packing.h): dst[i·width + p], zero for kc ≤ p < width and for the rows past mc
// up to a whole panel of mr. Returns false for layouts it has no fast path for.
using GemmPackRows = bool (*)(const uint16_t* src, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t width,
                              int mr, uint16_t* dst);

// Packs M(l, s), l < lanes, s < steps, bfloat16 bits at src[l·lane_stride + s·step_stride], into
// ceil(lanes/width) panels of `pairs` K-pairs × width lanes (Note [bf16 K-pair panels] in
// packing.h: pair q of lane l is M(l, 2q), M(l, 2q+1)), zero past `lanes` and `steps`. A packs with
// its rows as lanes, B with its columns. Returns false for layouts it has no fast path for.
using GemmPackPairs = bool (*)(const uint16_t* src, int64_t lane_stride, int64_t step_stride, int64_t lanes,
                               int64_t steps, int64_t pairs, int width, uint16_t* dst);

// y[j] (+)= Σ_{p<k} w[j·ldw + p]·x[p] for j < rows: W·x with W's rows and x contiguous. Each row
// streams from memory once, at full vector width (a tile would broadcast W one value at a time).
using GemmDotRows = void (*)(const float* w, int64_t ldw, const float* x, int64_t k, int64_t rows, float* y,
                             bool accumulate);

struct GemmKernel {
  const char* name;
  int mr, nr;      // register tile
  int mc, kc, nc;  // cache blocks: an mc×kc block of A in L2, a kc×nr panel of B in or through L1, kc×nc in L3
  int nc_sweep = 0;  // a_rows sets: columns of the packed B block one row strip of A sweeps (in L2)
  int n_split = 0;   // C's column blocks per thread start at multiples of this (0: nr), where a tile
                     // narrower than nr by whole vectors does only its own FMAs
  bool bf16_pairs;            // packs bf16 in K-pairs and runs micro_bf16 (else fp32 panels, micro_f32)
  GemmMicroF32 micro_f32;
  GemmMicroBf16 micro_bf16;
  GemmPackB pack_b;           // nullptr: the portable packer only
  GemmPackA pack_a;           // nullptr: the portable packer only
  GemmDotRows dot_rows;       // nullptr: W·x through the tiles
  int pair_block = 1;         // packed K-pairs are padded to a multiple of this (zeros)
  bool a_rows = false;        // bf16 A is packed as plain rows, not K-pairs
  void (*begin_block)() = nullptr;  // run on the thread before a block's tiles (AMX: its tile config)
  GemmPackPairs pack_pairs = nullptr;  // bf16 K-pair panels; nullptr: the portable packer only
  bool stores_bf16 = false;   // micro_bf16 writes a bfloat16 C (GemmTileBf16::c_bf16)
  bool a_rows_in_place = false;  // micro_bf16 reads A's rows in place (GemmTileBf16::lda)
  GemmPackRows pack_rows = nullptr;  // a_rows sets: bf16 A as plain rows; nullptr: the portable packer only
  bool a_columns_in_place = false;   // micro_f32 reads a float32 A stored by columns (rs_a 1) in place
                                     // (Note [A's columns read in place] in gemm.cpp)
};

// The AVX-512 packer of bf16 K-pair panels (gemm_bf16_avx512bf16.cpp), shared by the sets that
// pack pairs: every CPU with AVX-512 BF16 or AMX has the AVX-512BW it needs.
bool pack_pairs_avx512(const uint16_t* src, int64_t lane_stride, int64_t step_stride, int64_t lanes, int64_t steps,
                       int64_t pairs, int width, uint16_t* dst);

// The AVX-512 packer of bf16 A as plain rows for an A read down its columns (gᵀ in a weight
// gradient; pack_rows_avx512.cpp), the AMX set's: every CPU with AMX has the AVX-512BW it needs.
bool pack_rows_avx512(const uint16_t* src, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t width, int mr,
                      uint16_t* dst);

// dst(j, i) = src(i, j) for i < rows, j < cols; each side float32, or bfloat16 bits when its flag
// is set (widened exactly, rounded to nearest even), with leading dimensions ld_src and ld_dst.
// The AVX-512 kernel (transpose_avx512.cpp) of the AMX products computed transposed: every CPU
// with AMX has the AVX-512BW it needs.
void transpose_copy_avx512(const void* src, bool src_bf16, int64_t ld_src, int64_t rows, int64_t cols, void* dst,
                           bool dst_bf16, int64_t ld_dst);

// One float64 C tile from packed panels: c(m×n) (+)= Σ_{p<kc} a[p·MR + i]·b[p·NR + j], added to c
// when `accumulate`, with m ≤ MR and n ≤ NR. Both panels are whole (zero past m and n), so only
// C's stores need masking. C is row-major with leading dimension ldc.
struct GemmTileF64 {
  int64_t kc;
  const double* a;
  const double* b;
  double* c;
  int64_t ldc;
  int m, n;
  bool accumulate;
};

// Packs lanes whose steps are contiguous, M(l, s) = src[l·lane_stride + s] for l < lanes and
// s < steps, into ceil(lanes/width) panels of steps × width values, dst[(panel·steps + s)·width +
// l % width], zero past `lanes`: a row-major A (its rows are lanes) or a B read down its columns
// (x·Wᵀ). Read lane by lane and written step by step, a transpose, which the vector sets do in
// registers.
using GemmPackBySteps = void (*)(const double* src, int64_t lane_stride, int64_t lanes, int64_t steps, int width,
                                 double* dst);

// A float64 kernel set: the register tile, its cache blocks (as GemmKernel's), the microkernel and
// optionally a fast packer.
struct GemmKernelF64 {
  const char* name;
  int mr, nr;
  int mc, kc, nc;
  void (*micro)(const GemmTileF64& tile);
  GemmPackBySteps pack_by_steps;  // nullptr: the portable packer only
};

extern const GemmKernel kGemmScalar;
extern const GemmKernel kGemmF32Avx2;
extern const GemmKernel kGemmF32Avx512;
extern const GemmKernel kGemmF32Avx512Narrow;
extern const GemmKernel kGemmBf16Avx512Bf16;
extern const GemmKernel kGemmBf16Amx;
extern const GemmKernelF64 kGemmF64Scalar;
extern const GemmKernelF64 kGemmF64Avx2;
extern const GemmKernelF64 kGemmF64Avx512;

// The word indices of the two-source 16-bit permute that interleaves two K steps into K pairs
// (Note [bf16 K-pair panels] in packing.h): word j of a result takes word j/2 (+ 16 for lanes
// 16..31) of the even step (j even) or of the odd one (index + 32). 64-byte aligned (packing.cpp),
// for the AVX-512 packers' aligned loads.
extern const uint16_t kBf16PairInterleave[2][32];

}  // namespace weft::detail
