// The launch functions of precision/cuda/fp8_cast_kernels.cu and
// precision/cuda/fp8_scaling_kernels.cu and the plain arguments they take (no Tensor, no CUDA
// header). Every pointer is device memory; the kernels follow precision/fp8/fp8_cast_kernels.h
// and precision/fp8/fp8_scaling_kernels.h.
#pragma once

#include <cstdint>

#include "precision/fp8/fp8_kernels.h"
#include "tensor/cuda/launch.h"

namespace weft::precision::cuda_detail {

using weft::cuda::detail::StreamHandle;

// codes[i] = fp8(src[i] · scale) for i < n, src float32 or (src_bf16) bfloat16 bits.
struct Fp8CastArgs {
  const void* src;
  bool src_bf16;
  uint8_t* codes;      // null: amax only
  uint16_t* decoded;   // null, or the bfloat16 bits of each code's value
  int64_t n;
  float scale;         // used when scale_on_device is null
  const float* scale_on_device;
  float* scale_inv;    // null, or receives 1 / scale
  float* amax;         // null, or amax ← nan_max(amax, max |src|)
  uint32_t* amax_bits; // one word of scratch, zeroed by the caller, when amax is set
  bool e5m2;
  bool saturate;
};
void launch_fp8_cast(const Fp8CastArgs& a, StreamHandle stream);

// out[i] = value(codes[i]) · scale_inv: the CPU kernels' own arguments (precision/fp8/fp8_kernels.h).
void launch_fp8_dequantize(const weft::detail::Fp8DecodeArgs& a, StreamHandle stream);

// One role's DelayedScaling update: column[r · stride] is row r of its amax history (len rows);
// scale and scale_inv point at the role's own entries.
struct Fp8DelayedUpdateArgs {
  float* column;
  int64_t len;
  int64_t stride;
  float* scale;
  float* scale_inv;
  bool most_recent;
  float fp8_max;
  int margin;
};
void launch_fp8_delayed_update(const Fp8DelayedUpdateArgs& a, StreamHandle stream);

// One role's Float8CurrentScaling scale from *amax.
struct Fp8CurrentScaleArgs {
  const float* amax;
  float* scale;
  float* scale_inv;
  float fp8_max;
  float amax_epsilon;
  bool power_2_scale;
};
void launch_fp8_current_scale(const Fp8CurrentScaleArgs& a, StreamHandle stream);

}  // namespace weft::precision::cuda_detail
