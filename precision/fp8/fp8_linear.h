// Fp8Linear: y = x·Wᵀ + b computed in FP8 inside an fp8_autocast scope (TransformerEngine's
// te.Linear, quantization-fp8.md §B.2), the built-in Linear's math outside one.
//
// Forward, in FP8: the input (rows, in) and the weight (out, in) are cast to E4M3 with their
// scales (precision/fp8/fp8_meta.h), multiplied with float32 accumulation and dequantized by the
// two scale_invs, the bias added, in the input's dtype (bfloat16 in, bfloat16 out):
//   x: (*, in) · W: (out, in)ᵀ -> y: (*, out)              fp8_gemm(x_q, W_qᵀ)
// Backward: the output gradient is cast with its own scale (E5M2 under HYBRID, E4M3 under E4M3)
// and both gradients are FP8 GEMMs the same way, each returned in its input's dtype:
//   dx = dy_q · W_q: (*, in)       dW = dy_qᵀ · x_q: (out, in)       db = Σ dy (in high precision)
// The FP8 copies of x and W saved for backward take 1 byte per element; their bfloat16 copies
// for the CPU GEMM are scratch, made per use. The parameters (master weights) stay in whatever
// dtype the module has (the precision plugin's weights_dtype): FP8 is only ever a per-step copy.
//
// With DelayedScaling the casts use the scales the layer has and record amaxes; the scales move
// when the fp8_autocast region ends (input, weight) and after the backward (gradient), see
// precision/fp8/fp8_autocast.h. With Float8CurrentScaling each cast computes its scale from the
// tensor it casts. The metadata (scale, scale_inv, amax_history per role) are keep_dtype buffers
// named fp8_scale, fp8_scale_inv and fp8_amax_history, so checkpoints carry them.
//
// On a GPU (the layer moved there with to(), the input on the same device) the casts, their
// scales and amaxes, the scale updates and the GEMMs (cuBLASLt, compute capability 8.9+) all stay
// on the device: a step reads nothing back, except the amaxes handed to an fp8_autocast's amax
// reducer.
//
// Shape rule: in_features and out_features must be multiples of 16 — each is the inner
// dimension of one of the layer's GEMMs, and the GPU's FP8 GEMM needs 16-byte aligned rows.
// Constructing an Fp8Linear that breaks it is an error naming the dimension; the precision plugin
// instead keeps such layers as they are, with a warning (transformer_engine_precision.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module_holder.h"
#include "precision/fp8/fp8_meta.h"

namespace weft::precision {

inline constexpr int64_t kFp8DimMultiple = 16;

// Why a Linear(in_features, out_features) cannot run in FP8 ("in_features=20 is not divisible by
// 16"), or an empty string when it can.
std::string fp8_linear_shape_problem(int64_t in_features, int64_t out_features);

class Fp8LinearImpl : public nn::LinearImpl {
 public:
  Fp8LinearImpl(int64_t in_features, int64_t out_features, bool bias = true, int64_t amax_history_len = 1024);

  // x: (*, in) -> (*, out); in FP8 inside an enabled, non-calibrating fp8_autocast scope.
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Fp8Linear"; }

  Fp8Metadata& fp8_meta() const { return *meta_; }

 private:
  std::shared_ptr<Fp8Metadata> meta_;
};

WEFT_MODULE(Fp8Linear);

}  // namespace weft::precision
