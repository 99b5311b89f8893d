// The scaled FP8 casts on CUDA (precision/fp8/fp8_cast_kernels.h): one grid-stride pass per cast
// through the codecs of tensor/narrow_codec.h, the CPU's own round-to-nearest-even bit code (no
// __nv_fp8 intrinsic, so the result owes nothing to the intrinsics' saturation rules).
//
// Note [FP8 products on the device]: the codes must equal the CPU's for every input, NaN's sign
// included (an FP8 NaN code keeps it). The scale multiply is one float32 multiply rounded to
// nearest (__fmul_rn, never contracted), and its NaN results are made the CPU's: x86 returns a
// NaN operand quieted with its sign (the source's first), and for ±Inf·0 its default NaN, which
// is negative; the GPU's multiply would give a positive canonical NaN instead.
//
// The amax is reduced on the device: |x| as bits is a non-negative integer whose order is the
// floats' with every NaN above Inf, so each block folds its integer maximum into one word of
// scratch with atomicMax, and a one-thread kernel maxes that into the caller's amax the way the
// CPU does (fp8_nan_max). The amax is a NaN whenever the CPU's is, though not always with the
// same payload.
#include <cuda_runtime.h>

#include "precision/cuda/fp8_launch.h"
#include "precision/fp8/fp8_scaling_rules.h"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"
#include "tensor/narrow_codec.h"

namespace weft::precision::cuda_detail {
namespace {

using weft::cuda::detail::blocks_for;
using weft::cuda::detail::kThreads;
using weft::detail::bits_float;
using weft::detail::float_bits;

constexpr int kWarp = 32;

__device__ inline float quieted(float nan) { return bits_float(float_bits(nan) | 0x00400000u); }

// x · y as the CPU computes it (Note [FP8 products on the device]).
__device__ inline float cpu_product(float x, float y) {
  if (detail::fp8_rule_is_nan(x)) return quieted(x);
  if (detail::fp8_rule_is_nan(y)) return quieted(y);
  const float p = __fmul_rn(x, y);
  return detail::fp8_rule_is_nan(p) ? bits_float(0xFFC00000u) : p;
}

__device__ inline uint8_t encode(float v, bool e5m2, bool saturate) {
  return e5m2 ? weft::detail::encode_e5m2(v, saturate) : weft::detail::encode_e4m3(v, saturate);
}

__device__ inline float decode(uint8_t code, bool e5m2) {
  return e5m2 ? weft::detail::decode_e5m2(code) : weft::detail::decode_e4m3(code);
}

__device__ inline uint32_t larger(uint32_t a, uint32_t b) { return a > b ? a : b; }

// Folds the block's largest `value` into *out (one atomicMax per block); blockDim.x == kThreads.
__device__ void block_max_into(uint32_t value, uint32_t* out) {
  __shared__ uint32_t warp_largest[kThreads / kWarp];
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = larger(value, __shfl_down_sync(0xFFFFFFFFu, value, offset));
  if (threadIdx.x % kWarp == 0) warp_largest[threadIdx.x / kWarp] = value;
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint32_t largest = 0;
  for (int w = 0; w < kThreads / kWarp; ++w) largest = larger(largest, warp_largest[w]);
  atomicMax(out, largest);
}

__global__ void fp8_cast_kernel(Fp8CastArgs a) {
  const float scale = a.scale_on_device ? *a.scale_on_device : a.scale;
  if (a.scale_inv && blockIdx.x == 0 && threadIdx.x == 0) *a.scale_inv = __fdiv_rn(1.0f, scale);
  uint32_t largest = 0;
  WEFT_GRID_LOOP(i, a.n) {
    const float x = a.src_bf16 ? weft::detail::decode_bfloat16(static_cast<const uint16_t*>(a.src)[i])
                               : static_cast<const float*>(a.src)[i];
    largest = larger(largest, float_bits(x) & 0x7FFFFFFFu);
    if (!a.codes) continue;
    const uint8_t code = encode(cpu_product(x, scale), a.e5m2, a.saturate);
    a.codes[i] = code;
    if (a.decoded) a.decoded[i] = weft::detail::encode_bfloat16(decode(code, a.e5m2));
  }
  if (a.amax_bits) block_max_into(largest, a.amax_bits);
}

__global__ void fold_amax_kernel(const uint32_t* amax_bits, float* amax) {
  *amax = detail::fp8_nan_max(*amax, bits_float(*amax_bits));
}

__global__ void fp8_dequantize_kernel(weft::detail::Fp8DecodeArgs a) {
  WEFT_GRID_LOOP(i, a.n) {
    const float v = cpu_product(decode(a.codes[i], a.e5m2), a.scale_inv);
    if (a.out_f32) a.out_f32[i] = v;
    else a.out_bf16[i] = weft::detail::encode_bfloat16(v);
  }
}

}  // namespace

void launch_fp8_cast(const Fp8CastArgs& a, StreamHandle stream) {
  // Launched for n = 0 too: scale_inv and the amax are still written.
  fp8_cast_kernel<<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  weft::cuda::detail::check_launch("fp8_cast");
  if (!a.amax) return;
  fold_amax_kernel<<<1, 1, 0, stream>>>(a.amax_bits, a.amax);
  weft::cuda::detail::check_launch("fp8_cast");
}

void launch_fp8_dequantize(const weft::detail::Fp8DecodeArgs& a, StreamHandle stream) {
  if (a.n == 0) return;
  fp8_dequantize_kernel<<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  weft::cuda::detail::check_launch("fp8_dequantize");
}

}  // namespace weft::precision::cuda_detail
