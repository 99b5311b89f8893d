// The GEMM driver (gemm.h): kernel choice, the five BLIS loops, the split over threads (row blocks
// against a shared packed B, or column blocks), and the small-product path (split by rows when it
// is not too small).
//
// The loops of gemm_blocked (with several threads, they pack each block of B together and share
// out the ic blocks: Note [Threads sharing one packed B]):
//   for jc over N by NC              a column block of B and C
//     for pc over K by KC            pack B(KC×NC) into KC×NR panels          (L3)
//       for ic over M by MC          pack A(MC×KC) into MR×KC panels          (L2)
//         for jr over NC by NR       one KC×NR panel of B                     (L1)
//           for ir over MC by MR     one MR×NR tile of C: the microkernel     (registers)
// (the last two swap when A is read in place; see gemm_blocked).
// A product with few rows and a B read down its columns (x·Wᵀ at a small batch) is computed
// transposed: Note [Few rows times a transposed B].
// K is cut into equal chunks (K = 784 with KC = 256: 4×196, not 3×256 + 16), and M likewise, so no
// chunk is a sliver. The first K chunk writes C (or adds to it when accumulating), later ones add.
#include "tensor/cpu/gemm/gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <string>

#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/gemm/packing.h"
#include "tensor/cpu/gemm/partition.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace weft::detail {
namespace {

// Below this many floating-point operations (2·M·N·K) a float32 product reads A in place and
// packs at most B (gemm_small): ~40 µs on one core, less than what packing A would cost.
constexpr int64_t kSmallWork = int64_t{4} << 20;
// A small product is split over threads by rows when each gets at least this much work (~6 µs on
// one core, several times what handing a range to a pool thread costs).
constexpr int64_t kSmallWorkPerThread = int64_t{512} << 10;
// Each thread of a split product gets at least this much work.
constexpr int64_t kWorkPerThread = int64_t{2} << 20;
// A B packed ahead is packed over the threads from this many values (~10 µs on one core).
constexpr int64_t kParallelPackValues = int64_t{64} << 10;
// Linear's bias is copied into C's rows over the threads from this many bytes (~10 µs on one core).
constexpr int64_t kParallelBiasBytes = int64_t{256} << 10;
// Blocks of C per thread when a product is split along N.
constexpr int64_t kPartsPerThreadAlongN = 4;
// A float32 A with contiguous rows is read in place, unpacked, by blocks of C with at most this
// many rows: the microkernel's six row streams prefetch well, and every thread would otherwise
// pack the same A (the MLP's products, split along N, have 128 rows). Taller blocks reuse each
// packed panel of A across many more tiles, and pack.
constexpr int64_t kInPlaceRows = 256;
// A C at most this many columns wide reads such an A in place whatever its rows: each packed panel
// of A would serve at most eight tiles of 64 columns, too few to repay packing it (a GPT step at
// width 128 and 768 tokens, whose products are 65-512 columns wide: ~5 % less time in its GEMMs,
// one thread, sampled beside the step's other kernels).
constexpr int64_t kInPlaceColumns = 512;
// A float32 A stored by columns is read in place (Note [A's columns read in place]) by a set that
// takes it when C is at most kColumnsInPlaceWidth columns wide and A's columns are less than
// kColumnsInPlaceStride values (4 KiB) apart.
constexpr int64_t kColumnsInPlaceWidth = 256;
constexpr int64_t kColumnsInPlaceStride = 1024;
// A bfloat16 A widened whole to be read in place (Note [bfloat16 rows of A widened whole]) has at
// most this many values (16 MiB as float32): a prompt's rows times the widest weights.
constexpr int64_t kWidenedAValues = int64_t{4} << 20;
// Products with at most this many rows and a B read down its columns are computed transposed
// (Note [Few rows times a transposed B]). Above it packing W costs less than the transposed
// product loses: x·Wᵀ at 128 rows (the MLP's forward, W 512×784 and 512×512) ran 5-12 % faster
// packed, two threads, paired runs on Zen 3; at 64 rows the transposed product was ahead.
constexpr int64_t kTransposedMaxRows = 64;
// bfloat16 products on the AMX set with at most this many rows, no more than half as many as K,
// and a B read down its columns are computed transposed in tiles (Note [Few rows times a
// transposed B, in AMX tiles]): transposing C costs 2·M·N·4 bytes against packing W's 2·N·K·2.
// GPT-2's linears at 256 rows (a training step's batch) ran as fast either way, at 128 (a prompt)
// ~25 % faster transposed.
constexpr int64_t kTransposedTilesMaxRows = 128;
// Rows of W a transposed product in tiles takes at a time: its float32 Cᵀ (at most 512 × 256, half a
// MiB) stays in L2 from the tiles' stores to the transposing copy, however wide the product (an
// LM head's 50,257 rows would otherwise need a 51 MB buffer per thread).
constexpr int64_t kTransposedTilesChunkRows = 512;
// K chunk a transposed product in tiles cuts K into, four times the AMX set's: a strip of 32 rows of
// W over it (256 KiB) and xᵀ's chunk (at most 128 × 4096 values, 1 MiB) still fit in L2 beside the
// next strip, and C goes out of and back into the tiles once per chunk (the 1.1B Llama's products at
// 128 rows, one chunk for K = 2048 and two for 5632: 0.91-0.97x the time of chunks of 1024).
constexpr int64_t kTransposedTilesKc = 4096;

// The kernel set for a product whose C is n columns wide (AVX-512 float32 has two tile shapes).
const GemmKernel& kernel_for(CpuIsa isa, bool bf16, int64_t n) {
  const GemmKernel& f32_avx512 = n <= kGemmF32Avx512Narrow.nr ? kGemmF32Avx512Narrow : kGemmF32Avx512;
  switch (isa) {
    case CpuIsa::Scalar: return kGemmScalar;
    case CpuIsa::Avx2: return kGemmF32Avx2;
    case CpuIsa::Avx512:
    case CpuIsa::Avx512Vnni: return f32_avx512;
    case CpuIsa::Avx512Bf16: return bf16 ? kGemmBf16Avx512Bf16 : f32_avx512;
    case CpuIsa::Amx: return bf16 ? kGemmBf16Amx : f32_avx512;
  }
  return kGemmScalar;
}

// A 64-byte aligned scratch buffer that only grows; one per thread and purpose, kept for the
// thread's life so that steady-state products allocate nothing.
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(data_); }

  template <class T>
  T* get(int64_t count) {
    const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    if (bytes > capacity_) {
      std::free(data_);
      data_ = std::aligned_alloc(64, bytes);
      if (data_ == nullptr) {
        capacity_ = 0;
        throw std::bad_alloc();
      }
      capacity_ = bytes;
    }
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

thread_local PackBuffer t_pack_a, t_pack_b, t_transposed, t_widened_a, t_widened_b, t_source_a, t_source_b;

// A float32 block packed into panels by the kernel set's fast packer where it has one for this
// layout, else by the portable one.
void pack_a_panels(const GemmKernel& ker, const GemmMatrix& a, int64_t mc, int64_t kc, float* dst) {
  if (!ker.pack_a || !ker.pack_a(a.data, a.bf16, a.rs, a.cs, mc, kc, dst)) pack_a_f32(a, mc, kc, ker.mr, dst);
}

void pack_b_panels(const GemmKernel& ker, const GemmMatrix& b, int64_t kc, int64_t nc, float* dst) {
  if (!ker.pack_b || !ker.pack_b(b.data, b.bf16, b.rs, b.cs, kc, nc, dst)) pack_b_f32(b, kc, nc, ker.nr, dst);
}

// A bf16 block packed into K-pair panels (A's rows or B's columns as the lanes), likewise.
void pack_a_pairs(const GemmKernel& ker, const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, uint16_t* dst) {
  const auto* src = static_cast<const uint16_t*>(a.data);
  if (!ker.pack_pairs || !ker.pack_pairs(src, a.rs, a.cs, mc, kc, pairs, ker.mr, dst))
    pack_a_bf16_pairs(a, mc, kc, pairs, ker.mr, dst);
}

void pack_b_pairs(const GemmKernel& ker, const GemmMatrix& b, int64_t kc, int64_t nc, int64_t pairs, uint16_t* dst) {
  const auto* src = static_cast<const uint16_t*>(b.data);
  if (!ker.pack_pairs || !ker.pack_pairs(src, b.cs, b.rs, nc, kc, pairs, ker.nr, dst))
    pack_b_bf16_pairs(b, kc, nc, pairs, ker.nr, dst);
}

// A bf16 block as plain rows (a_rows sets), likewise.
void pack_a_rows(const GemmKernel& ker, const GemmMatrix& a, int64_t mc, int64_t kc, int64_t pairs, uint16_t* dst) {
  const auto* src = static_cast<const uint16_t*>(a.data);
  if (!ker.pack_rows || !ker.pack_rows(src, a.rs, a.cs, mc, kc, pairs * 2, ker.mr, dst))
    pack_a_bf16_rows(a, mc, kc, pairs, ker.mr, dst);
}

// A as the blocked loops read it: strided memory, or a GemmBlockSource (gemm.h) whose rows are
// made block by block.
struct AOperand {
  AOperand(const GemmMatrix& m) : matrix(m) {}  // NOLINT(google-explicit-constructor): memory is the usual A
  explicit AOperand(const GemmBlockSource* s) : matrix{nullptr, 0, 0, s->bf16}, source(s) {}

  GemmMatrix matrix;
  const GemmBlockSource* source = nullptr;
  // Rows of the matrix in memory past the product's own, which tiles that read A in place may
  // fetch ahead (the next chunk of a transposed product's W).
  int64_t rows_after = 0;
};

// B as the blocked loops read it: strided memory, or a GemmBlockSource (gemm.h) that makes B's rows
// or Bᵀ's (W's, for x·Wᵀ); `at` moves to the sub-matrix starting at (p, j) either way.
struct BOperand {
  BOperand(const GemmMatrix& m) : matrix(m) {}  // NOLINT(google-explicit-constructor): memory is the usual B
  BOperand(const GemmBlockSource* s, bool makes_transposed)
      : matrix{nullptr, 0, 0, s->bf16}, source(s), transposed(makes_transposed) {}

  explicit BOperand(const GemmPackedB* b) : matrix{nullptr, 0, 0, true}, packed(b) {}

  BOperand at(int64_t p, int64_t j) const {
    BOperand sub = *this;
    if (bias) sub.bias = bias + j;
    if (source || packed) {
      sub.p0 += p;
      sub.j0 += j;
    } else {
      sub.matrix = matrix.at(p, j);
    }
    return sub;
  }

  // The alignment the source wants of the blocks' K offsets: only a source of Bᵀ's rows starts
  // its runs at them.
  int64_t k_align() const { return source && transposed ? std::max<int64_t>(1, source->k_align) : 1; }

  // The K-pair panels of the block at B(p0, j0) of a B packed ahead (p0 the start of a K chunk,
  // j0 of a panel): the block's panels are already where the loops read them.
  const uint16_t* packed_block(int64_t kpairs) const {
    const int64_t chunk = p0 / packed->kc_step;
    return packed->data.data() + packed->chunk_offset[static_cast<size_t>(chunk)] + j0 * kpairs * 2;
  }

  GemmMatrix matrix;
  const GemmBlockSource* source = nullptr;
  const GemmPackedB* packed = nullptr;  // B packed ahead (gemm_pack_b)
  bool transposed = false;  // the source makes Bᵀ's rows, not B's
  int64_t p0 = 0, j0 = 0;   // a source's or a packed B's sub-matrix: B(p0 + p, j0 + j)
  // Linear's bias, one value per column of B, which the float32 tiles of the first K chunk find in
  // their rows of C (Note [Linear's bias in the tiles]; kernel sets with bf16 pairs get none).
  const float* bias = nullptr;
  // Columns of a memory B past the product's own that the thread's next product packs first
  // (the next column part of a product split along N).
  int64_t columns_after = 0;
};

// Note [The next block of B, fetched]: one thread packing a block of B from memory waits on the
// memory for all of it, with nothing else to do: at a prompt's 128 rows against weights that come
// from DRAM, the packing was a quarter of GPT-2's float32 prefill. So while the tiles of a block
// run (A read in place), they ask for the next block's lines into L2, a share each, one line
// every few K steps, and the pack that follows reads them from L2 (GPT-2's float32 prefill 0.94x
// the time, the packing 27 -> 12 % of it; the 1.1B Llama's 0.97-0.99x; asked for in a burst
// before each strip instead, they gained nothing). The next block is the next K chunk, or the
// next column block, or the first block of the next column part of the product
// (BOperand::columns_after), which the same thread usually takes next. The AVX2 tiles fetch
// the same way: reading B's rows in place from DRAM without it (Note [B's rows read in place]),
// x·B at 128 rows took up to 1.15x the time of packing B (the AVX2 set on an AVX-512 Xeon); with
// it, 0.85-1.0x (N = 768, 2304; K = 768, 3072), at ~1.02x for the MLP's products, whose B is in cache.

// Note [B's rows read in place]: those tiles read a block of B's panels streaming from L2, as a
// row-major B's own rows would stream, so packing the block only copied it: a pass over every
// weight of a prompt's product (GPT-2's, at 128 rows: ~10 % of its time, from cache or from DRAM).
// A float32 B whose rows are contiguous is read there in place instead, its rows ldb apart, where
// they begin on cache lines and are not a multiple of 2 KiB apart: at 4 KiB every row of a panel
// falls in the same few L1 sets (at 2 KiB, in two groups of them) and the tiles ran ~1.7x as long
// in place (x·B at 128 rows, N = 1024, 2048, 3072: 4, 8 and 12 KiB apart), where at N = 640, 768,
// 1280 and 2304 they ran 0.92-0.95x as long, weights from DRAM or in cache (a GPT-2 float32
// prefill of 128 tokens: ~0.96x). The next block's lines are fetched into L2 as before, for the
// tiles' first strip to read instead of the pack.
bool b_rows_read_in_place(const BOperand& b) { return !b.source && !b.packed && gemm_reads_b_rows_in_place(b.matrix); }

// The cache lines of the kc × nc block of a memory B at `block` as runs: B's rows when they are
// contiguous, its columns (W's rows, for x·Wᵀ) when those are; none for other layouts.
GemmLineRuns block_lines(const BOperand& block, int64_t kc, int64_t nc) {
  if (block.source || block.packed || kc <= 0 || nc <= 0) return {};
  const GemmMatrix& b = block.matrix;
  const int64_t size = b.bf16 ? 2 : 4;
  // A run of L bytes that starts inside a line touches up to L / 64 + 1 lines (rounded up).
  auto runs = [&](int64_t count, int64_t run_bytes, int64_t stride) {
    const auto run_lines = static_cast<int>((run_bytes + 63) / 64 + 1);
    return GemmLineRuns{static_cast<const char*>(b.data), stride * size, run_lines, 0,
                        static_cast<int>(std::min<int64_t>(count * run_lines, INT32_MAX))};
  };
  if (b.cs == 1) return runs(kc, nc * size, b.rs);
  if (b.rs == 1) return runs(nc, kc * size, b.cs);
  return {};
}

// Lines [first, end) of `all`, as runs of their own: one tile's share of a block's lines.
GemmLineRuns lines_share(const GemmLineRuns& all, int64_t first, int64_t end) {
  return {all.run + (all.line + first) / all.run_lines * all.stride, all.stride, all.run_lines,
          static_cast<int>((all.line + first) % all.run_lines), static_cast<int>(end - first)};
}

// Whether a block of C with m rows reads A in place rather than packing it: contiguous rows (or,
// for a set that takes them, contiguous float32 columns: Note [A's columns read in place]), at
// most kInPlaceRows of them (any number of float32 ones for a C at most kInPlaceColumns wide), or
// a source's rows in the scratch they are made into, whatever their number. bfloat16 rows are
// read as K-pairs by a set that can, when every K chunk is whole pairs (chunks are even but for a
// last odd one); a set without pairs widens bfloat16 as it packs.
//
// Note [A's columns read in place]: an A stored by columns (rs 1: gᵀ in a weight gradient
// dW = gᵀ·x, the tokens down K) holds a tile's six rows at one K step in six adjacent values of
// one cache line, which the next row strips read again. Packed, each 6-row panel cost a masked
// load and store per K step before its tiles could start, and made the weight gradients of a
// small model its slowest products: the char GPT's (768 tokens, C 128 or 512 columns wide) ran at
// 58-73 % of the FMA peak on two threads against 76-83 % for its other products. The AVX-512
// set's tiles read such an A in place where C is narrow (AVX-512 Xeon, 2026-12-07, two threads):
// gᵀ·x at 384 × 768 × 128 takes 279-281 µs instead of 321-334, 512 × 768 × 128 364-370 instead
// of 418-423, 128 × 768 × 128 79 instead of 116; one thread 12-28 % less time from 64 to 512
// rows. Not for a C 512 columns wide, where each packed panel serves eight tiles (as fast either
// way), nor where A's columns are 4 KiB apart or more (at 1024 rows every K step's line fell in
// the same L1 sets: 1.2-1.4x the time). Split along N, such an A goes in one block per thread: a
// block as narrow as n_split made tiles of one vector a row (64 × 768 × 128: 74 µs against 41).
// The AVX2 set's 6×16 tiles and the scalar set's ran 5-30 % and 45 % slower in place: they pack.
bool a_read_in_place(const GemmKernel& ker, const AOperand& a, int64_t m, int64_t n, int64_t k) {
  if (!a.source) {
    if (a.matrix.cs != 1)
      return a.matrix.rs == 1 && !a.matrix.bf16 && ker.a_columns_in_place && n <= kColumnsInPlaceWidth &&
             a.matrix.cs < kColumnsInPlaceStride;
    if (m > kInPlaceRows && (n > kInPlaceColumns || a.matrix.bf16)) return false;
  }
  if (ker.bf16_pairs) return ker.a_rows_in_place && a.matrix.bf16 && k % 2 == 0;
  return !a.matrix.bf16;
}

// K-pairs of a packed bf16 panel over kc steps of K: padded to the kernel set's pair block.
int64_t packed_pairs(const GemmKernel& ker, int64_t kc) {
  return ((kc + 1) / 2 + ker.pair_block - 1) / ker.pair_block * ker.pair_block;
}

// The cache blocks of one product: K and M cut into equal chunks (M's of at most mc_most rows),
// N into blocks of at most nc, or, when every strip of A's rows streams the whole block of B
// (A read in place, row strip by row strip: c_block), into equal blocks of at most
// kStreamedBlockBytes, so that the block stays in L2 from strip to strip. At nc = 4096 an LM head's
// logits, 256 rows × 50,257 columns, streamed a 6 MiB block from L3 for every six rows of A: 174
// GFLOP/s, against 419 in blocks of 320 columns (kc 384, 480 KiB; 406-412 at 256 and 512 columns,
// 322 at 1024).
constexpr int64_t kStreamedBlockBytes = int64_t{512} << 10;

struct Blocking {
  int64_t kc_step, mc_step, nc_step;
  int64_t a_size, b_size;  // elements of the pack buffers, padded to whole panels
};

Blocking blocking_for(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, int64_t mc_most, int64_t k_align,
                      bool strips_stream_b) {
  Blocking bl;
  bl.kc_step = even_step(k, ker.kc, ker.bf16_pairs ? std::lcm<int64_t>(2 * ker.pair_block, k_align) : k_align);
  bl.mc_step = even_step(m, mc_most, ker.mr);
  const int64_t kc_packed = ker.bf16_pairs ? packed_pairs(ker, bl.kc_step) * 2 : bl.kc_step;
  bl.nc_step = std::min<int64_t>(ker.nc, (n + ker.nr - 1) / ker.nr * ker.nr);
  if (strips_stream_b) {
    const int64_t column_bytes = kc_packed * (ker.bf16_pairs ? 2 : 4);
    const int64_t most = std::max<int64_t>(ker.nr, kStreamedBlockBytes / column_bytes / ker.nr * ker.nr);
    bl.nc_step = even_step(n, std::min(most, bl.nc_step), ker.nr);
  }
  bl.a_size = bl.mc_step * kc_packed;
  bl.b_size = kc_packed * bl.nc_step;
  return bl;
}

// Packs count columns of a kc×nc block of B in memory into their panels, the first of them
// panel `first` / NR of the packed block at `packed` (float32, or bf16 K-pairs for a pairs kernel).
void pack_b_memory(const GemmKernel& ker, const GemmMatrix& columns, int64_t kc, int64_t first, int64_t count,
                   void* packed) {
  if (ker.bf16_pairs) {
    const int64_t pairs = packed_pairs(ker, kc);
    pack_b_pairs(ker, columns, kc, count, pairs, static_cast<uint16_t*>(packed) + first * pairs * 2);
  } else {
    pack_b_panels(ker, columns, kc, count, static_cast<float*>(packed) + first * kc);
  }
}

// Packs columns [first, first + count) of a kc×nc block of B (first a multiple of NR) into their
// panels of the packed block at `packed`. A source makes its values into this thread's scratch,
// from where they are packed like memory: Bᵀ's rows a panel at a time (NR rows of W, in L1 or L2)
// as a B read down its columns; B's rows (W's, for g·W) up to kBRowRun columns at a time, as a
// row-major B, runs long enough that the source's per-run cost stays small (a run per panel row,
// 32 values, cost more than the product of the panel at batch 128).
constexpr int64_t kBRowRun = 256;

void pack_b_columns(const GemmKernel& ker, const BOperand& b_block, int64_t kc, int64_t first, int64_t count,
                    void* packed) {
  if (!b_block.source) return pack_b_memory(ker, b_block.matrix.at(0, first), kc, first, count, packed);
  const GemmBlockSource& source = *b_block.source;
  const int64_t run_most = b_block.transposed ? ker.nr : std::max<int64_t>(ker.nr, kBRowRun / ker.nr * ker.nr);
  void* rows = source.bf16 ? static_cast<void*>(t_source_b.get<uint16_t>(kc * run_most))
                           : static_cast<void*>(t_source_b.get<float>(kc * run_most));
  for (int64_t j = first; j < first + count; j += run_most) {
    const int64_t cols = std::min<int64_t>(run_most, first + count - j);
    if (b_block.transposed) {
      source.fill(source.context, b_block.j0 + j, cols, b_block.p0, kc, rows);
      pack_b_memory(ker, GemmMatrix{rows, 1, kc, source.bf16}, kc, j, cols, packed);
    } else {
      source.fill(source.context, b_block.p0, kc, b_block.j0 + j, cols, rows);
      pack_b_memory(ker, GemmMatrix{rows, cols, 1, source.bf16}, kc, j, cols, packed);
    }
  }
}

// The same sub-matrix of a product's transposed output (GemmTileBf16::transposed): its (i, j)
// is the output's (j, i).
GemmTransposedOut transposed_at(const GemmTransposedOut& out, int64_t i, int64_t j) {
  const int64_t offset = j * out.ld + i;
  return {static_cast<char*>(out.data) + offset * (out.bf16 ? 2 : 4), out.ld, out.bf16};
}

// Rows [ic, ic + mc) of C's block at columns [jc, jc + nc), K chunk [pc, pc + kc), against the
// block of B, packed or (b_ld > 0) B's float32 rows in place, b_ld apart (Note [B's rows read in
// place]): packs this part of A (unless read in place) and runs its tiles. With
// `transposed` (a_rows sets), the tiles store their sums there, transposed, instead of into C.
// a_rows_after: rows of an A read in place that follow the block's in memory, for its last strip
// to fetch ahead. fetch_next: lines the tiles of a float32 block with A in place ask for, shared
// out between them (Note [The next block of B, fetched]).
void c_block(const GemmKernel& ker, const AOperand& a, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
             const void* block_b, int64_t b_ld, int64_t jc, int64_t nc, float* c, int64_t ldc, bool add,
             const float* bias, bool a_in_place, int64_t a_size, uint16_t* c_bf16,
             const GemmTransposedOut* transposed = nullptr, int64_t a_rows_after = 0,
             const GemmLineRuns* fetch_next = nullptr) {
  const bool pairs = ker.bf16_pairs;
  const int64_t kpairs = pairs ? packed_pairs(ker, kc) : 0;
  GemmMatrix a_block = a.matrix.at(ic, pc);
  // A source's rows that the tiles read in place are made a strip of MR rows at a time into this
  // thread's scratch, just before the strip's tiles, so that they stay in L1 from their making to
  // their use: a whole block went out to L2 and back (a 4-bit weight at batch 32, 4096², bfloat16:
  // 1.66 -> 1.52 ms; reading its pairs in place instead of packing them had taken it from 1.92).
  // Other sources' rows are made a whole block at a time and packed from there, as memory is.
  const bool source_strips = a.source && a_in_place;
  void* scratch = nullptr;
  if (a.source) {
    const int64_t rows = source_strips ? std::min<int64_t>(ker.mr, mc) : mc;
    scratch = a.source->bf16 ? static_cast<void*>(t_source_a.get<uint16_t>(rows * kc))
                             : static_cast<void*>(t_source_a.get<float>(rows * kc));
    if (!source_strips) a.source->fill(a.source->context, ic, mc, pc, kc, scratch);
    a_block = GemmMatrix{scratch, kc, 1, a.source->bf16};
  }
  const auto* bf = static_cast<const float*>(block_b);
  const auto* bp = static_cast<const uint16_t*>(block_b);
  float* af = nullptr;
  uint16_t* ap = nullptr;
  if (!a_in_place && pairs) {
    ap = t_pack_a.get<uint16_t>(a_size);
    if (ker.a_rows) pack_a_rows(ker, a_block, mc, kc, kpairs, ap);
    else pack_a_pairs(ker, a_block, mc, kc, kpairs, ap);
  } else if (!a_in_place) {
    af = t_pack_a.get<float>(a_size);
    pack_a_panels(ker, a_block, mc, kc, af);
  }
  if (ker.begin_block) ker.begin_block();
  // One tile: rows ir.., columns jr.. of this block.
  auto tile = [&](int64_t ir, int64_t jr, const uint16_t* prefetch = nullptr, int prefetch_rows = 0,
                  const GemmLineRuns& fetch = {}) {
    const int64_t offset = (ic + ir) * ldc + jc + jr;
    float* tile_c = c_bf16 ? nullptr : c + offset;
    const int rows = static_cast<int>(std::min<int64_t>(ker.mr, mc - ir));
    const int cols = static_cast<int>(std::min<int64_t>(ker.nr, nc - jr));
    const int64_t a_row = source_strips ? 0 : ir;  // the tile's first row in a_block
    if (pairs) {
      const uint16_t* tile_a =
          a_in_place ? static_cast<const uint16_t*>(a_block.data) + a_row * a_block.rs : ap + ir * kpairs * 2;
      GemmTileBf16 t{kpairs, tile_a, bp + jr * kpairs * 2, tile_c, ldc, rows, cols, add,
                     c_bf16 ? c_bf16 + offset : nullptr};
      if (a_in_place) {
        t.lda = a_block.rs;
        t.a_packed = false;
        t.a_prefetch = prefetch;
        t.prefetch_rows = prefetch_rows;
      }
      if (transposed) t.transposed = transposed_at(*transposed, ic + ir, jc + jr);
      ker.micro_bf16(t);
    } else {
      const float* tile_a = a_in_place ? static_cast<const float*>(a_block.data) + a_row * a_block.rs : af + ir * kc;
      const bool packed = b_ld == 0;
      // The bias goes into the tile's rows of C just before the tile adds its sums to them, while
      // they are in L1 (Note [Linear's bias in the tiles]).
      if (bias != nullptr)
        for (int r = 0; r < rows; ++r)
          std::memcpy(tile_c + r * ldc, bias + jr, static_cast<size_t>(cols) * sizeof(float));
      ker.micro_f32({kc, tile_a, a_block.rs, a_block.cs, !a_in_place, packed ? bf + jr * kc : bf + jr,
                     packed ? ker.nr : b_ld, packed, tile_c, ldc, rows, cols, add || bias != nullptr, fetch});
    }
  };
  // BLIS order keeps a panel of B in L1 while the packed panels of A stream from L2. A read in
  // place is six strided rows instead, so it is the one kept in L1, and the packed B panels (one
  // contiguous stream) pass by it. AMX (a_rows) also goes row strip by row strip: its 32-row C
  // tiles finished down a column would touch a new page per row for every tile (the int8 kernel's
  // lesson). Its strips sweep the B block a part of nc_sweep columns at a time, a part small
  // enough to stay in L2 beside A's block, while the block itself is wide: every block of B makes
  // A be packed again (2048³ with 512-column blocks spent 16 % of its time copying A).
  if (ker.a_rows) {
    const int64_t sweep = ker.nc_sweep > 0 ? ker.nc_sweep : nc;
    // A read in place from memory (a prefill's weights, Note [Few rows times a transposed B, in
    // AMX tiles]) came into the tiles from DRAM one strided line at a time, the tiles waiting on
    // each. The tiles of a strip's first sweep now fetch the next strip into L2, a share of its
    // rows each (GPT-2 bf16 prefill of 128 tokens: 0.91-0.93x the time, paired in one process),
    // and the last strip the first of the rows after the block (a_rows_after; a Llama bf16
    // prefill, whose blocks are 8 strips: 0.98x the time).
    const bool fetch = pairs && a_in_place && !source_strips;
    for (int64_t j0 = 0; j0 < nc; j0 += sweep) {
      const int64_t j1 = std::min(nc, j0 + sweep), tiles = (j1 - j0 + ker.nr - 1) / ker.nr;
      for (int64_t ir = 0; ir < mc; ir += ker.mr) {
        const int64_t next_rows =
            fetch && j0 == 0 ? std::clamp<int64_t>(mc + a_rows_after - ir - ker.mr, 0, ker.mr) : 0;
        const int64_t share = (next_rows + tiles - 1) / tiles;
        const uint16_t* next =
            next_rows > 0 ? static_cast<const uint16_t*>(a_block.data) + (ir + ker.mr) * a_block.rs : nullptr;
        for (int64_t jr = j0, first = 0; jr < j1; jr += ker.nr, first += share)
          tile(ir, jr, next + std::min(first, next_rows) * a_block.rs,
               static_cast<int>(std::clamp<int64_t>(next_rows - first, 0, share)));
      }
    }
  } else if (a_in_place) {
    const int64_t panels = (nc + ker.nr - 1) / ker.nr, tiles = (mc + ker.mr - 1) / ker.mr * panels;
    const int64_t lines = fetch_next ? fetch_next->count : 0;
    for (int64_t ir = 0, index = 0; ir < mc; ir += ker.mr) {
      const int64_t rows = std::min<int64_t>(ker.mr, mc - ir);
      if (source_strips) a.source->fill(a.source->context, ic + ir, rows, pc, kc, scratch);
      for (int64_t jr = 0; jr < nc; jr += ker.nr, ++index) {
        const GemmLineRuns share =
            lines > 0 ? lines_share(*fetch_next, lines * index / tiles, lines * (index + 1) / tiles) : GemmLineRuns{};
        tile(ir, jr, nullptr, 0, share);
      }
    }
  } else {
    for (int64_t jr = 0; jr < nc; jr += ker.nr)
      for (int64_t ir = 0; ir < mc; ir += ker.mr) tile(ir, jr);
  }
}

// c(m×n) (+)= a(m×k)·b(k×n) by the five loops, with packed B and A packed or, when a_in_place,
// read in place (a_read_in_place), on `threads` threads. With c_bf16 (a kernel
// set that stores_bf16, K in one chunk: gemm_to_bf16) C is bfloat16 there and c is unused. With
// `transposed` (an a_rows set) the last K chunk's tiles store C there, transposed, and c holds
// only the chunks before it.
//
// Note [Threads sharing one packed B]
// With several threads (a product taller than wide), all of them compute it together, block of B
// by block of B: they pack the kc×nc block between them into one buffer, then take the mc-row
// blocks of C against it from the pool, each packing its own rows of A. Two things over giving
// each thread its own half of C: B is packed once instead of once per thread, and one copy of the
// block (4 MiB at kc×nc = 256×4080) sits in the shared L3 instead of one per thread; and C's row
// blocks are many small tasks, so when one vCPU is slowed by a neighbour on its host core the
// other takes more of them instead of waiting for it at the end. The two parallel loops per block
// are the barriers (a product has few blocks: 2048³ has 8).
void gemm_blocked(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, const AOperand& a, const BOperand& b,
                  float* c, int64_t ldc, bool accumulate, bool a_in_place, int64_t threads,
                  uint16_t* c_bf16 = nullptr, const GemmTransposedOut* transposed = nullptr) {
  // Row blocks of at most mc, as many as a multiple of the threads so that none waits for the
  // others at the end of a block of B (1024 rows in blocks of 348 would be 3: one thread takes 2).
  const int64_t rows_most = std::min<int64_t>(ker.mc, (m + threads - 1) / threads);
  const int64_t row_blocks_wanted = (m + rows_most - 1) / rows_most;
  const int64_t balanced_blocks = (row_blocks_wanted + threads - 1) / threads * threads;
  const Blocking bl = blocking_for(ker, m, n, k, (m + balanced_blocks - 1) / balanced_blocks,
                                   a.source ? std::max<int64_t>(1, a.source->k_align) : b.k_align(),
                                   a_in_place && !ker.a_rows);
  const int64_t row_blocks = (m + bl.mc_step - 1) / bl.mc_step;
  // One thread's blocks with A read in place (a part of a product split along N): its tiles fetch
  // the next block of B and read a memory B's rows in place where they can.
  const bool fetch = threads == 1 && a_in_place && !a.source && !ker.a_rows && !ker.bf16_pairs;
  const bool b_in_place = fetch && b_rows_read_in_place(b);
  void* packed_b = b.packed || b_in_place ? nullptr
                 : ker.bf16_pairs         ? static_cast<void*>(t_pack_b.get<uint16_t>(bl.b_size))
                                          : static_cast<void*>(t_pack_b.get<float>(bl.b_size));
  // The block this thread packs after B(pc, jc) (Note [The next block of B, fetched]).
  auto next_block = [&](int64_t pc, int64_t kc, int64_t jc, int64_t nc) {
    if (pc + kc < k) return block_lines(b.at(pc + kc, jc), std::min(bl.kc_step, k - pc - kc), nc);
    if (jc + nc < n)
      return block_lines(b.at(0, jc + nc), std::min(bl.kc_step, k), std::min(bl.nc_step, n - jc - nc));
    return block_lines(b.at(0, n), std::min(bl.kc_step, k), std::min(bl.nc_step, b.columns_after));
  };
  for (int64_t jc = 0; jc < n; jc += bl.nc_step) {
    const int64_t nc = std::min(bl.nc_step, n - jc);
    const int64_t pack_parts = std::min(threads, (nc + ker.nr - 1) / ker.nr);
    for (int64_t pc = 0; pc < k; pc += bl.kc_step) {
      const int64_t kc = std::min(bl.kc_step, k - pc);
      const BOperand b_block = b.at(pc, jc);
      const void* block_b = packed_b;
      if (b_in_place) {
        block_b = b_block.matrix.data;
      } else if (b.packed) {
        block_b = b_block.packed_block(packed_pairs(ker, kc));
      } else {
        parallel_for_if(threads > 1, pack_parts, [&](int64_t part) {
          const PartRange cols = part_of(nc, ker.nr, pack_parts, part);
          pack_b_columns(ker, b_block, kc, cols.first, cols.length, packed_b);
        });
      }
      parallel_for_if(threads > 1, row_blocks, [&](int64_t block) {
        const int64_t ic = block * bl.mc_step;
        const int64_t mc = std::min(bl.mc_step, m - ic);
        const GemmLineRuns next = fetch && block == 0 ? next_block(pc, kc, jc, nc) : GemmLineRuns{};
        c_block(ker, a, ic, mc, pc, kc, block_b, b_in_place ? b.matrix.rs : 0, jc, nc, c, ldc, accumulate || pc > 0,
                pc == 0 ? b_block.bias : nullptr, a_in_place, bl.a_size, c_bf16,
                pc + kc >= k ? transposed : nullptr, m - ic - mc + (pc + kc >= k ? a.rows_after : 0), &next);
      });
    }
  }
}

// A small float32 product (or a row block of one, or of a product computed transposed) on the
// calling thread: A read in place, B in place when its rows are contiguous, else packed whole (it
// is small: one of M, N, K is). C is swept a row block at a time: with a short K the stores are
// most of the work, and row after row they form streams the prefetcher follows.
void gemm_small(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b,
                float* c, int64_t ldc, bool accumulate) {
  const auto* ad = static_cast<const float*>(a.data);
  const bool b_in_place = !b.bf16 && b.cs == 1;
  const float* packed = nullptr;
  if (!b_in_place) {
    float* buffer = t_pack_b.get<float>(k * ((n + ker.nr - 1) / ker.nr * ker.nr));
    pack_b_panels(ker, b, k, n, buffer);
    packed = buffer;
  }
  const int64_t ldb = b_in_place ? b.rs : ker.nr;
  for (int64_t ir = 0; ir < m; ir += ker.mr) {
    for (int64_t jr = 0; jr < n; jr += ker.nr) {
      const float* panel = b_in_place ? static_cast<const float*>(b.data) + jr : packed + jr * k;
      const int rows = static_cast<int>(std::min<int64_t>(ker.mr, m - ir));
      const int cols = static_cast<int>(std::min<int64_t>(ker.nr, n - jr));
      ker.micro_f32({k, ad + ir * a.rs, a.rs, a.cs, false, panel, ldb, !b_in_place, c + ir * ldc + jr, ldc, rows, cols,
                     accumulate});
    }
  }
}

// Note [Few rows times a transposed B]: x·Wᵀ with W (N×K) row-major reads B down its columns,
// so the usual path packs all of W, K·N values, to use each of them only 2·M times: at a batch
// of 1 the packing is nearly the whole cost (4096², one core: ~20 ms). The transposed product
// Cᵀ = W·xᵀ reads W in place as its A, six rows at a time, and packs only xᵀ (K·M values); its
// N×M result goes through a per-thread buffer and is transposed into C (C is first transposed
// into the buffer when accumulating, so linear's bias is added first, as on the usual path).
// Whole rows of W stream through the microkernel (gemm_small, K not cut) when xᵀ packs into one
// panel or W's rows are long: cut into K chunks, long rows become short runs far apart that the
// prefetcher does not follow (4096², 32 rows: 2× slower). A single row is W·x, computed as dot
// products of W's rows (the kernel set's dot_rows), which read W at full vector width instead of
// broadcasting it value by value (4096², 2 threads: ~15-25 % faster, at the memory's pace).
// Threads split W's rows, so no element's arithmetic depends on the thread count.
void gemm_transposed(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, const GemmMatrix& a,
                     const GemmMatrix& b, float* c, int64_t ldc, bool accumulate) {
  const GemmMatrix w{b.data, b.cs, b.rs, false};   // Bᵀ: n×k, contiguous rows
  const GemmMatrix xt{a.data, a.cs, a.rs, false};  // Aᵀ: k×m
  const int64_t work = 2 * m * n * k;
  const bool dot = m == 1 && a.cs == 1 && ker.dot_rows;
  const bool small = work <= kSmallWork;
  const bool whole_rows = small || m <= ker.nr || k >= 4 * ker.kc;
  const int64_t unit = dot ? 1 : ker.mr;  // rows of W per unit of a part
  const int64_t threads = std::min<int64_t>(num_threads(), work / (small || dot ? kSmallWorkPerThread : kWorkPerThread));
  const int64_t parts = std::clamp<int64_t>(threads, 1, (n + unit - 1) / unit);
  auto run = [&](int64_t part) {
    const PartRange rows = part_of(n, unit, parts, part);
    float* c_part = c + rows.first;
    if (dot) {
      ker.dot_rows(static_cast<const float*>(b.data) + rows.first * b.cs, b.cs, static_cast<const float*>(a.data), k,
                   rows.length, c_part, accumulate);
      return;
    }
    float* t = t_transposed.get<float>(rows.length * m);
    if (accumulate) transpose_copy(c_part, false, ldc, m, rows.length, t, false, m);
    if (whole_rows) gemm_small(ker, rows.length, m, k, w.at(rows.first, 0), xt, t, m, accumulate);
    else gemm_blocked(ker, rows.length, m, k, w.at(rows.first, 0), xt, t, m, accumulate, true, 1);
    transpose_copy(t, false, m, rows.length, m, c_part, false, ldc);
  };
  if (parts == 1) return run(0);
  parallel_for(parts, run);
}

// Note [Few rows times a transposed B, in AMX tiles]: the AMX set's B is K-pair panels, so x·Wᵀ
// with a bfloat16 W (N×K) row-major packs all of W on every call, a pass that cost as much as the
// tiles' arithmetic in a GPT-2 prefill of 128 tokens. But its A tiles take 16 rows of 32
// consecutive values, which W's rows are: Cᵀ = W·xᵀ reads W in place as A and packs only xᵀ (M·K
// values) as B. The tiles of the last K chunk store their Cᵀ into C transposed, a tile's 16 × 16
// quarters transposed in registers (GemmTileBf16::transposed); the sums of earlier chunks wait in
// a per-thread float32 buffer, into which C is first transposed when accumulating, so linear's
// bias comes first, as on the usual path. (A whole float32 Cᵀ transposed into C in a pass of
// its own was 5.7 % of a Llama bf16 prefill's time; the transposing stores are 2.5 %.) Every
// element is the same sum of the same pair products in the same order as on the usual path, so
// the bits are too: between K chunks C leaves the tiles as float32 and comes back exactly, so
// where the chunks fall changes nothing (they are longer here: kTransposedTilesKc). A bfloat16 C
// is rounded once, as the tiles leave, whatever the chunks, where the usual path would round a
// float32 C in a pass of its own past one chunk (a Llama prefill's products, K = 2048 and 5632:
// 0.91x the time). W's rows are read in place in whole strips of 32 (the tiles load exactly those;
// a last partial strip is packed) and only where K is whole tiles of 32 values
// (gemm_transposes_tiles). Threads split W's rows.
bool gemm_transposes_tiles(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, const GemmMatrix& a,
                           const GemmMatrix& b) {
  return ker.a_rows && a.bf16 && b.rs == 1 && b.cs != 1 && k % (2 * ker.pair_block) == 0 &&
         m <= kTransposedTilesMaxRows && 2 * m <= k && m < n;
}

// The K chunk length gemm_blocked cuts a memory B into (blocking_for with k_align 1).
int64_t b_chunk_step(const GemmKernel& ker, int64_t k) { return even_step(k, ker.kc, 2 * ker.pair_block); }

// b (k×n, bfloat16) packed ahead as gemm_pack_b packs it, into `packed`, whose storage is reused.
void pack_b_ahead_into(const GemmKernel& ker, int64_t k, int64_t n, const GemmMatrix& b, GemmPackedB& packed) {
  packed.kernel = &ker;
  packed.k = k;
  packed.n = n;
  packed.kc_step = b_chunk_step(ker, k);
  packed.chunk_offset.clear();
  const int64_t n_padded = (n + ker.nr - 1) / ker.nr * ker.nr;
  int64_t size = 0;
  for (int64_t pc = 0; pc < k; pc += packed.kc_step) {
    packed.chunk_offset.push_back(size);
    size += packed_pairs(ker, std::min(packed.kc_step, k - pc)) * 2 * n_padded;
  }
  packed.data.resize(static_cast<size_t>(size));
  // A panel of one K chunk per task, over the threads: the transposed products pack xᵀ just
  // before the threads split W, which left the other threads waiting (2 % of a bf16 prefill).
  const int64_t panels = n_padded / ker.nr;
  const auto chunks = static_cast<int64_t>(packed.chunk_offset.size());
  parallel_for_if(k * n >= kParallelPackValues, chunks * panels, [&](int64_t task) {
    const int64_t chunk = task / panels, j = task % panels * ker.nr;
    const int64_t pc = chunk * packed.kc_step;
    pack_b_memory(ker, b.at(pc, j), std::min(packed.kc_step, k - pc), j, std::min<int64_t>(ker.nr, n - j),
                  packed.data.data() + packed.chunk_offset[static_cast<size_t>(chunk)]);
  });
}

void gemm_transposed_tiles(const GemmKernel& set, int64_t m, int64_t n, int64_t k, const GemmMatrix& a,
                           const GemmMatrix& b, float* c, int64_t ldc, bool accumulate, uint16_t* c_bf16) {
  GemmKernel ker = set;
  ker.kc = kTransposedTilesKc;
  const GemmMatrix w{b.data, b.cs, b.rs, true};  // Bᵀ: n×k, contiguous rows
  // xᵀ (k×m) packed once, on this thread, for every part's blocks to read.
  thread_local GemmPackedB t_packed_xt;
  pack_b_ahead_into(ker, k, m, GemmMatrix{a.data, a.cs, a.rs, true}, t_packed_xt);
  const BOperand xt(&t_packed_xt);
  const int64_t threads = std::clamp<int64_t>(2 * m * n * k / kWorkPerThread, 1, num_threads());
  const int64_t parts = std::min<int64_t>(threads, (n + ker.mr - 1) / ker.mr);
  const bool bf16_c = c_bf16 != nullptr;
  auto run = [&](int64_t part) {
    const PartRange rows = part_of(n, ker.mr, parts, part);
    float* t = t_transposed.get<float>(std::min(rows.length, kTransposedTilesChunkRows) * m);
    for (int64_t r0 = rows.first; r0 < rows.first + rows.length; r0 += kTransposedTilesChunkRows) {
      const int64_t count = std::min(kTransposedTilesChunkRows, rows.first + rows.length - r0);
      void* c_part = bf16_c ? static_cast<void*>(c_bf16 + r0) : static_cast<void*>(c + r0);
      const GemmTransposedOut out{c_part, ldc, bf16_c};
      if (accumulate) transpose_copy_avx512(c_part, bf16_c, ldc, m, count, t, false, m);
      const int64_t whole = count / ker.mr * ker.mr;
      AOperand strips(w.at(r0, 0));
      strips.rows_after = rows.first + rows.length - (r0 + whole);
      if (whole > 0) gemm_blocked(ker, whole, m, k, strips, xt, t, m, accumulate, true, 1, nullptr, &out);
      if (whole < count) {
        const GemmTransposedOut rest = transposed_at(out, whole, 0);
        gemm_blocked(ker, count - whole, m, k, w.at(r0 + whole, 0), xt, t + whole * m, m, accumulate, false, 1,
                     nullptr, &rest);
      }
    }
  };
  if (parts == 1) return run(0);
  parallel_for(parts, run);
}

// The products past the small and transposed paths, A in memory or from a source.
//
// Along M (C taller than wide) the threads share each packed block of B (Note [Threads sharing
// one packed B]). Along N (C square or wider than tall), C is split into contiguous column blocks,
// a few per thread when A is read in place (each block packs only its own columns of B, so smaller
// blocks cost nothing and let the pool's tail stealing move the unstarted ones of a preempted
// thread to a running one). Squares go by columns: with no barrier between the threads, a slowed
// vCPU holds up only its own blocks (Zen 4, two threads, paired runs: bf16 512³ / 1024³ 432-448 /
// 437-444 GFLOP/s against 357-426 / 401-431 by rows; the MLP's dW2, 512 × 512 over K = 128, 92 %
// of peak against 85-90 % in float32 and 92.6 % against 88.7 % in bf16; float32 squares the same
// in the median, 202-211 against 186-218 at 512³), though each thread packs all of A.
void gemm_large(const GemmKernel& ker, int64_t m, int64_t n, int64_t k, const AOperand& a, const BOperand& b,
                float* c, int64_t ldc, bool accumulate, uint16_t* c_bf16 = nullptr) {
  const int64_t threads = std::clamp<int64_t>(2 * m * n * k / kWorkPerThread, 1, num_threads());
  if (m > n) {
    // A is read in place where each thread's share of the rows would be short enough (kInPlaceRows).
    const bool in_place = a_read_in_place(ker, a, (m + threads - 1) / threads, n, k);
    return gemm_blocked(ker, m, n, k, a, b, c, ldc, accumulate, in_place, threads, c_bf16);
  }
  const bool in_place = a_read_in_place(ker, a, m, n, k);
  // Small column blocks cost nothing more when A's rows are memory read in place; a source would
  // make its rows again for every block, and an A read by its columns (Note [A's columns read in
  // place]) would go through tiles as narrow as the blocks, a vector or two a row.
  const bool fine = in_place && !a.source && a.matrix.cs == 1;
  // Blocks cut at a tile's width would leave one thread a whole tile more: 784 columns in tiles
  // of 64 are 7 + 6 of them, 448 against 336 columns (the MLP's dW1 ran 10 % slower than 400 + 384).
  // So they are cut at n_split columns, unless whole tiles divide evenly into at least two blocks
  // per thread: GPT-2's 768 columns in 8 blocks of 96 were each a tile of 64 columns and one of 32,
  // which does half the FMAs per load of A; in 6 blocks of 128 they are whole tiles (x·B at 128
  // rows, N = 768: 0.93-0.95x the time).
  int64_t unit = ker.n_split > 0 ? ker.n_split : ker.nr, wanted = fine ? threads * kPartsPerThreadAlongN : threads;
  for (int64_t per_thread = kPartsPerThreadAlongN; fine && unit != ker.nr && per_thread >= 2; --per_thread) {
    if (n % (threads * per_thread * ker.nr) == 0) {
      unit = ker.nr;
      wanted = threads * per_thread;
      break;
    }
  }
  const int64_t units = (n + unit - 1) / unit;
  const int64_t parts = std::clamp<int64_t>(wanted, 1, units);
  if (threads <= 1 || parts == 1) return gemm_blocked(ker, m, n, k, a, b, c, ldc, accumulate, in_place, 1, c_bf16);
  parallel_for(parts, [&](int64_t part) {
    const PartRange r = part_of(n, unit, parts, part);
    BOperand columns = b.at(0, r.first);
    columns.columns_after = n - r.first - r.length;
    gemm_blocked(ker, m, r.length, k, a, columns, c_bf16 ? nullptr : c + r.first, ldc, accumulate, in_place, 1,
                 c_bf16 ? c_bf16 + r.first : nullptr);
  });
}

// A small product split over threads by whole row tiles of `set`, as many parts as get
// kSmallWorkPerThread each; run(first, rows) computes C's rows [first, first + rows). K is not
// split, so no element's arithmetic depends on the thread count. bfloat16 K-pair tiles pack A as
// well, and split only over a K of at least kPairsSplitMinK: the MLP's last layer in bf16-mixed,
// two threads, went 56 -> 91 GFLOP/s split at K = 512 (its forward) but 141 -> 116 at K = 10 (dX).
constexpr int64_t kPairsSplitMinK = 64;

template <class RunRows>
void split_small_by_rows(const GemmKernel& set, int64_t m, int64_t work, int64_t k, const RunRows& run) {
  const int64_t tiles = (m + set.mr - 1) / set.mr;
  const int64_t most = set.bf16_pairs && k < kPairsSplitMinK ? 1 : num_threads();
  const int64_t parts = std::min<int64_t>({most, work / kSmallWorkPerThread, tiles});
  if (parts <= 1) return run(0, m);
  parallel_for(parts, [&](int64_t part) {
    const PartRange rows = part_of(m, set.mr, parts, part);
    run(rows.first, rows.length);
  });
}

// c = 0 for a product over K = 0 (nothing to add when accumulating).
void zero_unless_accumulating(int64_t m, int64_t n, float* c, int64_t ldc, bool accumulate) {
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(float));
}

