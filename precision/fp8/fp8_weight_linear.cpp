// Fp8WeightLinear: construction and quantization, the forward with its input gradient, the
// state-dict hooks, and the module frame that builds Linears as this layer.
#include "precision/fp8/fp8_weight_linear.h"

#include <cmath>

#include "nn/init.h"
#include "nn/module_init_context.h"
#include "precision/fp8/fp8_weight_ops.h"
#include "tensor/autograd.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

const char* granularity_name(Fp8WeightGranularity g) {
  return g == Fp8WeightGranularity::PerTensor ? "per_tensor" : "per_channel";
}

std::string describe(const Tensor& t) { return weft::detail::cat(t.shape(), " ", t.dtype()); }

bool scales_finite_positive(const Tensor& scale) {
  for (float s : scale.to_vector<float>())
    if (!(std::isfinite(s) && s > 0.0f)) return false;
  return true;
}

}  // namespace

std::optional<Fp8WeightGranularity> fp8_weight_granularity_of(std::string_view mode) {
  if (mode == "fp8") return Fp8WeightGranularity::PerTensor;
  if (mode == "fp8-channel") return Fp8WeightGranularity::PerChannel;
  return std::nullopt;
}

Fp8WeightLinearImpl::Fp8WeightLinearImpl(int64_t in, int64_t out, bool with_bias, Fp8WeightGranularity granularity,
                                         std::optional<DType> compute_dtype)
    : LinearImpl(in, out, with_bias), granularity_(granularity) {
  WEFT_CHECK(in > 0 && out > 0, "[Fp8WeightLinear] expected positive feature counts, got in ", in, " and out ", out);
  WEFT_CHECK(weight.device().is_cpu(), "[Fp8WeightLinear] is a CPU layer, but the tensor frame puts its weight on ",
             weight.device());
  set_compute_dtype(compute_dtype);
  if (skip_init()) {
    // Nothing was drawn: zeros until a checkpoint arrives, rather than quantizing garbage, in
    // memory that stays unmapped until written (building a model to load costs no second copy of
    // the codes that loading replaces).
    const bool per_channel = granularity_ == Fp8WeightGranularity::PerChannel;
    set_quantized(zero_pages({out, in}, kFloat8E4M3FN), per_channel ? ones({out}, kFloat32) : ones({}, kFloat32));
  } else {
    quantize_weight(weight.detach());
  }
}

std::shared_ptr<Fp8WeightLinearImpl> Fp8WeightLinearImpl::from_linear(const nn::LinearImpl& linear,
                                                                      Fp8WeightGranularity granularity,
                                                                      std::optional<DType> compute_dtype) {
  WEFT_CHECK(linear.weight.is_floating_point() && !is_fp8(linear.weight.dtype()),
             "[Fp8WeightLinear] from_linear expects a Linear with a floating weight, got ", linear.weight.dtype());
  // Built without drawing an initialisation (the weights come from `linear`), in its dtype.
  const TensorFrameGuard frame(TensorFrame{linear.weight.dtype(), linear.weight.device(), true});
  auto layer = std::make_shared<Fp8WeightLinearImpl>(linear.in_features, linear.out_features, linear.bias.defined(),
                                                     granularity, compute_dtype);
  layer->quantize_weight(linear.weight.detach());
  if (linear.bias.defined()) Tensor(layer->bias).set_data(linear.bias.detach().clone());
  return layer;
}

void Fp8WeightLinearImpl::reset_parameters() {
  if (!is_fp8(weight.dtype())) {  // the base constructor's call: an ordinary float Linear still
    LinearImpl::reset_parameters();
    return;
  }
  const TensorFrameGuard draw(TensorFrame{std::nullopt, std::nullopt, false});
  Tensor fresh = empty({out_features, in_features}, bias.defined() ? bias.dtype() : default_dtype());
  nn::init::kaiming_uniform_(fresh, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    NoGradGuard no_grad;
    nn::init::uniform_(bias, -bound, bound);
  }
  quantize_weight(fresh);
}

