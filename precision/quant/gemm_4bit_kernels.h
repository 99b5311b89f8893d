// Entry points of the fused 4-bit dequantize-and-multiply kernel units (gemm_4bit_<isa>.cpp),
// chosen at run time by gemm_4bit.cpp. Plain declarations only (Note [ISA kernel units] in
// tensor/cpu/simd.h).
//
// Note [4-bit product layout]
// Weights stay in bitsandbytes' layout: row n of W (N, K) is K/2 bytes, value 2j in the high
// nibble of byte j and 2j+1 in the low one, one float32 absmax per block of `blocksize` values.
// A kernel row is whole blocks, `k` values from a block's start (where K is not a multiple of the
// block size, more than the weight row: Note [Blocks across rows] in gemm_4bit.cpp), and the
// panel's rows lie w_stride bytes apart. The kernels read 32 bytes (64
// values) at a time and split them into the high nibbles (even values) and the low nibbles (odd
// values), so the activations are prepared in the same order: within every 64 values, the 32
// even-indexed ones first, then the 32 odd-indexed ones. Per activation row and block they are
// quantized to int8 (q = round(x · (127 / max|x|)), 0 where 127 / max|x| is not finite) with:
//   q      the codes, permuted as above
//   q_abs  |q|, for the vpmaddubsw kernels (unsigned operand)
//   q_sum  Σ q over the block, for the VNNI kernel's +128 compensation
//   scale  max|x| / 127², so that  Σ_blocks absmax_w · scale · Σ t·q  approximates x · wᵀ
// where t = round(127 · table[code]) is the format's table as int8.
#pragma once

#include <cstdint>