// x (rows × cols, bfloat16) widened exactly into float32 in `scratch`, in its own layout: by
// columns where its columns are contiguous, else by rows.
GemmMatrix widened(PackBuffer& scratch, const GemmMatrix& x, int64_t rows, int64_t cols) {
  const bool by_columns = x.rs == 1 && x.cs != 1;
  float* wide = scratch.get<float>(rows * cols);
  widen_bf16(x, rows, cols, by_columns, wide);
  return by_columns ? GemmMatrix{wide, 1, rows, false} : GemmMatrix{wide, cols, 1, false};
}

}  // namespace

void bias_into_rows(int64_t rows, const void* bias, size_t row_bytes, void* c, int64_t ld_bytes) {
  const int64_t bytes = rows * static_cast<int64_t>(row_bytes);
  const int64_t parts = bytes >= kParallelBiasBytes ? std::min<int64_t>(num_threads(), rows) : 1;
  parallel_for_if(parts > 1, parts, [&](int64_t part) {
    for (int64_t i = rows * part / parts; i < rows * (part + 1) / parts; ++i)
      std::memcpy(static_cast<char*>(c) + i * ld_bytes, bias, row_bytes);
  });
}

bool gemm_reads_b_rows_in_place(const GemmMatrix& b) {
  if (b.bf16 || b.cs != 1) return false;
  const int64_t stride = b.rs * 4;
  return reinterpret_cast<uintptr_t>(b.data) % 64 == 0 && stride % 64 == 0 && stride % 2048 != 0;
}

