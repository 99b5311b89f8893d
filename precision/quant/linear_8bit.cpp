// Linear8bitLt: both modes' forward with its backward, quantization, and the state-dict hooks in
// bitsandbytes' layout.
#include "precision/quant/linear_8bit.h"

#include <algorithm>
#include <cstring>

#include "precision/quant/llm_int8.h"
#include "precision/quant/quant_kernels.h"
#include "tensor/autograd.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::precision::quant {

Linear8bitLtImpl::Linear8bitLtImpl(int64_t in, int64_t out, bool with_bias, Linear8bitLtOptions options)
    : LinearImpl(in, out, with_bias), options_(options) {
  WEFT_CHECK(options_.threshold >= 0, "[Linear8bitLt] the outlier threshold must be >= 0 (0 disables it), got ",
             options_.threshold);
  WEFT_CHECK(in > 0 && out > 0, "[Linear8bitLt] expected positive feature counts, got in ", in, " and out ", out);
  if (options_.has_fp16_weights) return;
  // Built to be loaded (skip-init: from_pretrained), the float weight holds nothing worth
  // quantizing: zero codes stand in until the checkpoint's arrive, in memory that stays unmapped
  // until written, so building a model costs no second copy of the int8 weights that loading
  // then replaces.
  if (skip_init()) set_quantized(zero_pages({out, in}, kInt8), ones({out}, kFloat32));
  else quantize_weight(weight.detach());
}

std::shared_ptr<Linear8bitLtImpl> Linear8bitLtImpl::from_linear(const nn::LinearImpl& linear,
                                                                 Linear8bitLtOptions options) {
  WEFT_CHECK(linear.weight.is_floating_point(), "[Linear8bitLt] from_linear expects a floating Linear");
  const TensorFrameGuard frame(TensorFrame{linear.weight.dtype(), linear.weight.device(), true});
  auto layer =
      std::make_shared<Linear8bitLtImpl>(linear.in_features, linear.out_features, linear.bias.defined(), options);
  if (options.has_fp16_weights) {
    Tensor(layer->weight).set_data(linear.weight.detach().clone());
  } else {
    layer->quantize_weight(linear.weight.detach());
  }
  if (linear.bias.defined()) Tensor(layer->bias).set_data(linear.bias.detach().clone());
  return layer;
}

void Linear8bitLtImpl::reset_parameters() {
  if (weight.is_floating_point()) {
    LinearImpl::reset_parameters();
    return;
  }
  const TensorFrameGuard frame(TensorFrame{bias.defined() ? bias.dtype() : kFloat32, {}, {}});
  nn::Linear fresh(in_features, out_features, bias.defined());
  quantize_weight(fresh->weight.detach());
  if (bias.defined()) {
    NoGradGuard no_grad;
    Tensor(bias).copy_(fresh->bias);
  }
}

void Linear8bitLtImpl::set_quantized(const Tensor& codes, const Tensor& scb) {
  Tensor w = weight;
  if (w.requires_grad()) w.requires_grad_(false);
  w.set_data(codes);
  scb_ = scb;
}

void Linear8bitLtImpl::quantize_weight(const Tensor& float_weight) {
  WEFT_CHECK(!options_.has_fp16_weights, "[Linear8bitLt] an int8-training layer keeps its floating weight");
  WEFT_CHECK(float_weight.is_floating_point() && float_weight.shape() == Shape({out_features, in_features}),
             "[Linear8bitLt] expected a floating weight of shape (", out_features, ", ", in_features, "), got ",
             float_weight.shape(), " ", float_weight.dtype());
  // bitsandbytes quantizes the float16 weight (Int8Params._quantize). Each row is quantized on its
  // own (no outlier columns for a weight), so on the CPU it goes a slab of rows at a time into
  // codes of their exact size, which stay as long as the layer (tensor/cpu/exact_memory.h): no
  // float16 or float32 copy of the whole weight is made, nor kept by the caching allocator.
  const Tensor w = float_weight.detach();
  if (!w.device().is_cpu()) {
    const Int8Rows q = int8_vectorwise_quant(w.to(kFloat16));
    set_quantized(q.codes, q.stats);
    return;
  }
  constexpr int64_t kSlabValues = int64_t{1} << 18;
  Tensor codes = exact_empty({out_features, in_features}, kInt8);
  Tensor stats = empty({out_features}, TensorOptions(kFloat32).device(kCPU));
  const int64_t step = std::max<int64_t>(1, kSlabValues / in_features);
  for (int64_t row = 0; row < out_features; row += step) {
    const int64_t rows = std::min(step, out_features - row);
    const Int8Rows q = int8_vectorwise_quant(w.narrow(0, row, rows).to(kFloat16));
    codes.narrow(0, row, rows).copy_(q.codes);
    stats.narrow(0, row, rows).copy_(q.stats);
  }
  set_quantized(codes, stats);
}

void Linear8bitLtImpl::requantize_if_changed() {
  const Tensor w = weight.detach().contiguous();
  // The bytes are compared where the host can read them; a weight on another device is
  // quantized again every step.
  if (quantized_from_.defined() && w.device().is_cpu() && quantized_from_.device().is_cpu() &&
      quantized_from_.dtype() == w.dtype() && quantized_from_.shape() == w.shape() &&
      std::memcmp(quantized_from_.data_ptr(), w.data_ptr(), w.nbytes()) == 0)
    return;
  const Int8Rows q = int8_vectorwise_quant(w.to(kFloat16));
  codes_ = q.codes;
  scb_ = q.stats;
  quantized_from_ = w.clone();
}

int64_t Linear8bitLtImpl::weight_bytes() const {
  return static_cast<int64_t>(weight.nbytes() + (scb_.defined() ? scb_.nbytes() : 0));
}