void Fp8WeightLinearImpl::set_compute_dtype(std::optional<DType> dtype) {
  WEFT_CHECK(!dtype || (is_floating(*dtype) && !is_fp8(*dtype)),
             "[Fp8WeightLinear] the compute dtype must be float32, bfloat16, float16 or float64, got ", *dtype);
  compute_dtype_ = dtype;
}

void Fp8WeightLinearImpl::set_quantized(const Tensor& codes, const Tensor& scale) {
  Tensor w = weight;
  if (w.requires_grad()) w.requires_grad_(false);
  w.set_data(codes);
  scale_ = scale;
  granularity_ = scale.dim() == 0 ? Fp8WeightGranularity::PerTensor : Fp8WeightGranularity::PerChannel;
}

void Fp8WeightLinearImpl::quantize_weight(const Tensor& float_weight) {
  WEFT_CHECK(float_weight.defined() && float_weight.is_floating_point() && !is_fp8(float_weight.dtype()) &&
                 float_weight.shape() == Shape({out_features, in_features}),
             "[Fp8WeightLinear] expected a floating weight of shape (", out_features, ", ", in_features, "), got ",
             float_weight.defined() ? describe(float_weight) : std::string("none"));
  const Fp8QuantizedWeight q =
      quantize_fp8_weight(float_weight.detach().to(kCPU), granularity_ == Fp8WeightGranularity::PerChannel);
  set_quantized(q.codes, q.scale);
}

Tensor Fp8WeightLinearImpl::dequantize_weight() const { return dequantize_fp8_weight(weight.detach(), scale_); }

int64_t Fp8WeightLinearImpl::weight_bytes() const { return static_cast<int64_t>(weight.nbytes() + scale_.nbytes()); }

std::string Fp8WeightLinearImpl::extra_repr() const {
  return LinearImpl::extra_repr() + ", granularity=" + granularity_name(granularity_) +
         (compute_dtype_ ? weft::detail::cat(", compute_dtype=", *compute_dtype_) : std::string());
}

Tensor Fp8WeightLinearImpl::forward(const Tensor& input) {
  WEFT_CHECK(input.defined() && input.is_floating_point() && !is_fp8(input.dtype()) && input.dim() >= 1 &&
                 input.size(-1) == in_features && input.device().is_cpu(),
             "[Fp8WeightLinear] expected a floating CPU input (*, ", in_features, "), got ",
             input.defined() ? weft::detail::cat(describe(input), " on ", input.device()) : std::string("none"));
  WEFT_CHECK(weight.dtype() == kFloat8E4M3FN, "[Fp8WeightLinear] the weight is ", weight.dtype(),
             ", no longer float8_e4m3fn codes (Module::to(dtype) converts every parameter; change a model's dtype "
             "before quantizing it)");
  const DType compute = compute_dtype_.value_or(input.dtype());
  const int64_t rows = input.numel() / in_features;
  Shape out_shape = input.shape();
  out_shape.back() = out_features;

  const Tensor x = input.detach().to(compute).to(kFloat32).reshape({rows, in_features}).contiguous();
  const Tensor b = bias.defined() ? bias.detach().to(compute).to(kFloat32) : Tensor();
  const Tensor codes = weight.detach();
  const Tensor scale = scale_;
  Tensor out = fp8_weight_matmul(x, codes, scale, b).to(compute).to(input.dtype()).reshape(out_shape);

  if (autograd::needs_grad({&input, &bias})) {
    const bool input_grad = input.requires_grad(), bias_grad = bias.defined() && bias.requires_grad();
    autograd::record("Fp8WeightLinear", out, {input, bias},
                     [codes, scale, input_grad, bias_grad, rows, out_features = out_features,
                      input_shape = input.shape(), input_dtype = input.dtype()](const Tensor& g) {
                       const Tensor g_rows = g.reshape({rows, out_features}).to(kFloat32);
                       std::vector<Tensor> grads(2);
                       // dL/dx = g · (codes · scale), the weight dequantized for this product only.
                       if (input_grad)
                         grads[0] =
                             matmul(g_rows, dequantize_fp8_weight(codes, scale)).to(input_dtype).reshape(input_shape);
                       if (bias_grad) grads[1] = sum(g_rows, {0});
                       return grads;
                     });
  }
  return out;
}

