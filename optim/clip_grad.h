// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (PyTorch 1.13).
//
// clip_grad_norm_ treats all gradients as one vector: it computes their total p-norm (p = ∞ is the
// largest absolute value), scales every gradient in place by min(1, max_norm / (total + 1e-6)),
// and returns the total norm from before the scaling. Parameters without .grad are skipped. The
// norm is accumulated in float64 over fixed-size chunks, so it does not depend on the thread count;
// the total and the scale are then rounded to float32 unless every gradient is float64, as
// PyTorch's float32 norm tensor is.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace weft::optim {

// norm_type: any p > 0, or std::numeric_limits<double>::infinity(). With error_if_nonfinite a NaN
// or infinite total norm throws instead of scaling the gradients by it.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Every gradient ← gradient · coef in place, as clip_grad_norm_ scales: coef rounded to float32
// (float64 for a float64 gradient), float16 / bfloat16 elements widened, multiplied and rounded once
// (PyTorch multiplies by its float32 coefficient tensor in float32). FSDP's clipping over shards
// uses it too.
void scale_grads_(const std::vector<Tensor>& grads, double coef);

// Clamps every gradient in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

// The two halves of clip_grad_norm_, for FSDP's clipping over shards, which all-reduces what the
// first half returns (a sum over ranks, or for p = ∞ a max that keeps NaN) before the second.
namespace detail {

// Σ |g|^p over the gradients' elements in float64 (p = ∞: max |g|, NaN if any element is NaN).
double grad_norm_accumulated(const std::vector<Tensor>& grads, double norm_type);

// The total norm from that accumulation, rounded to float32 unless every gradient is float64 and
// checked with error_if_nonfinite; scales the gradients as clip_grad_norm_ does and returns it.
double finish_clip_grad_norm(const std::vector<Tensor>& grads, double accumulated, double max_norm, double norm_type,
                             bool error_if_nonfinite);

}  // namespace detail

}  // namespace weft::optim