std::string Linear8bitLtImpl::extra_repr() const {
  return LinearImpl::extra_repr() + ", has_fp16_weights=" + (options_.has_fp16_weights ? "true" : "false") +
         ", threshold=" + weft::detail::cat(options_.threshold);
}

Tensor Linear8bitLtImpl::forward(const Tensor& input) {
  if (input.defined()) nn::check_linear_dtype("Linear8bitLt", "an input in", input.dtype());
  WEFT_CHECK(input.defined() && input.is_floating_point() && input.dim() >= 1 && input.size(-1) == in_features,
             "[Linear8bitLt] expected a floating input (*, ", in_features, "), got ",
             input.defined() ? weft::detail::cat(input.shape(), " ", input.dtype()) : std::string("none"));
  const int64_t rows = input.numel() / in_features;
  Shape out_shape = input.shape();
  out_shape.back() = out_features;
  const Tensor x = input.detach().reshape({rows, in_features});
  const Int8Rows qx = int8_vectorwise_quant(x.to(kFloat16), options_.threshold);
  const Tensor b = bias.defined() ? bias.detach().to(input.dtype()) : Tensor();

  if (options_.has_fp16_weights) requantize_if_changed();
  const Tensor cb = options_.has_fp16_weights ? codes_ : weight.detach();
  const Tensor scb = scb_;
  // The codes are the weight's only copy: the GEMM packs them per product where a prompt makes
  // that pay, and reads them in place at a token's few rows (Note [A few rows: B in place] in
  // int8_gemm.cpp), so no packed copy doubles the layer's memory.
  Tensor out = int8_mixed_scaled_mm(x, qx, cb, scb, b).reshape(out_shape);

  const Tensor w = options_.has_fp16_weights ? weight : Tensor();
  if (autograd::needs_grad({&input, &w, &bias})) {
    const bool input_grad = input.requires_grad(), weight_grad = w.defined() && w.requires_grad();
    const bool bias_grad = bias.defined() && bias.requires_grad();
    autograd::record("Linear8bitLt", out, {input, w, bias},
                     [cb, scb, x = weight_grad ? x.to(kFloat32) : Tensor(), input_grad, weight_grad, bias_grad, rows,
                      out_features = out_features, input_shape = input.shape()](const Tensor& g) {
                       const Tensor g_rows = g.reshape({rows, out_features}).to(kFloat32);
                       std::vector<Tensor> grads(3);
                       if (input_grad) grads[0] = int8_dequant_matmul(g_rows, cb, scb).reshape(input_shape);
                       if (weight_grad) grads[1] = matmul(g_rows.t(), x);
                       if (bias_grad) grads[2] = sum(g_rows, {0});
                       return grads;
                     });
  }
  return out;
}

void Linear8bitLtImpl::save_own_state(const std::string& prefix, nn::TensorDict& out) const {
  save_tensor(prefix + "weight", weight, out);
  if (bias.defined()) save_tensor(prefix + "bias", bias, out);
  if (options_.has_fp16_weights) return;
  out.insert(prefix + "SCB", scb_);
  out.insert(prefix + "weight_format", zeros({}, kUInt8));  // 0: row-major, the only format
}

void Linear8bitLtImpl::load_own_state(nn::StateLoader& loader, const std::string& prefix) {
  const std::string key = prefix + "weight";
  if (bias.defined()) load_tensor(loader, prefix + "bias", bias);
  const Tensor* scb = loader.take(prefix + "SCB");
  const Tensor* format = loader.take(prefix + "weight_format");
  if (format != nullptr && !(format->numel() == 1 && !format->is_floating_point() && format->item<int64_t>() == 0))
    loader.error("'" + prefix + "weight_format' must be 0 (row-major): only 'row' weight format is supported");
  if (options_.has_fp16_weights) {
    if (scb != nullptr)
      loader.error("'" + prefix + "SCB': loading a quantized checkpoint into Linear8bitLt with trainable floating "
                   "weights (int8 training) is not supported; build the layer for int8 inference");
    load_tensor(loader, key, weight);
    return;
  }
  const Tensor* incoming = loader.take(key);
  if (incoming == nullptr) {
    loader.missing(key);
    return;
  }
  const Shape shape{out_features, in_features};
  if (scb != nullptr) {
    // A quantized checkpoint: int8 codes and their row scales, as they are.
    if (incoming->dtype() != kInt8 || incoming->shape() != shape) {
      loader.error(weft::detail::cat("'", key, "' must be int8 codes of shape ", shape, " beside its SCB, got ",
                                     incoming->shape(), " ", incoming->dtype()));
    } else if (scb->dtype() != kFloat32 || scb->numel() != out_features) {
      loader.error(weft::detail::cat("'", prefix, "SCB' must hold ", out_features, " float32 row scales, got ",
                                     scb->shape(), " ", scb->dtype()));
    } else if (amin(incoming->to(kInt32)).item<int64_t>() < -127) {
      loader.error("'" + key + "' holds -128, which vector-wise quantization never produces");
    } else {
      loader.defer([this, codes = exact_clone(*incoming), s = scb->reshape({out_features}).clone()] {
        set_quantized(codes, s);
      });
    }
    return;
  }
  if (!incoming->is_floating_point() || incoming->shape() != shape) {
    loader.error(weft::detail::cat("'", key, "' must be a floating ", shape, " weight to quantize, or int8 codes with '",
                                   prefix, "SCB'; got ", incoming->shape(), " ", incoming->dtype()));
    return;
  }
  loader.defer([this, source = *incoming] { quantize_weight(source); });
}

}  // namespace weft::precision::quant
