// GradScaler (see precision/grad_scaler.h). The update rule is PyTorch's
// _amp_update_scale_cpu_kernel and the unscale rule its _amp_foreach_non_finite_check_and_unscale_
// kernel, re-derived from their documented behaviour; error texts are PyTorch's, after the
// [GradScaler] prefix.
#include "precision/grad_scaler.h"

#include <algorithm>
#include <cmath>

#include "precision/amp_kernels.h"
#include "tensor/autograd.h"
#include "tensor/cuda.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

const char* const kStateKeys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"};

// The scale lives on the host and the inf/NaN check is read back to decide the step there, so a
// CUDA graph would replay one step's scale and decision forever (Note [CUDA graphs]).
void refuse_capture(const char* function) {
  WEFT_CHECK(!cuda::is_current_stream_capturing(), "[GradScaler] ", function, " during a CUDA graph capture: the "
             "scale and the decision to skip a step are kept on the host, so a graph cannot replay them; capture "
             "float32 or bfloat16 steps, which need no scaler, or run float16-mixed steps eagerly");
}

double state_value(const nn::TensorDict& state, const char* key) {
  const Tensor* t = state.find(key);
  WEFT_CHECK(t != nullptr, "[GradScaler] load_state_dict expected an entry '", key, "', the state dict has none");
  WEFT_CHECK(t->numel() == 1, "[GradScaler] load_state_dict expected a one-element '", key, "', got shape ",
             t->shape());
  return t->item<double>();
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options)
    : enabled_(options.enabled),
      init_scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval) {
  if (!enabled_) return;
  WEFT_CHECK(growth_factor_ > 1.0, "[GradScaler] The growth factor must be > 1.0. Got ", growth_factor_);
  WEFT_CHECK(backoff_factor_ < 1.0, "[GradScaler] The backoff factor must be < 1.0. Got ", backoff_factor_);
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  refuse_capture("scale()");
  WEFT_CHECK(outputs.defined(), "[GradScaler] scale() expected a defined tensor");
  if (!scale_) {
    scale_ = static_cast<float>(init_scale_);
    growth_tracker_ = static_cast<int32_t>(init_growth_tracker_);
  }
  if (outputs.dim() == 0)
    return mul(outputs, scalar_tensor(*scale_, TensorOptions(kFloat32).device(outputs.device())));
  return mul(outputs, static_cast<double>(*scale_));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> scaled;
  scaled.reserve(outputs.size());
  for (const Tensor& t : outputs) scaled.push_back(scale(t));
  return scaled;
}

void GradScaler::check_scale_initialized(const char* function) const {
  WEFT_CHECK(scale_.has_value(), "[GradScaler] Attempted ", function,
             " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) "
             "earlier in the iteration.");
}

void GradScaler::unscale_(OptimizerId optimizer, const std::vector<Tensor>& params) {
  if (!enabled_) return;
  refuse_capture("unscale_()");
  check_scale_initialized("unscale_");
  OptimizerState& state = per_optimizer_[optimizer];
  WEFT_CHECK(state.stage != Stage::Unscaled,
             "[GradScaler] unscale_() has already been called on this optimizer since the last update().");
  WEFT_CHECK(state.stage != Stage::Stepped, "[GradScaler] unscale_() is being called after step().");

  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined() && !found_inf_reduction_)
      WEFT_CHECK(g.dtype() != kFloat16, "[GradScaler] Attempting to unscale FP16 gradients. Keep float32 master "
                 "weights (mixed precision) so that gradients are float32");
  }
  const float inv = static_cast<float>(1.0 / static_cast<double>(*scale_));
  NoGradGuard no_grad;
  // One fused kernel per device (precision/amp_kernels.h); it unscales in place, so a gradient
  // that is a strided view (an expanded first gradient) is first replaced by a dense copy.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) {
      g = g.contiguous();
      Tensor(p).set_grad(g);
    }
    auto slot = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == g.device(); });
    if (slot == by_device.end()) slot = by_device.insert(by_device.end(), {g.device(), {}});
    slot->second.push_back(g);
  }
  std::vector<std::pair<Device, float>> found;
  for (const auto& [device, grads] : by_device) {
    const bool non_finite = detail::unscale_kernels().at(device)(grads, inv);
    for (const Tensor& g : grads) g.storage()->bump_version();
    found.emplace_back(device, non_finite ? 1.0f : 0.0f);
  }
  if (found_inf_reduction_) {  // one flag for all ranks, so that every rank steps or skips alike
    float any = 0.0f;
    for (const auto& entry : found) any = std::max(any, entry.second);
    const Device device = found.empty() ? kCPU : found.front().first;
    found.assign(1, {device, found_inf_reduction_(any)});
  }
  state.found_inf_per_device = std::move(found);
  state.stage = Stage::Unscaled;
}

