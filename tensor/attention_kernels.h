// The fused attention kernels' contract: what scaled_dot_product_attention (tensor/attention.cpp)
// hands a device's forward and backward kernel, and the registries that hold them (Note [Linking
// kernels by reference] in tensor/kernel_registry.h). The CPU kernels are in
// tensor/cpu/attention/attention.cpp, the CUDA ones in tensor/cuda/attention.cu.
//
// Shapes, after the front end has broadcast the batch dims and flattened them into N:
//   q: (N, Hq, L, E), k: (N, Hk, S, E), v: (N, Hk, S, Ev), Hq a multiple of Hk (query head h
//   reads key/value head h / (Hq/Hk)), any strides; one dtype: float32, bfloat16 or float16.
//   mask: undefined, or (N, Hq, L, S) of bool (true keeps) or a floating dtype (added to the
//   scores), any strides (broadcast dims have stride 0).
//   out: (N, Hq, L, Ev) of q's dtype, written through its strides; lse: (N, Hq, L) float32
//   contiguous, the log-sum-exp of each row's scaled, masked scores (+inf for a row with no
//   position kept, whose output is 0).
// Scores are q·kᵀ·scale (+ mask); `is_causal` keeps key j for query i when j <= i. Every sum is
// in float32; narrow outputs are rounded once.
//
// Note [Attention dropout stream]: with dropout_p > 0 the weight of query i and key j in head
// (n, h) is kept when philox_uniform_at(key, ((n·Hq + h)·S + j)·L + i) < 1 − dropout_p
// (tensor/philox.h) and then scaled by 1/(1 − dropout_p). Consecutive queries take consecutive
// counters because the kernels hold query rows in vector lanes. The backward regenerates the
// same mask from the same key; nothing is stored.
#pragma once

#include <cstdint>

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::detail {

struct AttentionForward {
  Tensor q, k, v, mask;
  Tensor out, lse;
  double scale;
  bool is_causal;
  double dropout_p;
  uint64_t dropout_key;
};

// The gradients of the forward above (grad_out like out): grad_q, grad_k, grad_v are allocated
// contiguous in q's dtype with q's, k's and v's shapes; every one is written.
struct AttentionBackward {
  Tensor q, k, v, mask, out, lse, grad_out;
  Tensor grad_q, grad_k, grad_v;
  double scale;
  bool is_causal;
  double dropout_p;
  uint64_t dropout_key;
};

using AttentionForwardKernel = void(const AttentionForward&);
using AttentionBackwardKernel = void(const AttentionBackward&);
KernelRegistry<AttentionForwardKernel>& attention_forward_kernels();
KernelRegistry<AttentionBackwardKernel>& attention_backward_kernels();

// The CPU kernels (tensor/cpu/attention/attention.cpp) and the name of what they run for `dtype`
// at the current instruction set: "scalar", "avx2", "avx512" or "amx".
void cpu_attention_forward(const AttentionForward& a);
void cpu_attention_backward(const AttentionBackward& a);
const char* cpu_attention_kernel_name(DType dtype);

// The CUDA kernels (tensor/cuda/attention.cpp); null in a build without CUDA.
extern AttentionForwardKernel* const cuda_attention_forward;
extern AttentionBackwardKernel* const cuda_attention_backward;

}  // namespace weft::detail