const char* gemm_kernel_name(CpuIsa isa, bool bf16) {
  static const std::string names[6][2] = {
      {"scalar 4x8 fp32", "scalar 4x8 fp32 (bf16 widened)"},
      {"avx2 6x16 fp32", "avx2 6x16 fp32 (bf16 widened)"},
      {"avx512 6x64 fp32", "avx512 6x64 fp32 (bf16 widened)"},
      {"avx512 6x64 fp32", "avx512 6x64 fp32 (bf16 widened)"},
      {"avx512 6x64 fp32", "avx512_bf16 12x32 bf16 pairs"},
      {"avx512 6x64 fp32", "amx 32x32 bf16 tiles"},
  };
  return names[static_cast<int>(isa)][bf16 ? 1 : 0].c_str();
}

void gemm(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, float* c, int64_t ldc,
          bool accumulate, const float* bias) {
  WEFT_CHECK(a.bf16 == b.bf16, "[gemm] internal: operands of one product must share a dtype");
  WEFT_CHECK(bias == nullptr || !accumulate, "[gemm] internal: a bias is for a product that does not accumulate");
  if (m <= 0 || n <= 0) return;
  // Note [Linear's bias in the tiles]: on the blocked path with float32 tiles, each tile of the
  // first K chunk finds the bias in its rows of C, copied there just before it runs, where linear
  // copied the bias into every row of C before the product: a pass over C from memory, and a
  // fork of its own (2 % of the example GPT's training step; its linears 2-9 % faster on one
  // thread). Every other path and a product over K = 0 take the bias as C's first rows, as before.
  // Either way C = bias + sums, one addition: the same bits.
  auto bias_first = [&] {
    if (bias == nullptr) return;
    bias_into_rows(m, bias, static_cast<size_t>(n) * sizeof(float), c, ldc * static_cast<int64_t>(sizeof(float)));
    accumulate = true;
    bias = nullptr;
  };
  if (k <= 0) {
    bias_first();
    return zero_unless_accumulating(m, n, c, ldc, accumulate);
  }
  const CpuIsa isa = cpu_isa();
  const GemmKernel& ker = kernel_for(isa, a.bf16, n);
  const int64_t work = 2 * m * n * k;
  // Note [Small bfloat16 products]: a kernel set without bf16 pairs widens bfloat16 while packing
  // anyway, and a small product packed whole wastes most of its tiles (N = 10 fills 10 of 16
  // columns) and pays for packing A. So its operands are widened to float32 first, exactly, in
  // their own layout, and the product takes the float32 paths: read in place, split by rows,
  // computed transposed (the MLP's last layer in bf16: forward and dX twice as fast). So does a
  // small product shorter in K than one tile of a set that pads K to whole tiles (AMX: K = 10
  // would be padded to 32).
  if (a.bf16 && (!ker.bf16_pairs || k < 2 * ker.pair_block) && work <= kSmallWork) {
    return gemm(m, n, k, widened(t_widened_a, a, m, k), widened(t_widened_b, b, k, n), c, ldc, accumulate, bias);
  }
  if (!a.bf16 && b.rs == 1 && b.cs != 1 && m <= kTransposedMaxRows && m < n) {
    bias_first();
    return gemm_transposed(kernel_for(isa, false, m), m, n, k, a, b, c, ldc, accumulate);
  }
  if (gemm_transposes_tiles(ker, m, n, k, a, b)) {
    bias_first();
    return gemm_transposed_tiles(ker, m, n, k, a, b, c, ldc, accumulate, nullptr);
  }
  if (work <= kSmallWork) {
    bias_first();
    // Whole row tiles per thread. Each part packs B for itself when B is not row-major: a small
    // product's B is small, and packing it twice costs less than sharing one copy would.
    return split_small_by_rows(ker, m, work, k, [&](int64_t first, int64_t rows) {
      if (a.bf16) gemm_blocked(ker, rows, n, k, a.at(first, 0), b, c + first * ldc, ldc, accumulate, false, 1);
      else gemm_small(ker, rows, n, k, a.at(first, 0), b, c + first * ldc, ldc, accumulate);
    });
  }
  // Note [bfloat16 rows of A widened whole]: a set without pairs widens bfloat16 as it packs, so a
  // bfloat16 A was always packed, where float32 rows (at most kInPlaceRows: a prompt's, a step's
  // batch) are read in place and their tiles fetch the next block of B while they run (Note [The
  // next block of B, fetched]). Such an A is widened whole into float32 rows first (M·K values
  // against M·N·K multiply-adds) and takes the float32 A's path, B still widened as it packs: the
  // same sums in the same order, so the same bits (the 1.1B Llama's x·Wᵀ at 128 rows, weights
  // from memory, 128 × 2048 × 5632: 13.4 → 10.5 ms, float32's pace; its bf16 prefill 115 → 135
  // tokens/s, GPT-2's 1,190-1,230 → 1,345-1,387). Not past kWidenedAValues: the scratch stays with
  // the thread, and an LM head's dX (256 rows of gradients 50,257 long) would keep 51 MB of it.
  BOperand b_biased(b);
  b_biased.bias = bias;
  if (a.bf16 && !ker.bf16_pairs && a.cs == 1 && m <= kInPlaceRows && m * k <= kWidenedAValues)
    return gemm_large(ker, m, n, k, widened(t_widened_a, a, m, k), b_biased, c, ldc, accumulate);
  if (ker.bf16_pairs) {  // their tiles (GemmTileBf16) are not given one
    bias_first();
    b_biased.bias = nullptr;
  }
  gemm_large(ker, m, n, k, a, b_biased, c, ldc, accumulate);
}

