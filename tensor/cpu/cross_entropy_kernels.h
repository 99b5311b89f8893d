// Vector kernels for the rows of the CPU cross-entropy over float32 logits (tensor/cpu/fused.cpp,
// whose scalar loops are the reference), chosen at run time (Note [ISA kernel units] in
// tensor/cpu/simd.h). Plain declarations.
//
// A GPT-2 step's logits are 256 rows of 50,257: the scalar loops called std::exp once per logit,
// forward and backward, ~8 % of a bf16-mixed step. These take 16 logits per step with the fused
// attention's exp (exp_x16 in tensor/cpu/simd.h, within 2 ulp of std::exp); sums stay in double, in
// another order than the scalar loop's.
#pragma once

#include <cstdint>

namespace weft::detail {

// The statistics of a row x[0..n) the loss needs: its largest value (std::max's order: a NaN
// after the first value is passed over), then Σ exp(x[c] − shift) and Σ x[c], both in double.
// shift is the largest value, or 0 where that is −inf (an all −inf row).
struct CrossEntropyRowSums {
  float max;
  double exp_sum, sum;
};
CrossEntropyRowSums cross_entropy_row_sums_avx512(const float* x, int64_t n);

// out[c] = grad · ((exp(x[c] − lse) − smooth) − (c == target ? hit : 0)) for c < n; target may
// lie outside [0, n) (no lane gets hit).
void cross_entropy_row_grad_avx512(const float* x, int64_t n, float lse, float grad, float smooth, int64_t target,
                                   float hit, float* out);

}  // namespace weft::detail
