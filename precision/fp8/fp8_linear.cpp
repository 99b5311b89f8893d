// Fp8Linear: the FP8 forward, its backward rule, and the per-role casts (precision/fp8/fp8_linear.h).
#include "precision/fp8/fp8_linear.h"

#include <variant>
#include <vector>

#include "precision/fp8/fp8_autocast.h"
#include "precision/fp8/fp8_cast.h"
#include "precision/fp8/fp8_gemm.h"
#include "tensor/autograd.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

// Casts t for `role` as the recipe says: with the layer's delayed scale (maxing the amax into
// the history), or with a scale from t's own amax (recording that scale). Scale and amax stay on
// the metadata's device, so a GPU layer queues its casts without waiting. keep_decoded keeps the
// bfloat16 copy the cast makes, for a CPU GEMM that follows at once (the GPU's does not use it).
Fp8Tensor cast_role(const Tensor& t, Fp8Role role, const Fp8Recipe& recipe, Fp8Metadata& meta, bool keep_decoded) {
  const DType fp8 = fp8_dtype_for(fp8_format_of(recipe), role);
  const auto* current = std::get_if<Float8CurrentScaling>(&recipe);
  if (current) {
    const Tensor amax = zeros({1}, TensorOptions(kFloat32).device(t.device()));
    fp8_amax_into(t, amax);
    meta.set_scale_from_amax(role, amax, fp8_max(fp8), *current);
  }
  const bool decode = keep_decoded && t.device().type == DeviceType::CPU;
  return fp8_cast_scaled(t, fp8, meta.scale_element(role), current ? Tensor() : meta.current_amax_element(role),
                         /*saturate=*/true, decode);
}

Fp8Tensor transposed(const Fp8Tensor& t) {
  return Fp8Tensor{t.data.t(), t.scale_inv, t.decoded.defined() ? t.decoded.t() : Tensor(), t.device_scale_inv};
}

// What the backward rule needs from the forward.
struct Saved {
  Fp8Tensor x_q;  // (rows, in), codes only
  Fp8Tensor w_q;  // (out, in), codes only
  std::shared_ptr<Fp8Metadata> meta;
  Fp8Recipe recipe;
  std::shared_ptr<detail::Fp8BackwardGroup> group;  // DelayedScaling only
  bool finishes_group = false;
  bool x_grad = false, weight_grad = false, bias_grad = false;
  Shape x_shape;
  DType x_dtype = kFloat32, weight_dtype = kFloat32;
  int64_t rows = 0, out_features = 0;
};

std::vector<Tensor> fp8_linear_backward(const Saved& s, const Tensor& grad) {
  const Tensor g = grad.reshape({s.rows, s.out_features});
  const Fp8Tensor g_q = cast_role(g, Fp8Role::GradOutput, s.recipe, *s.meta, /*keep_decoded=*/true);
  std::vector<Tensor> grads(3);
  // dy: (rows, out) · W: (out, in) -> dx: (rows, in)
  if (s.x_grad) grads[0] = fp8_gemm(g_q, s.w_q, s.x_dtype).reshape(s.x_shape);
  // dyᵀ: (out, rows) · x: (rows, in) -> dW: (out, in)
  if (s.weight_grad) grads[1] = fp8_gemm(transposed(g_q), s.x_q, s.weight_dtype);
  if (s.bias_grad) grads[2] = sum(g, {0});
  if (s.finishes_group) s.group->update();
  return grads;
}

// x: (*, in) · weight: (out, in)ᵀ + bias: (out) -> (*, out), in FP8 with `recipe`.
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::shared_ptr<Fp8Metadata>& meta,
                  const Fp8Recipe& recipe) {
  const int64_t in_features = weight.size(1), out_features = weight.size(0);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  const Tensor x_rows = x.detach().reshape({rows, in_features});
  const Fp8Tensor x_q = cast_role(x_rows, Fp8Role::Input, recipe, *meta, true);
  const Fp8Tensor w_q = cast_role(weight.detach(), Fp8Role::Weight, recipe, *meta, true);
  const auto* delayed = std::get_if<DelayedScaling>(&recipe);
  if (delayed) {
    detail::fp8_region_add(meta, Fp8Role::Input, *delayed);
    detail::fp8_region_add(meta, Fp8Role::Weight, *delayed);
  }
  // x: (rows, in) · Wᵀ: (in, out) -> (rows, out)
  const Tensor y_rows = fp8_gemm(x_q, transposed(w_q), x.dtype(), bias.defined() ? bias.detach() : Tensor());
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor y = y_rows.view(out_shape);
  if (!autograd::needs_grad({&x, &weight, &bias})) return y;

  Saved s;
  s.x_q = Fp8Tensor{x_q.data, x_q.scale_inv, Tensor(), x_q.device_scale_inv};
  s.w_q = Fp8Tensor{w_q.data, w_q.scale_inv, Tensor(), w_q.device_scale_inv};
  s.meta = meta;
  s.recipe = recipe;
  if (delayed) {
    s.group = detail::fp8_region_backward_group();
    s.group->add(meta, Fp8Role::GradOutput, *delayed);
    s.finishes_group = s.group->claim_finisher();
  }
  s.x_grad = x.requires_grad();
  s.weight_grad = weight.requires_grad();
  s.bias_grad = bias.defined() && bias.requires_grad();
  s.x_shape = x.shape();
  s.x_dtype = x.dtype();
  s.weight_dtype = weight.dtype();
  s.rows = rows;
  s.out_features = out_features;
  autograd::record("Fp8Linear", y, {x, weight, bias},
                   [s = std::move(s)](const Tensor& g) { return fp8_linear_backward(s, g); });
  return y;
}

}  // namespace

