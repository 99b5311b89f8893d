// The "*-true" plugins: one dtype for weights, new tensors and the forward.
#include "precision/true_precision.h"

#include "precision/precision_input.h"
#include "tensor/init_context.h"

namespace weft::precision {
namespace {

PrecisionMode half_mode(const std::string& precision) {
  const auto mode = precision_mode_named(precision);
  WEFT_CHECK(mode && is_true_half(*mode), "[HalfPrecision] expected precision '16-true' or 'bf16-true', got '",
             precision, "'");
  return *mode;
}

}  // namespace

HalfPrecision::HalfPrecision(const std::string& precision) : TruePrecision(half_mode(precision)) {}

void TruePrecision::convert_module(nn::Module& module) { module.to(dtype()); }

Context TruePrecision::tensor_init_context() {
  Context context;
  context.push<TensorFrameGuard>(TensorFrame{dtype(), {}, {}});
  return context;
}

Context TruePrecision::module_init_context() { return tensor_init_context(); }
Context TruePrecision::forward_context() { return tensor_init_context(); }

Tensor TruePrecision::convert_input_tensor(const Tensor& tensor) { return convert_fp_tensor(tensor, dtype()); }

// The default dtype is read now, after the forward context has ended: float32 unless the caller
// is itself inside a dtype context.
Tensor TruePrecision::convert_output_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, default_dtype());
}

}  // namespace weft::precision