bool gemm_stores_bf16(int64_t m, int64_t n, int64_t k) {
  const GemmKernel& ker = kernel_for(cpu_isa(), true, n);
  // The conditions under which gemm() itself would take the K-pair tiles in a single K chunk.
  return ker.stores_bf16 && m > 0 && n > 0 && k >= 2 * ker.pair_block && k <= ker.kc;
}

bool gemm_stores_bf16(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b) {
  const GemmKernel& ker = kernel_for(cpu_isa(), true, n);
  return gemm_stores_bf16(m, n, k) ||
         (ker.stores_bf16 && a.bf16 && b.bf16 && m > 0 && gemm_transposes_tiles(ker, m, n, k, a, b));
}

void gemm_to_bf16(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, uint16_t* c,
                  int64_t ldc, bool accumulate) {
  WEFT_CHECK(a.bf16 && b.bf16 && gemm_stores_bf16(m, n, k, a, b),
             "[gemm] internal: gemm_to_bf16 called for a product gemm_stores_bf16 refuses");
  const GemmKernel& ker = kernel_for(cpu_isa(), true, n);
  const int64_t work = 2 * m * n * k;
  if (gemm_transposes_tiles(ker, m, n, k, a, b))
    return gemm_transposed_tiles(ker, m, n, k, a, b, nullptr, ldc, accumulate, c);
  if (work <= kSmallWork) {
    return split_small_by_rows(ker, m, work, k, [&](int64_t first, int64_t rows) {
      gemm_blocked(ker, rows, n, k, a.at(first, 0), b, nullptr, ldc, accumulate, false, 1, c + first * ldc);
    });
  }
  gemm_large(ker, m, n, k, a, b, nullptr, ldc, accumulate, c);
}

