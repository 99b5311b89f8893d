// Linear layer and its construction factory.
#include "nn/linear.h"

#include <cmath>

#include "nn/init.h"
#include "nn/module_init_context.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::nn {

LinearImpl::LinearImpl(int64_t in_features_, int64_t out_features_, bool with_bias)
    : in_features(in_features_), out_features(out_features_) {
  WEFT_CHECK(in_features >= 0 && out_features >= 0, "[Linear] feature counts must be non-negative, got in ",
             in_features, " and out ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = register_parameter("bias", with_bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

LinearImpl::LinearImpl(Uninitialized, int64_t out_features_, bool with_bias)
    : in_features(0), out_features(out_features_) {
  WEFT_CHECK(out_features >= 0, "[LazyLinear] out_features must be non-negative, got ", out_features);
  auto placeholder = [] { return weft::detail::make_uninitialized(default_dtype(), default_device(), true); };
  weight = register_parameter("weight", placeholder());
  bias = register_parameter("bias", with_bias ? placeholder() : Tensor());
}

void check_linear_dtype(const char* layer, const char* what, DType dtype) {
  WEFT_CHECK(dtype == kFloat64 || dtype == kFloat32 || dtype == kFloat16 || dtype == kBFloat16, "[", layer,
             "] linear layers compute in float64, float32, float16 or bfloat16; got ", what, " ", dtype,
             dtype == kFloat8E4M3FN || dtype == kFloat8E5M2
                 ? " (float8 is a storage format: cast the input with .to(), or run an Fp8Linear under fp8_autocast "
                   "for FP8 products)"
                 : "");
}

void LinearImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& input) {
  if (input.defined()) check_linear_dtype("Linear", "an input in", input.dtype());
  return linear(input, weight, bias);
}

std::string LinearImpl::extra_repr() const {
  return weft::detail::cat("in_features=", in_features, ", out_features=", out_features,
                           ", bias=", bias.defined() ? "true" : "false");
}

std::shared_ptr<LinearImpl> make_linear(int64_t in_features, int64_t out_features, bool bias) {
  if (!current_module_frame().linear) return std::make_shared<LinearImpl>(in_features, out_features, bias);
  const LinearFactory factory = current_module_frame().linear;
  const ModuleFrameGuard builtin(ModuleFrame{.linear = LinearFactory{}, .layer_norm = std::nullopt});
  std::shared_ptr<LinearImpl> impl = factory(in_features, out_features, bias);
  WEFT_CHECK(impl != nullptr, "[Linear] the module frame's Linear factory returned null");
  WEFT_CHECK(impl->in_features == in_features && impl->out_features == out_features,
             "[Linear] the module frame's Linear factory was asked for in_features=", in_features,
             ", out_features=", out_features, " and built in_features=", impl->in_features,
             ", out_features=", impl->out_features);
  return impl;
}

}  // namespace weft::nn
