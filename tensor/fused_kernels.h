// The tensor floor's fused kernels, outside the Backend vtable: each is a feature with its own
// KernelRegistry (tensor/kernel_registry.h), a CPU kernel (tensor/cpu/fused.cpp) and a CUDA
// kernel (tensor/cuda/fused.cu; null in a build without CUDA, tensor/cuda_stub.cpp).
//
// The op front-ends (cross_entropy, layer_norm, rms_norm, dropout, linear) check, shape and record
// autograd; the kernels only compute, under the contracts of Note [Kernel contracts]
// (tensor/backend.h): outputs contiguous and allocated, inputs contiguous unless said otherwise,
// narrow floats computed in float32, float64 in float64.
#pragma once

#include <cstdint>

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::detail {

// ---- cross-entropy: per-row losses of softmax + negative log-likelihood in one pass ----
// logits: (N, C) floating, target: (N) int64 -> losses: (N) logits' dtype, lse: (N) float32
// (float64 for float64 logits), the log-sum-exp of each row, saved for the backward. With label
// smoothing ε: loss = lse − (1 − ε)·x[t] − ε/C · Σ_c x[c]. A row whose target is ignore_index has
// loss 0. Other targets must lie in [0, C): the CPU kernel throws before writing; the CUDA kernel
// reports it at the next synchronisation (Note [Deferred device errors] in tensor/cuda.h).
struct CrossEntropyForward {
  Tensor logits, target;
  Tensor losses, lse;
  int64_t ignore_index;
  double label_smoothing;
};
// grad_logits = grad_losses[r] · (softmax(x)[c] − (1 − ε)·[c == t] − ε/C), 0 on ignored rows.
struct CrossEntropyBackward {
  Tensor logits, target, lse, grad_losses;
  Tensor grad_logits;
  int64_t ignore_index;
  double label_smoothing;
};
using CrossEntropyForwardKernel = void(const CrossEntropyForward&);
using CrossEntropyBackwardKernel = void(const CrossEntropyBackward&);
KernelRegistry<CrossEntropyForwardKernel>& cross_entropy_forward_kernels();
KernelRegistry<CrossEntropyBackwardKernel>& cross_entropy_backward_kernels();

// ---- layer norm over the last dim ----
// x: (R, C), weight / bias: (C) or undefined, all one dtype -> y: (R, C), mean / rstd: (R) float32
// (float64 for float64 x). Variance is biased (÷C); rstd = 1/sqrt(var + eps).
struct LayerNormForward {
  Tensor x, weight, bias;
  Tensor y, mean, rstd;
  double eps;
};
// With g = grad_y·w and x̂ = (x − mean)·rstd: grad_x = rstd·(g − mean(g) − x̂·mean(g·x̂)),
// grad_weight = Σ_rows grad_y·x̂, grad_bias = Σ_rows grad_y. Outputs left undefined are skipped.
struct LayerNormBackward {
  Tensor grad_y, x, weight, mean, rstd;
  Tensor grad_x, grad_weight, grad_bias;
};
using LayerNormForwardKernel = void(const LayerNormForward&);
using LayerNormBackwardKernel = void(const LayerNormBackward&);
KernelRegistry<LayerNormForwardKernel>& layer_norm_forward_kernels();
KernelRegistry<LayerNormBackwardKernel>& layer_norm_backward_kernels();

// ---- RMS norm over the last dim, for inference ----
// x: (R, C) float32, bfloat16 or float16, weight: (C) of x's dtype -> y: (R, C), as Hugging
// Face's Llama computes it in float32: r = 1/√(mean(x²) + eps) with each square rounded to
// float32 and their sum taken in double (sum_in_double, tensor/cpu/rows.h), then
// y = weight · round(x·r) with round() to x's dtype and the product rounded again — the bits of
// rms_norm's composition of ops (tensor/ops.h). No backward: rms_norm records that composition
// instead when a gradient is wanted, and uses it on a device without this kernel.
struct RmsNormLaunch {
  Tensor x, weight, y;
  double eps;
};
using RmsNormKernel = void(const RmsNormLaunch&);
KernelRegistry<RmsNormKernel>& rms_norm_kernels();

// ---- dropout with a counter-based mask ----
// x -> out, same shape and dtype, both contiguous: out[i] = keep(i) ? x[i]·scale : 0, where
// keep(i) = philox_uniform_at(key, i) < keep_probability (tensor/philox.h, Note [Philox streams])
// and scale = 1/keep_probability, both rounded to the compute type. The backward is the same
// kernel on the gradient with the same key.
struct DropoutLaunch {
  Tensor x, out;
  double keep_probability;
  uint64_t key;
};
using DropoutKernel = void(const DropoutLaunch&);
KernelRegistry<DropoutKernel>& dropout_kernels();

// ---- linear with its bias in the product ----
// x: (R, in) · weight: (out, in)ᵀ + bias: (out) or undefined -> out: (R, out), one dtype; x and
// weight may be any views the device's matmul takes. weight_frozen: the caller's weight does not
// require grad and is the tensor itself, not a cast copy, so the CPU may keep it packed
// (tensor/packed_weights.h).
struct LinearLaunch {
  Tensor x, weight, bias;
  Tensor out;
  bool weight_frozen = false;
};
using LinearKernel = void(const LinearLaunch&);
KernelRegistry<LinearKernel>& linear_kernels();

// ---- the tanh GELU and its gradient ----
// Forward (grad undefined): out = gelu_tanh(x); backward: out = grad · gelu_tanh'(x), the
// elementwise ops' formulas (UnaryOp::GeluTanh, BinaryOp::GeluTanhBackward) with their rounding.
// x, grad and out contiguous, one dtype, float32 or bfloat16; the op front-end takes the
// elementwise ops for anything else, and on a device without this kernel (the CUDA slot is empty:
// the elementwise ops there are already one fused pass).
// tanh, when defined (float32, x's shape, contiguous), carries the tanh of the formula from the
// forward, which writes it, to the gradient, which reads it instead of computing it again (the
// same bits: most of the gradient's work).
struct GeluTanhLaunch {
  Tensor x, grad;
  Tensor out;
  Tensor tanh;
};
using GeluTanhKernel = void(const GeluTanhLaunch&);
KernelRegistry<GeluTanhKernel>& gelu_tanh_kernels();

// ---- SiLU and its gradient ----
// Forward (grad undefined): out = silu(x) = x·σ(x); backward: out = grad · silu'(x), the
// elementwise ops' formulas (UnaryOp::Silu, BinaryOp::SiluBackward, σ from sigmoid_arith) with
// their rounding. x, grad and out as for the tanh GELU above (no CUDA slot either).
struct SiluLaunch {
  Tensor x, grad;
  Tensor out;
};
using SiluKernel = void(const SiluLaunch&);
KernelRegistry<SiluKernel>& silu_kernels();

// The CUDA kernels (tensor/cuda/fused.cu, tensor/cuda/cuda_linear.cpp); null in a build without
// CUDA (Note [Linking kernels by reference] in tensor/kernel_registry.h).
extern CrossEntropyForwardKernel* const cuda_cross_entropy_forward;
extern CrossEntropyBackwardKernel* const cuda_cross_entropy_backward;
extern LayerNormForwardKernel* const cuda_layer_norm_forward;
extern LayerNormBackwardKernel* const cuda_layer_norm_backward;
extern DropoutKernel* const cuda_dropout;
extern LinearKernel* const cuda_linear;

}  // namespace weft::detail