bool gemm_packs_b_ahead(int64_t k, int64_t n) {
  const GemmKernel& ker = kernel_for(cpu_isa(), true, n);
  return ker.bf16_pairs && n > 0 && k >= 2 * ker.pair_block;
}

GemmPackedB gemm_pack_b(int64_t k, int64_t n, const GemmMatrix& b) {
  WEFT_CHECK(b.bf16 && gemm_packs_b_ahead(k, n), "[gemm] internal: gemm_pack_b called for a B it cannot pack ahead");
  GemmPackedB packed;
  pack_b_ahead_into(kernel_for(cpu_isa(), true, n), k, n, b, packed);
  return packed;
}

void gemm_packed(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmPackedB& b, float* c, int64_t ldc,
                 bool accumulate, uint16_t* c_bf16) {
  const GemmKernel& ker = kernel_for(cpu_isa(), true, n);
  WEFT_CHECK(a.bf16 && b.k == k && b.n == n && b.kernel == &ker && b.kc_step == b_chunk_step(ker, k),
             "[gemm] internal: a B packed ahead for another product or instruction-set level");
  WEFT_CHECK(c_bf16 == nullptr || gemm_stores_bf16(m, n, k),
             "[gemm] internal: a bfloat16 C for a product gemm_stores_bf16 refuses");
  if (m <= 0) return;
  const BOperand packed(&b);
  const int64_t work = 2 * m * n * k;
  // The paths gemm() and gemm_to_bf16 take for such a product, so the bits are theirs.
  if (work <= kSmallWork) {
    return split_small_by_rows(ker, m, work, k, [&](int64_t first, int64_t rows) {
      gemm_blocked(ker, rows, n, k, a.at(first, 0), packed, c_bf16 ? nullptr : c + first * ldc, ldc, accumulate,
                   false, 1, c_bf16 ? c_bf16 + first * ldc : nullptr);
    });
  }
  gemm_large(ker, m, n, k, a, packed, c, ldc, accumulate, c_bf16);
}

void gemm(int64_t m, int64_t n, int64_t k, const GemmBlockSource& a, const GemmMatrix& b, float* c, int64_t ldc,
          bool accumulate) {
  WEFT_CHECK(b.bf16 == a.bf16, "[gemm] internal: a product with A from a source takes a B of the source's dtype");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return zero_unless_accumulating(m, n, c, ldc, accumulate);
  gemm_large(kernel_for(cpu_isa(), a.bf16, n), m, n, k, AOperand(&a), b, c, ldc, accumulate);
}

void gemm(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmBlockSource& b, bool b_source_transposed,
          float* c, int64_t ldc, bool accumulate) {
  WEFT_CHECK(a.bf16 == b.bf16, "[gemm] internal: a product with B from a source takes an A of the source's dtype");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return zero_unless_accumulating(m, n, c, ldc, accumulate);
  gemm_large(kernel_for(cpu_isa(), b.bf16, n), m, n, k, a, BOperand(&b, b_source_transposed), c, ldc, accumulate);
}

}  // namespace weft::detail