std::string fp8_linear_shape_problem(int64_t in_features, int64_t out_features) {
  if (in_features % kFp8DimMultiple != 0)
    return weft::detail::cat("in_features=", in_features, " is not divisible by ", kFp8DimMultiple);
  if (out_features % kFp8DimMultiple != 0)
    return weft::detail::cat("out_features=", out_features, " is not divisible by ", kFp8DimMultiple);
  return {};
}

namespace {

// The layer's own arguments, checked before the base class allocates anything; returns in_features.
int64_t checked_in_features(int64_t in_features, int64_t out_features, int64_t amax_history_len) {
  WEFT_CHECK(in_features > 0 && out_features > 0, "[Fp8Linear] expected positive feature counts, got in_features=",
             in_features, " and out_features=", out_features);
  const std::string problem = fp8_linear_shape_problem(in_features, out_features);
  WEFT_CHECK(problem.empty(), "[Fp8Linear] FP8 execution needs in_features and out_features divisible by ",
             kFp8DimMultiple, " (each is the inner dimension of one of its GEMMs): ", problem);
  WEFT_CHECK(amax_history_len >= 1 && amax_history_len <= kMaxAmaxHistoryLen,
             "[Fp8Linear] amax_history_len must lie in [1, ", kMaxAmaxHistoryLen, "], got ", amax_history_len);
  return in_features;
}

}  // namespace

Fp8LinearImpl::Fp8LinearImpl(int64_t in_features_, int64_t out_features_, bool with_bias, int64_t amax_history_len)
    : LinearImpl(checked_in_features(in_features_, out_features_, amax_history_len), out_features_, with_bias),
      meta_(std::make_shared<Fp8Metadata>(amax_history_len)) {
  register_buffer("fp8_scale", meta_->scale, true, /*keep_dtype=*/true);
  register_buffer("fp8_scale_inv", meta_->scale_inv, true, true);
  register_buffer("fp8_amax_history", meta_->amax_history, true, true);
}

Tensor Fp8LinearImpl::forward(const Tensor& input) {
  detail::fp8_rethrow_deferred_error();
  if (input.defined()) nn::check_linear_dtype("Fp8Linear", "an input in", input.dtype());
  const Fp8AutocastState& state = fp8_autocast_state();
  if (!state.enabled) return LinearImpl::forward(input);
  WEFT_CHECK(input.defined() && input.dim() >= 1 && input.size(-1) == in_features,
             "[Fp8Linear] expected an input with ", in_features, " features in its last dimension, got ",
             input.defined() ? input.shape() : Shape{});
  WEFT_CHECK(input.is_floating_point() && weight.is_floating_point(),
             "[Fp8Linear] expected floating input and weight, got ", input.dtype(), " and ", weight.dtype());
  WEFT_CHECK(input.device() == weight.device(), "[Fp8Linear] expected the input on the layer's device ",
             weight.device(), ", got ", input.device());
  const auto* delayed = std::get_if<DelayedScaling>(&state.recipe);
  if (delayed) meta_->resize_amax_history(delayed->amax_history_len);
  if (!state.calibrating) return fp8_linear(input, weight, bias, meta_, state.recipe);
  // Calibration: the high-precision result, and the amaxes the FP8 casts would have recorded.
  if (delayed) {
    fp8_amax_into(input, meta_->current_amax_element(Fp8Role::Input));
    fp8_amax_into(weight, meta_->current_amax_element(Fp8Role::Weight));
    detail::fp8_region_add(meta_, Fp8Role::Input, *delayed);
    detail::fp8_region_add(meta_, Fp8Role::Weight, *delayed);
  }
  return LinearImpl::forward(input);
}

}  // namespace weft::precision
