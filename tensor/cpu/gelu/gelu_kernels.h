// The vector kernels of the tanh GELU and its gradient (tensor/cpu/gelu/gelu.cpp chooses among
// them at run time; Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations, for the
// kernel units.
//
// Each performs the float32 operations of the scalar reference (unary_scalar<GeluTanh> and
// binary_scalar<GeluTanhBackward> in tensor/elementwise_math.h, with tanh_arith) in the same order,
// without fused multiply-adds, so it gives the reference's bits (tests/tensor/test_gelu_kernels.cpp
// checks every level). Arrays are contiguous, n elements; `bf16` says they hold bfloat16 bits
// (widened as they are read, the float32 result rounded to nearest even as the copy kernels round).
#pragma once

#include <cstdint>

namespace weft::detail {

// y = gelu_tanh(x), and the formula's tanh into t (float32) unless t is null
void gelu_tanh_forward_avx512(const void* x, void* y, float* t, int64_t n, bool bf16);
// dx = grad · gelu_tanh'(x), with the forward's tanh from t unless t is null (then computed)
void gelu_tanh_backward_avx512(const void* grad, const void* x, const float* t, void* dx, int64_t n, bool bf16);

// float32 only (bfloat16 on an AVX2 CPU takes the scalar reference).
void gelu_tanh_forward_avx2(const float* x, float* y, float* t, int64_t n);
void gelu_tanh_backward_avx2(const float* grad, const float* x, const float* t, float* dx, int64_t n);

}  // namespace weft::detail
