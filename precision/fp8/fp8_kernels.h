// The FP8 kernels' entry points, one set per instruction set (Note [ISA kernel units] in
// tensor/cpu/simd.h): the scalar reference (fp8_kernels_scalar.cpp) and the AVX2 and AVX-512
// units. fp8_dispatch.h picks one set from cpu_isa(); the callers (fp8_cast_kernels.cpp,
// fp8_gemm.cpp) split the work over threads.
//
// Every kernel computes exactly what the scalar reference computes, bit for bit: the FP8 encode
// rounds to nearest even (tensor/float_formats.h is the reference of the reference), the decode is
// exact, and the amax is a maximum, which does not depend on the order of the elements.
//
// Note [FP8 amax]: amax is max |x| over the source *before* scaling, NaN-propagating (a NaN
// anywhere makes it NaN, as torch.amax does), so that the scaling recipes see a broken tensor
// and keep their old scale (precision/fp8/fp8_meta.h) instead of ignoring it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

// codes[i] = fp8(src[i] · scale), i < n, with the source read as float32 or as bfloat16 bits.
// saturate: out-of-range values (and ±Inf) become ±max finite (CUDA's satfinite, what
// TransformerEngine casts with); otherwise NaN (E4M3) or ±Inf (E5M2).
// decoded, when not null, receives the bfloat16 bits of each code's value (unscaled; exact: every
// FP8 value is a bfloat16 value), so a GEMM can use the rounded operand without a second pass.
struct Fp8EncodeArgs {
  const void* src;
  bool src_bf16;
  uint8_t* codes;
  uint16_t* decoded;
  int64_t n;
  float scale;
  bool e5m2;
  bool saturate;
};

// out[i] = value(codes[i]) · scale_inv, as float32 (out_f32) or rounded to bfloat16 (out_bf16);
// exactly one of the two is set. With scale_inv = 1 the bfloat16 output is exact.
struct Fp8DecodeArgs {
  const uint8_t* codes;
  float* out_f32;
  uint16_t* out_bf16;
  int64_t n;
  float scale_inv;
  bool e5m2;
};

// The FP8 GEMM's epilogue over rows of its float32 accumulator acc (rows, cols), row-major:
// out[i, j] = fma(acc[i, j], scale, bias[j]), one rounding (bias null: 0), written as float32
// (out_f32, which may be acc itself) or rounded to nearest even bfloat16 (out_bf16).
struct Fp8EpilogueArgs {
  const float* acc;
  const float* bias;
  float* out_f32;
  uint16_t* out_bf16;
  int64_t rows;
  int64_t cols;
  float scale;
};

// Each encode returns the amax of its source (Note [FP8 amax]); fp8_amax_* compute only that.
float fp8_encode_scalar(const Fp8EncodeArgs& args);
void fp8_decode_scalar(const Fp8DecodeArgs& args);
float fp8_amax_scalar(const void* src, bool src_bf16, int64_t n);
void fp8_epilogue_scalar(const Fp8EpilogueArgs& args);

float fp8_encode_avx2(const Fp8EncodeArgs& args);
void fp8_decode_avx2(const Fp8DecodeArgs& args);
float fp8_amax_avx2(const void* src, bool src_bf16, int64_t n);
void fp8_epilogue_avx2(const Fp8EpilogueArgs& args);

float fp8_encode_avx512(const Fp8EncodeArgs& args);
void fp8_decode_avx512(const Fp8DecodeArgs& args);
float fp8_amax_avx512(const void* src, bool src_bf16, int64_t n);
void fp8_epilogue_avx512(const Fp8EpilogueArgs& args);

}  // namespace weft::detail
