// The vector kernels of SiLU and its gradient (tensor/cpu/silu/silu.cpp chooses among them at
// run time; Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations, for the kernel
// units.
//
// Each performs the float32 operations of the scalar reference (unary_scalar<Silu> and
// binary_scalar<SiluBackward> in tensor/elementwise_math.h, with sigmoid_arith) in the same order,
// without fused multiply-adds, so it gives the reference's bits (tests/tensor/test_silu_kernels.cpp
// checks every level). Arrays are contiguous, n elements; `bf16` says they hold bfloat16 bits
// (widened as they are read, the float32 result rounded to nearest even as the copy kernels round).
#pragma once

#include <cstdint>

namespace weft::detail {

// y = silu(x)
void silu_forward_avx512(const void* x, void* y, int64_t n, bool bf16);
// dx = grad · silu'(x)
void silu_backward_avx512(const void* grad, const void* x, void* dx, int64_t n, bool bf16);

}  // namespace weft::detail