namespace weft::precision::quant::kernels {

struct Gemm4bitArgs {
  const uint8_t* w;        // packed weights of this panel's first row
  int64_t w_stride;        // bytes from one of the panel's rows to the next (k / 2 when K is whole blocks)
  const float* absmax;     // the block absmax of the panel's first row
  int64_t absmax_stride;   // blocks from one of the panel's rows to the next
  int64_t rows;            // weight rows (outputs) in the panel
  int64_t k;               // values per kernel row; a multiple of blocksize
  int64_t blocksize;       // 32 (two blocks to a step of 64 values) or a multiple of 64
  const int8_t* table;     // 16 entries: round(127 · table[code])
  const int8_t* q;         // prepared activations, row stride k
  const uint8_t* q_abs;    // row stride k
  const int32_t* q_sum;    // row stride k / blocksize
  const float* scale;      // row stride k / blocksize
  int64_t m;               // activation rows
  float* y;                // y[i · y_stride + n · y_col_stride] for activation row i, the panel's row n
  int64_t y_stride;
  int64_t y_col_stride;
  // One activation row in blocks of 64 at the VNNI level: its first k / 512 · 512 values again in
  // the pair layout (Note [Two steps to a vector]), which the kernel then takes; nullptr elsewhere.
  const int8_t* q_pairs;
  const int32_t* pair_compensation;  // 16 per 8 blocks
  const float* pair_scale;           // 16 per 8 blocks
};

// Note [Two steps to a vector]
// A batch-1 product (GEMV) in blocks of 64 at the VNNI level reads 64 bytes of W, two 64-value
// steps, at once: one vector of their high nibbles (the even values of both steps) and one of
// their low nibbles (the odd values), so the activations come in pairs of steps as
//   q_pairs:  evens of step 2s, evens of step 2s + 1, odds of step 2s, odds of step 2s + 1
// (32 bytes each), and a vpdpbusd's int32 lanes 0-7 belong to step 2s's block, 8-15 to the next.
// Four such vectors (eight blocks) are folded into one (fold4_epi32 in simd.h), whose lane l holds
// part of block kPairLaneBlock[l] of the eight: the compensation 128 · q_sum of each block is
// taken off the first of its two 128-bit lanes only (lanes 0-3 and 8-11; zero in the others), and
// every lane is scaled by its block's absmax times the activation scale. q_pairs,
// pair_compensation and pair_scale (lane l: scale of block kPairLaneBlock[l]) are prepared once
// per product by gemm_4bit.cpp; the blocks after the last whole eight read q as usual.
constexpr int32_t kPairLaneBlock[16] = {0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7};

// How far ahead of the 32 bytes in hand the kernels fetch W: one thread's single stream of W's
// rows used half the memory's bandwidth once the weights outgrew the last-level cache (16384 ×
// 32768: 14.5 GB/s of packed weights, against 20.5-21.6 with the prefetch).
constexpr int64_t kWeightPrefetchBytes = 2048;

// y[i, n] = Σ_blocks absmax[n, b] · scale[i, b] · Σ_{k in b} t[w[n, k]] · q[i, k]
// The fewest activation rows for which the VNNI kernel takes 16 weight rows as its lanes (Note
// [Weight rows as lanes] in gemm_4bit_avx512vnni.cpp). With its accumulators in registers it wins
// from two rows (4096², 2 threads, Zen 5: 2 / 3 / 4 rows 0.164 / 0.217 / 0.277 ms by rows, 0.141 /
// 0.161 / 0.187 as lanes; the example's 512 × 784, 2 rows: 0.0165 and 0.0105); one row is a GEMV.
constexpr int64_t kLanesMinRows = 2;

void gemm_4bit_panel_avx2(const Gemm4bitArgs& args);
void gemm_4bit_panel_avx512(const Gemm4bitArgs& args);
void gemm_4bit_panel_avx512vnni(const Gemm4bitArgs& args);

// The activations' preparation (the layout above): m rows of k values, k a multiple of 64 and of
// blocksize, quantized per block into q, q_abs (row stride k), q_sum and scale (row stride
// k / blocksize). The bytes of the scalar reference, prepare_reference() in gemm_4bit.cpp.
struct Prepare4bitArgs {
  const float* x;  // (m, k), row stride k
  int64_t m, k, blocksize;
  int8_t* q;
  uint8_t* q_abs;
  int32_t* q_sum;
  float* scale;
};

void prepare_4bit_avx2(const Prepare4bitArgs& args);

// Note [Exact 4-bit product]
// The default product for a few activation rows (Product4bit::Exact): y[i, n] = Σ_k w(n, k) ·
// x[i, k] in float32, where w(n, k) = table[code] · absmax[block] rounded to float32 — exactly
// dequantize_4bit's value. The kernels read each weight row's 32-byte chunks (64 values) once,
// look the codes up in the 16-entry float table already multiplied by the chunk's block absmax
// (one multiplication per block, the same float32 product per value) and FMA them with every
// activation row. They need K and the block size multiples of 64, so that every chunk lies in one
// block (rows may still start inside a block: row n's chunk c is block (n·K + c) / blocksize).
// The activations come permuted as the int8 kernels' (Note [4-bit product layout]): within every
// 64 values the 32 even-indexed ones, then the 32 odd-indexed ones, in float32.
struct Gemm4bitExactArgs {
  const uint8_t* packed;  // the whole weight, (N · K) / 2 bytes
  const float* absmax;    // the whole weight's block absmax
  const float* table;     // the format's 16 float32 values
  int64_t k, blocksize;   // both multiples of 64
  int64_t n0, rows;       // the weight rows [n0, n0 + rows) this call computes
  const float* x;         // (m, k) permuted activations, row stride k
  int64_t m;
  float* y;               // y[i · y_stride + n] for activation row i and weight row n
  int64_t y_stride;
};

void gemm_4bit_exact_avx2(const Gemm4bitExactArgs& args);
void gemm_4bit_exact_avx512(const Gemm4bitExactArgs& args);

// A run of values of a packed 4-bit array, [begin, end) of the flat index: value i is
//   table[code(i)] · absmax[i / blocksize]
// where code(i) is the high nibble of byte i/2 for even i and the low nibble for odd i.
struct Dequant4bitRun {
  const uint8_t* packed;
  const float* absmax;
  const float* table;  // 16 float32 values
  int64_t blocksize;
  int64_t begin, end;
};

// The run dequantized in float32, out[i - begin] = value i: one rounding per value, so every
// kernel gives the scalar reference's bits.
struct Dequant4bitArgs : Dequant4bitRun {
  float* out;
};

void dequantize_4bit_avx2(const Dequant4bitArgs& args);
void dequantize_4bit_avx512(const Dequant4bitArgs& args);

// The run rounded to bfloat16, for a product in bfloat16: out[i - begin] = bits of bf16(value i),
// rounded to nearest even, NaN -> 0x7FC0, as float_to_bfloat16 rounds.
struct Dequant4bitBf16Args : Dequant4bitRun {
  uint16_t* out;
};

void dequantize_4bit_bf16_avx512(const Dequant4bitBf16Args& args);

}  // namespace weft::precision::quant::kernels