void Fp8WeightLinearImpl::save_own_state(const std::string& prefix, nn::TensorDict& out) const {
  save_tensor(prefix + "weight", weight, out);
  if (bias.defined()) save_tensor(prefix + "bias", bias, out);
  out.insert(prefix + "weight_scale", scale_);
}

void Fp8WeightLinearImpl::load_own_state(nn::StateLoader& loader, const std::string& prefix) {
  const std::string key = prefix + "weight", scale_key = prefix + "weight_scale";
  if (bias.defined()) load_tensor(loader, prefix + "bias", bias);
  const Tensor* scale = loader.take(scale_key);
  const Tensor* incoming = loader.take(key);
  if (incoming == nullptr) {
    loader.missing(key);
    return;
  }
  const Shape shape{out_features, in_features};
  if (incoming->dtype() == kFloat8E4M3FN) {
    // A quantized checkpoint: the codes and their scales, as they are.
    if (scale == nullptr) {
      loader.missing(scale_key);
    } else if (incoming->shape() != shape) {
      loader.error(weft::detail::cat("'", key, "' holds float8_e4m3fn codes of shape ", incoming->shape(),
                                     ", the layer is ", shape));
    } else if (scale->dtype() != kFloat32 || !(scale->dim() == 0 || scale->shape() == Shape({out_features}))) {
      loader.error(weft::detail::cat("'", scale_key, "' must be a float32 scale of shape () (per tensor) or ",
                                     Shape({out_features}), " (per channel), got ", describe(*scale)));
    } else if (!scales_finite_positive(*scale)) {
      loader.error("'" + scale_key + "' must hold finite, positive scales");
    } else if (fp8_codes_have_nan(incoming->to(kCPU))) {
      loader.error("'" + key + "' holds NaN codes (0x7F or 0xFF), which a quantized weight never contains");
    } else {
      loader.defer([this, codes = exact_clone(incoming->to(kCPU)), s = scale->to(kCPU).contiguous().clone()] {
        set_quantized(codes, s);
      });
    }
    return;
  }
  if (scale != nullptr) {
    loader.error(
        weft::detail::cat("'", scale_key, "' came with a ", incoming->dtype(), " '", key,
                          "'; expected float8_e4m3fn codes beside it, or a floating weight alone to quantize"));
  } else if (!incoming->is_floating_point() || is_fp8(incoming->dtype()) || incoming->shape() != shape) {
    loader.error(weft::detail::cat("'", key, "' must be a floating ", shape,
                                   " weight to quantize, or float8_e4m3fn codes with '", scale_key, "'; got ",
                                   describe(*incoming)));
  } else {
    loader.defer([this, source = *incoming] { quantize_weight(source); });
  }
}

std::shared_ptr<nn::LinearImpl> make_fp8_weight_linear(int64_t in, int64_t out, bool bias,
                                                       Fp8WeightGranularity granularity,
                                                       std::optional<DType> compute_dtype) {
  return std::make_shared<Fp8WeightLinearImpl>(in, out, bias, granularity, compute_dtype);
}

Context fp8_weight_init_context(Fp8WeightGranularity granularity, DType compute) {
  WEFT_CHECK(is_floating(compute) && !is_fp8(compute),
             "[fp8_weight_init_context] the compute dtype must be float32, bfloat16, float16 or float64, got ",
             compute);
  Context context;
  context.push<TensorFrameGuard>(TensorFrame{compute, std::nullopt, std::nullopt});
  nn::ModuleFrame frame;
  frame.linear = [granularity, compute](int64_t in, int64_t out, bool bias) {
    return make_fp8_weight_linear(in, out, bias, granularity, compute);
  };
  context.push<nn::ModuleFrameGuard>(frame);
  return context;
}

}  // namespace weft::precision
