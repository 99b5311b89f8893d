// The vector kernels of the optimizers' fused updates (optim/adam.cpp, optim/sgd.cpp), chosen at
// run time (Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations, for the kernel units.
#pragma once

#include <cstdint>

namespace weft::optim::detail {

// One block of n float32 elements: parameter p, gradient g, moments m and v, and v_max under
// amsgrad (null otherwise), with the step's scalars already rounded to float32. The formulas and
// the scalar reference are adam_update in optim/adam.cpp; a vector kernel performs the same
// operations in the same order, so it rounds identically.
struct AdamBlockF32 {
  float* p;
  const float* g;
  float* m;
  float* v;
  float* v_max;
  int64_t n;
  bool decoupled;      // AdamW: p *= decay_factor
  bool coupled_decay;  // Adam with weight decay: g += weight_decay · p
  float weight_decay, decay_factor;
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float neg_step_size, inv_bias_correction2_sqrt, eps;
};

void adam_block_avx2(const AdamBlockF32& block);
void adam_block_avx512(const AdamBlockF32& block);

// The same block in float64 (the 64-true precision): the same operations in the same order, with
// no careful path. float64's denormals start at 2^-1022, which a moment decaying by β1 = 0.9 from
// 10^-3 reaches after ~6,600 steps of zero gradient; the scalar path pays the same assists there.
struct AdamBlockF64 {
  double* p;
  const double* g;
  double* m;
  double* v;
  double* v_max;
  int64_t n;
  bool decoupled;
  bool coupled_decay;
  double weight_decay, decay_factor;
  double beta1, one_minus_beta1, beta2, one_minus_beta2;
  double neg_step_size, inv_bias_correction2_sqrt, eps;
};

void adam_block_avx2(const AdamBlockF64& block);
void adam_block_avx512(const AdamBlockF64& block);

// One block of n float32 elements of SGD: parameter p, gradient g, and the momentum buffer (null
// without momentum), with the step's scalars rounded to float32. The formulas and the scalar
// reference are sgd_update in optim/sgd.cpp, performed in the same order.
struct SgdBlockF32 {
  float* p;
  const float* g;
  float* buf;
  int64_t n;
  bool first_step;  // buf = d (the buffer's first step)
  bool nesterov;
  bool decay;       // d = g + weight_decay · p
  float weight_decay, momentum, one_minus_dampening, neg_lr;
};

void sgd_block_f32_avx2(const SgdBlockF32& block);
void sgd_block_f32_avx512(const SgdBlockF32& block);

}  // namespace weft::optim::detail
