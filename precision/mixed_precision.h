// MixedPrecision: "16-mixed" and "bf16-mixed" (automatic mixed precision, reference §3.4).
//
// Weights stay float32 (no convert_module, no init contexts). The forward runs under autocast on
// the plugin's device type with float16 or bfloat16; floating inputs are cast to that dtype on
// the way in and outputs to the caller's default dtype (float32) on the way out.
//
// "16-mixed" owns a GradScaler (precision/grad_scaler.h) unless one is given: backward scales
// the loss, optimizer_step unscales (unless unscale_gradients already did), skips the step when
// a gradient is inf or NaN and updates the scale; state_dict is the scaler's. "bf16-mixed" has
// no scaler and refuses one. Because backward is the plugin's, requires_plugin_backward() is true
// for both, as in the reference (even bf16-mixed, which scales nothing).
#pragma once

#include <memory>
#include <string>

#include "precision/grad_scaler.h"
#include "precision/precision.h"
#include "precision/precision_input.h"
#include "tensor/device.h"

namespace weft::precision {

class MixedPrecision : public Precision {
 public:
  // precision: "16-mixed" or "bf16-mixed" (exactly; aliases are the factory's business);
  // device: "cpu" or "cuda", the device type autocast acts on.
  MixedPrecision(const PrecisionInput& precision, const std::string& device,
                 std::unique_ptr<GradScaler> scaler = nullptr);

  PrecisionMode mode() const override { return mode_; }
  DType dtype() const { return precision_traits(mode_).compute_dtype; }
  DeviceType device_type() const { return device_type_; }
  GradScaler* scaler() const { return scaler_.get(); }

  Context forward_context() override;
  Tensor convert_input_tensor(const Tensor& tensor) override;
  Tensor convert_output_tensor(const Tensor& tensor) override;

  void backward(const Tensor& tensor, nn::Module* module) override;
  bool requires_plugin_backward() const override { return true; }
  bool optimizer_step(optim::Optimizer& optimizer) override;
  void unscale_gradients(optim::Optimizer& optimizer) override;

  nn::TensorDict state_dict() const override;
  void load_state_dict(const nn::TensorDict& state) override;

 private:
  PrecisionMode mode_;
  DeviceType device_type_;
  std::unique_ptr<GradScaler> scaler_;
};

}  // namespace weft::precision
