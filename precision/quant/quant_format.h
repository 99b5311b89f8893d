// QuantFormat: the one table of weft's quantized formats, one row per format, as ggml keeps its
// block types — name, block size, bytes per block, and the scalar reference quantize and
// dequantize that every fast kernel and every higher-level function is checked against.
//
// Every format here is blockwise absmax quantization: a run of values is cut into blocks (the
// last may be shorter), each block keeps its largest magnitude as a float32 `absmax`, and each
// value becomes the code whose table entry is nearest to value / absmax. The rows:
//
//   nf4           4-bit NormalFloat codes, two per byte (first value in the high nibble);
//                 blocks of 32..4096, default 64
//   fp4           bitsandbytes' 4-bit float codes, packed the same way; same block sizes
//   int8_dynamic  8-bit codes of the signed dynamic map (8-bit blockwise quantization and the
//                 nested statistics of double quantization); blocks of 64..4096, default 4096
//   llm_int8      LLM.int8()'s vector-wise int8: a block is one row, code = round(127·x/absmax)
//                 as a signed byte (outlier handling lives in llm_int8.h)
//
// The reference kernels reproduce bitsandbytes 0.50's CPU backend bit for bit — the codes, the
// absmax values and the dequantized floats (tests/precision/data, scripts/golden_bnb.py). Where
// that backend's rounding rules differ between formats, each row follows the library (see
// precision/quant/README.md): 4-bit codes round to the nearest table entry with ties to the lower
// one, after scaling full blocks by the reciprocal of absmax and the partial last block by a
// division; 8-bit codes go through the library's 65536-entry lookup table.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace weft::precision::quant {

enum class QuantKind : uint8_t { NF4, FP4, Int8Dynamic, LlmInt8 };

struct QuantFormat {
  QuantKind kind;
  std::string_view name;
  int bits;                    // per value
  int64_t default_block_size;  // values per block; 0 for llm_int8, where a block is a row
  int64_t min_block_size;      // allowed block sizes are the powers of two in [min, max]
  int64_t max_block_size;
  // Quantizes n values in blocks of `block`: writes packed codes (n·bits/8 bytes, rounded up) and
  // one absmax per block (ceil(n / block)).
  void (*quantize)(const float* x, int64_t n, int64_t block, uint8_t* codes, float* absmax);
  // The inverse: n float32 values from the codes and the absmax of each block.
  void (*dequantize)(const uint8_t* codes, const float* absmax, int64_t n, int64_t block, float* out);
};

std::span<const QuantFormat> quant_formats();
// The row for a kind, or for a name (throws weft::Error listing the names otherwise).
const QuantFormat& quant_format(QuantKind kind);
const QuantFormat& quant_format(std::string_view name);

// Bytes n values take in `format` with blocks of `block`: codes plus a float32 absmax per block.
int64_t quantized_bytes(const QuantFormat& format, int64_t n, int64_t block);
// Throws weft::Error naming `op` unless `block` is a power of two the format allows.
void check_block_size(const QuantFormat& format, int64_t block, std::string_view op);

// How the 4-bit formats find a value's code, for the vector kernels that follow the reference: the
// 15 midpoints between the sorted table's neighbours (ascending) and the code of each of the 16
// sorted entries. A scaled value's code is code_of[number of midpoints strictly below it].
struct Table4bitSearch {
  const float* bounds;
  const uint8_t* code_of;
};
Table4bitSearch table_4bit_search(QuantKind kind);
// What each of a 4-bit format's codes decodes to, as bitsandbytes' scalar CPU kernel decodes it
// (FP4's code 0b1000 as -0; its AVX-512 and generic paths give +0: fp4_cpu_decode_code in
// codebooks.h). Every weft decoder uses it.
const std::array<float, 16>& table_4bit_decode(QuantKind kind);

// max |x[i]| over n values (0 for none), NaN if any is NaN, as torch.max of abs() returns.
float absmax_of(const float* x, int64_t n);

// x rounded to an integer, ties to even, for |x| < 2²²: adding and subtracting 1.5 · 2²³ leaves
// x's integer part rounded in the default rounding mode, as std::nearbyint does, but without its
// library call, so the loops that use it vectorise.
inline float round_half_even(float x) {
  constexpr float kShift = 12582912.0f;
  return (x + kShift) - kShift;
}

}  // namespace weft::precision::quant
