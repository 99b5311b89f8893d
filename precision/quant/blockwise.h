// Blockwise quantization of whole tensors, as bitsandbytes.functional spells it: 4-bit NF4/FP4
// (quantize_4bit / dequantize_4bit, optionally with double quantization) and 8-bit dynamic
// (quantize_blockwise / dequantize_blockwise, optionally nested).
//
// A tensor is quantized as one flat run of values in row-major order (blocks cross rows when the
// row length is not a multiple of the block size). The QuantState holds everything needed to get
// the values back, named as bitsandbytes names it, so it saves to and loads from the state-dict
// keys bitsandbytes uses (precision/quant/quant_state.h).
//
// Double quantization ("compress_statistics", QLoRA's DQ) stores the float32 absmax of the 4-bit
// blocks as int8_dynamic codes of (absmax - offset) in blocks of 256, where offset is their mean;
// the nested blocks keep their own float32 absmax. 8-bit nested statistics do the same with the
// outer block size. Decoding adds the offset back in float32.
#pragma once

#include <cstdint>
#include <utility>

#include "precision/quant/quant_format.h"
#include "tensor/tensor.h"

namespace weft::precision::quant {

inline constexpr int64_t kNestedBlockSize4bit = 256;

struct QuantState {
  QuantKind type = QuantKind::NF4;  // NF4, FP4 or Int8Dynamic
  int64_t blocksize = 64;
  Shape shape;                      // of the tensor that was quantized
  DType dtype = kFloat32;           // of that tensor; dequantize returns it
  Tensor absmax;                    // float32 per block, or uint8 codes when nested
  Tensor code;                      // the format's table as float32 (bitsandbytes' quant_map)
  bool nested = false;
  float offset = 0.0f;              // mean of the absmax values subtracted before nesting
  Tensor nested_absmax;             // float32, one per nested block
  Tensor nested_code;               // the dynamic map
  int64_t nested_blocksize = 0;
  DType nested_dtype = kFloat32;

  int64_t numel() const;
  int64_t num_blocks() const { return (numel() + blocksize - 1) / blocksize; }
};

// x: a float32, float16 or bfloat16 tensor of any shape -> (packed codes, uint8 ((n + 1) / 2, 1);
// state). type is NF4 or FP4; blocksize a power of two in [32, 4096].
std::pair<Tensor, QuantState> quantize_4bit(const Tensor& x, QuantKind type, int64_t blocksize = 64,
                                            bool compress_statistics = false);
// The 4-bit quantization of zeros of `shape` and `dtype` (a layer's stand-in until a checkpoint
// replaces it): every code and every block absmax 0 (nested: codes 0 of nested blocks whose
// absmax is 0, offset 0), so it dequantizes to zeros. The codes and the statistics sized by the
// weight are zero_pages (tensor/cpu/exact_memory.h): they take no resident memory until written.
// The codes are not quantize_4bit's bytes for zeros (nf4 encodes 0 as code 7), only its values.
struct ZeroQuantized4bit {
  Tensor packed;        // uint8 ((n + 1) / 2, 1)
  QuantState state;
  Tensor block_absmax;  // float32 (num_blocks,): block_absmax(state), without computing it
};
ZeroQuantized4bit zero_4bit(const Shape& shape, DType dtype, QuantKind type, int64_t blocksize = 64,
                            bool compress_statistics = false);
// -> a tensor of state.shape and state.dtype.
Tensor dequantize_4bit(const Tensor& packed, const QuantState& state);

// x -> (codes, uint8 of x's shape; state). blocksize a power of two in [64, 4096].
std::pair<Tensor, QuantState> quantize_blockwise(const Tensor& x, int64_t blocksize = 4096, bool nested = false);
Tensor dequantize_blockwise(const Tensor& codes, const QuantState& state);

// The float32 absmax of every block, decoding nested statistics: (num_blocks,).
Tensor block_absmax(const QuantState& state);

// Throws weft::Error naming `op` when state's tensors do not fit together (sizes, dtypes), so a
// state loaded from a file cannot make a kernel read out of bounds.
void check_quant_state(const QuantState& state, const Tensor& codes, const char* op);

}  // namespace weft::precision::quant