void GradScaler::refuse_closure() {
  WEFT_FAIL("[GradScaler] Closure use is not currently supported if GradScaler is enabled.");
}

bool GradScaler::prepare_step(OptimizerId optimizer, const std::vector<Tensor>& params) {
  check_scale_initialized("step");
  WEFT_CHECK(per_optimizer_[optimizer].stage != Stage::Stepped,
             "[GradScaler] step() has already been called since the last update().");
  if (per_optimizer_[optimizer].stage == Stage::Ready) unscale_(optimizer, params);
  const OptimizerState& state = per_optimizer_[optimizer];
  WEFT_CHECK(!state.found_inf_per_device.empty(),
             "[GradScaler] No inf checks were recorded for this optimizer. (None of its parameters has a gradient.)");
  float found_inf = 0.0f;
  for (const auto& entry : state.found_inf_per_device) found_inf += entry.second;
  return found_inf == 0.0f;
}

bool GradScaler::step(OptimizerId optimizer, const std::vector<Tensor>& params, const std::function<void()>& do_step) {
  if (!enabled_) {
    do_step();
    return true;
  }
  const bool finite = prepare_step(optimizer, params);
  if (finite) do_step();
  mark_stepped(optimizer);
  return finite;
}

void GradScaler::mark_stepped(OptimizerId optimizer) { per_optimizer_[optimizer].stage = Stage::Stepped; }

void GradScaler::update() {
  if (!enabled_) return;
  check_scale_initialized("update");
  bool recorded = false;
  float found_inf = 0.0f;
  for (const auto& [id, state] : per_optimizer_)
    for (const auto& entry : state.found_inf_per_device) {
      recorded = true;
      found_inf += entry.second;
    }
  WEFT_CHECK(recorded, "[GradScaler] No inf checks were recorded prior to update.");
  float& scale = *scale_;
  int32_t& tracker = *growth_tracker_;
  if (found_inf != 0.0f) {
    scale = static_cast<float>(scale * backoff_factor_);
    tracker = 0;
  } else if (tracker + 1 == growth_interval_) {
    const float grown = static_cast<float>(scale * growth_factor_);
    if (std::isfinite(grown)) scale = grown;  // never grow into inf
    tracker = 0;
  } else {
    tracker += 1;
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_scale_initialized("update");
  *scale_ = static_cast<float>(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_ ? static_cast<double>(*scale_) : init_scale_;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_ ? *growth_tracker_ : init_growth_tracker_;
}

nn::TensorDict GradScaler::state_dict() const {
  nn::TensorDict state;
  if (!enabled_) return state;
  state.insert("scale", scalar_tensor(get_scale(), kFloat64));
  state.insert("growth_factor", scalar_tensor(growth_factor_, kFloat64));
  state.insert("backoff_factor", scalar_tensor(backoff_factor_, kFloat64));
  state.insert("growth_interval", scalar_tensor(static_cast<double>(growth_interval_), kInt64));
  state.insert("_growth_tracker", scalar_tensor(static_cast<double>(growth_tracker()), kInt64));
  return state;
}

void GradScaler::load_state_dict(const nn::TensorDict& state) {
  if (!enabled_) return;
  WEFT_CHECK(!state.empty(), "[GradScaler] The source state dict is empty, possibly because it was saved from a "
             "disabled instance of GradScaler.");
  for (const char* key : kStateKeys) state_value(state, key);  // all present before anything changes
  init_scale_ = state_value(state, "scale");
  if (scale_) *scale_ = static_cast<float>(init_scale_);
  growth_factor_ = state_value(state, "growth_factor");
  backoff_factor_ = state_value(state, "backoff_factor");
  growth_interval_ = static_cast<int64_t>(state_value(state, "growth_interval"));
  init_growth_tracker_ = static_cast<int64_t>(state_value(state, "_growth_tracker"));
  if (growth_tracker_) *growth_tracker_ = static_cast<int32_t>(init_growth_tracker_);
}

}  // namespace weft::precision
