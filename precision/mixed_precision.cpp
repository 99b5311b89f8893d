// MixedPrecision: autocast in the forward, loss scaling for float16.
#include "precision/mixed_precision.h"

#include "precision/autocast.h"
#include "tensor/init_context.h"

namespace weft::precision {
namespace {

PrecisionMode checked_mode(const PrecisionInput& precision) {
  const auto mode = precision.is_int() ? std::nullopt : precision_mode_named(precision.str());
  WEFT_CHECK(mode && is_mixed(*mode), "[MixedPrecision] Passed `MixedPrecision(precision=", precision.repr(),
             ")`. Precision must be '16-mixed' or 'bf16-mixed'.");
  return *mode;
}

DeviceType checked_device(const std::string& device) {
  WEFT_CHECK(device == "cpu" || device == "cuda", "[MixedPrecision] expected device 'cpu' or 'cuda', got '",
             device, "'");
  return device == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
}

GradScaler::OptimizerId id_of(const optim::Optimizer& optimizer) { return &optimizer; }

}  // namespace

MixedPrecision::MixedPrecision(const PrecisionInput& precision, const std::string& device,
                               std::unique_ptr<GradScaler> scaler)
    : mode_(checked_mode(precision)), device_type_(checked_device(device)), scaler_(std::move(scaler)) {
  const bool scales = precision_traits(mode_).loss_scaling;
  if (scales && !scaler_) scaler_ = std::make_unique<GradScaler>();
  WEFT_CHECK(scales || !scaler_, "[MixedPrecision] `precision='", precision_name(mode_),
             "'` does not use a scaler, found a GradScaler.");
}

Context MixedPrecision::forward_context() {
  Context context;
  context.push<AutocastGuard>(device_type_, dtype());
  return context;
}

Tensor MixedPrecision::convert_input_tensor(const Tensor& tensor) { return convert_fp_tensor(tensor, dtype()); }

Tensor MixedPrecision::convert_output_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, default_dtype());
}

void MixedPrecision::backward(const Tensor& tensor, nn::Module* module) {
  Precision::backward(scaler_ ? scaler_->scale(tensor) : tensor, module);
}

bool MixedPrecision::optimizer_step(optim::Optimizer& optimizer) {
  if (!scaler_) return Precision::optimizer_step(optimizer);
  WEFT_CHECK(optimizer.name() != "LBFGS", "[MixedPrecision] AMP and the LBFGS optimizer are not compatible.");
  const bool stepped = scaler_->step(id_of(optimizer), main_params(optimizer), [&optimizer] { optimizer.step(); });
  scaler_->update();
  return stepped;
}

void MixedPrecision::unscale_gradients(optim::Optimizer& optimizer) {
  if (!scaler_) return;
  WEFT_CHECK(!optimizer.step_supports_amp_scaling(),
             "[MixedPrecision] Gradient clipping is not implemented for optimizers handling the unscaling.");
  scaler_->unscale_(id_of(optimizer), main_params(optimizer));
}

nn::TensorDict MixedPrecision::state_dict() const { return scaler_ ? scaler_->state_dict() : nn::TensorDict(); }

void MixedPrecision::load_state_dict(const nn::TensorDict& state) {
  if (scaler_) scaler_->load_state_dict(state);
}

}  // namespace weft::precision
