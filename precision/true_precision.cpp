// The "*-true" plugins: one dtype for weights, new tensors and the forward.
#include "precision/true_precision.h"

#include "tensor/init_context.h"

namespace weft::precision {
namespace {

DType half_dtype(const std::string& precision) {
  WEFT_CHECK(precision == "16-true" || precision == "bf16-true",
             "[HalfPrecision] expected precision '16-true' or 'bf16-true', got '", precision, "'");
  return precision == "bf16-true" ? kBFloat16 : kFloat16;
}

}  // namespace

HalfPrecision::HalfPrecision(const std::string& precision) : TruePrecision(precision, half_dtype(precision)) {}

void TruePrecision::convert_module(nn::Module& module) { module.to(dtype_); }

Context TruePrecision::tensor_init_context() {
  Context context;
  context.push<TensorFrameGuard>(TensorFrame{dtype_, {}, {}});
  return context;
}

Context TruePrecision::module_init_context() { return tensor_init_context(); }
Context TruePrecision::forward_context() { return tensor_init_context(); }

Tensor TruePrecision::convert_input_tensor(const Tensor& tensor) { return convert_fp_tensor(tensor, dtype_); }

// The default dtype is read now, after the forward context has ended: float32 unless the caller
// is itself inside a dtype context.
Tensor TruePrecision::convert_output_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, default_dtype());
}

}  // namespace weft::precision
