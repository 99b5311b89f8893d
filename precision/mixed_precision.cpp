// MixedPrecision: autocast in the forward, loss scaling for float16.
#include "precision/mixed_precision.h"

#include "precision/autocast.h"
#include "tensor/init_context.h"

namespace weft::precision {
namespace {

std::string checked_precision(const PrecisionInput& precision) {
  const std::string value = precision.str();
  WEFT_CHECK(!precision.is_int() && (value == "16-mixed" || value == "bf16-mixed"),
             "[MixedPrecision] Passed `MixedPrecision(precision=", precision.repr(),
             ")`. Precision must be '16-mixed' or 'bf16-mixed'.");
  return value;
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
    : precision_(checked_precision(precision)),
      dtype_(precision_ == "16-mixed" ? kFloat16 : kBFloat16),
      device_type_(checked_device(device)),
      scaler_(std::move(scaler)) {
  if (precision_ == "16-mixed" && !scaler_) scaler_ = std::make_unique<GradScaler>();
  WEFT_CHECK(precision_ != "bf16-mixed" || !scaler_,
             "[MixedPrecision] `precision='bf16-mixed'` does not use a scaler, found a GradScaler.");
}

Context MixedPrecision::forward_context() {
  Context context;
  context.push<AutocastGuard>(device_type_, dtype_);
  return context;
}

Tensor MixedPrecision::convert_input_tensor(const Tensor& tensor) { return convert_fp_tensor(tensor, dtype_); }

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
