// Linear4bit: construction and quantization, the forward with its backward, and the state-dict
// hooks in bitsandbytes' layout.
#include "precision/quant/linear_4bit.h"

#include <cmath>

#include "nn/init.h"
#include "precision/quant/gemm_4bit.h"
#include "precision/quant/quant_kernels.h"
#include "precision/quant/quant_state.h"
#include "tensor/autograd.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::precision::quant {
namespace {

std::string format_name(QuantKind type) { return std::string(quant_format(type).name); }

Weights4bit weights_of(const Tensor& packed, const Tensor& absmax, const QuantState& state) {
  return {packed.data<uint8_t>(), absmax.data<float>(), state.shape[0], state.shape[1], state.blocksize, state.type};
}

}  // namespace

Linear4bitImpl::Linear4bitImpl(int64_t in, int64_t out, bool with_bias, Linear4bitOptions options)
    : LinearImpl(in, out, with_bias), options_(options) {
  WEFT_CHECK(options_.quant_type == QuantKind::NF4 || options_.quant_type == QuantKind::FP4,
             "[Linear4bit] quant_type must be nf4 or fp4, got ", quant_format(options_.quant_type).name);
  check_block_size(quant_format(options_.quant_type), options_.blocksize, "Linear4bit");
  WEFT_CHECK(in > 0 && out > 0, "[Linear4bit] expected positive feature counts, got in ", in, " and out ", out);
  set_compute_dtype(options_.compute_dtype);
  if (skip_init()) {
    // Built to be loaded (skip-init: from_pretrained), the float weight holds nothing worth
    // quantizing: the quantization of zeros stands in, in memory that stays unmapped until
    // written, so building a model costs no second copy of the weights that loading replaces.
    ZeroQuantized4bit zero = zero_4bit({out, in}, weight.dtype(), options_.quant_type, options_.blocksize,
                                       options_.compress_statistics);
    set_quantized(zero.packed, zero.state, zero.block_absmax);
  } else {
    quantize_weight(weight.detach());
  }
}

std::shared_ptr<Linear4bitImpl> Linear4bitImpl::from_linear(const nn::LinearImpl& linear, Linear4bitOptions options) {
  WEFT_CHECK(linear.weight.is_floating_point(), "[Linear4bit] from_linear expects a floating Linear");
  // Built without drawing an initialisation (the weights come from `linear`), in its dtype.
  const TensorFrameGuard frame(TensorFrame{linear.weight.dtype(), linear.weight.device(), true});
  auto layer = std::make_shared<Linear4bitImpl>(linear.in_features, linear.out_features, linear.bias.defined(), options);
  layer->quantize_weight(linear.weight.detach());
  if (linear.bias.defined()) {
    Tensor(layer->bias).set_data(linear.bias.detach().clone());
  }
  return layer;
}

void Linear4bitImpl::reset_parameters() {
  if (weight.is_floating_point()) {
    LinearImpl::reset_parameters();
    return;
  }
  // Already quantized: draw a float weight of the same dtype and quantize it.
  Tensor fresh = empty({out_features, in_features}, state_.dtype);
  nn::init::kaiming_uniform_(fresh, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    NoGradGuard no_grad;
    nn::init::uniform_(bias, -bound, bound);
  }
  quantize_weight(fresh);
}

void Linear4bitImpl::set_compute_dtype(std::optional<DType> dtype) {
  if (dtype) nn::check_linear_dtype("Linear4bit", "the compute dtype", *dtype);
  options_.compute_dtype = dtype;
}

void Linear4bitImpl::set_quantized(const Tensor& packed, const QuantState& state, const Tensor& decoded_absmax) {
  state_ = state;
  // Without nesting the kernels read the absmax itself: one tensor, so a sharded copy is one too.
  if (!state_.nested) state_.absmax = state_.absmax.contiguous();
  block_absmax_ = !state_.nested ? state_.absmax : decoded_absmax.defined() ? decoded_absmax : block_absmax(state_);
  Tensor w = weight;
  if (w.requires_grad()) w.requires_grad_(false);
  w.set_data(packed);
}

void Linear4bitImpl::quantize_weight(const Tensor& float_weight) {
  WEFT_CHECK(float_weight.shape() == Shape({out_features, in_features}), "[Linear4bit] expected a weight of shape (",
             out_features, ", ", in_features, "), got ", float_weight.shape());
  auto [packed, state] =
      quantize_4bit(float_weight.detach(), options_.quant_type, options_.blocksize, options_.compress_statistics);
  set_quantized(packed, state);
}

Tensor Linear4bitImpl::dequantize_weight() const { return dequantize_4bit(weight, state_); }

int64_t Linear4bitImpl::weight_bytes() const {
  int64_t bytes = static_cast<int64_t>(weight.nbytes() + state_.absmax.nbytes());
  if (state_.nested) bytes += static_cast<int64_t>(state_.nested_absmax.nbytes()) + 4;
  return bytes;
}

std::vector<std::pair<std::string, Tensor>> Linear4bitImpl::sharded_storage() const {
  std::vector<std::pair<std::string, Tensor>> out{{"weight", weight}, {"weight.absmax", state_.absmax}};
  if (state_.nested) {
    out.emplace_back("weight.nested_absmax", state_.nested_absmax);
    out.emplace_back("weight.block_absmax", block_absmax_);
  }
  return out;
}

std::string Linear4bitImpl::extra_repr() const {
  return LinearImpl::extra_repr() + ", quant_type=" + format_name(state_.type) +
         ", blocksize=" + std::to_string(state_.blocksize) +
         ", compress_statistics=" + (state_.nested ? "true" : "false") +
         ", product=" + product_4bit_name(options_.product);
}

Tensor Linear4bitImpl::forward(const Tensor& input) {
  if (input.defined()) nn::check_linear_dtype("Linear4bit", "an input in", input.dtype());
  WEFT_CHECK(input.defined() && input.is_floating_point() && input.dim() >= 1 && input.size(-1) == in_features,
             "[Linear4bit] expected a floating input (*, ", in_features, "), got ",
             input.defined() ? weft::detail::cat(input.shape(), " ", input.dtype()) : std::string("none"));
  const DType compute = options_.compute_dtype.value_or(input.dtype());
  const int64_t rows = input.numel() / in_features;
  Shape out_shape = input.shape();
  out_shape.back() = out_features;

  // x rounded to the compute dtype, multiplied in float32, or in bfloat16 for that compute dtype
  // (precision/quant/gemm_4bit.h).
  const DType product = compute == kBFloat16 ? kBFloat16 : kFloat32;
  const Tensor x = input.detach().to(compute).to(product).reshape({rows, in_features}).contiguous();
  const Tensor packed = weight.detach();
  Tensor y = matmul_4bit(x, packed, state_, block_absmax_, options_.product);
  if (bias.defined()) {
    NoGradGuard no_grad;
    y = add(y, bias.detach().to(compute).to(kFloat32));
  }
  Tensor out = y.to(compute).to(input.dtype()).reshape(out_shape);

  if (autograd::needs_grad({&input, &bias})) {
    const bool input_grad = input.requires_grad(), bias_grad = bias.defined() && bias.requires_grad();
    autograd::record("Linear4bit", out, {input, bias},
                     [packed, absmax = block_absmax_, state = state_, input_grad, bias_grad, rows,
                      input_shape = input.shape()](const Tensor& g) {
                       const int64_t n = state.shape[0], k = state.shape[1];
                       const Tensor g_rows = g.reshape({rows, n}).to(kFloat32);
                       std::vector<Tensor> grads(2);
                       if (input_grad) {
                         // dL/dx = g · W, with W dequantized exactly (bitsandbytes' MatMul4Bit), on
                         // the CPU (the device seam covers the forward product only) and returned
                         // on g's device.
                         const Tensor g_dense = g_rows.to(kCPU).contiguous();
                         const Tensor packed_cpu = packed.to(kCPU).contiguous();
                         const Tensor absmax_cpu = absmax.to(kCPU).contiguous();
                         Tensor dx = weft::detail::make_tensor({rows, k}, kFloat32, kCPU);
                         gemm_4bit_input_grad(g_dense.data<float>(), rows, weights_of(packed_cpu, absmax_cpu, state),
                                              dx.data<float>());
                         grads[0] = dx.reshape(input_shape).to(g.device());
                       }
                       if (bias_grad) grads[1] = sum(g_rows, {0});
                       return grads;
                     });
  }
  return out;
}

void Linear4bitImpl::save_own_state(const std::string& prefix, nn::TensorDict& out) const {
  save_tensor(prefix + "weight", weight, out);
  if (bias.defined()) save_tensor(prefix + "bias", bias, out);
  save_quant_state(state_, prefix + "weight.", out);
}

void Linear4bitImpl::load_own_state(nn::StateLoader& loader, const std::string& prefix) {
  const std::string key = prefix + "weight";
  if (bias.defined()) load_tensor(loader, prefix + "bias", bias);
  if (has_quant_state(loader, key + ".")) {
    // A quantized checkpoint: the codes and bitsandbytes' statistics, as they are.
    const Tensor* codes = loader.take(key);
    if (codes == nullptr) {
      loader.missing(key);
      return;
    }
    try {
      const Tensor packed = codes->contiguous();
      QuantState state = load_quant_state(loader, key + ".", packed);
      WEFT_CHECK(state.shape == Shape({out_features, in_features}), "[Linear4bit] the quant_state describes a weight of ",
                 "shape ", state.shape, ", the layer is (", out_features, ", ", in_features, ")");
      loader.defer([this, packed = packed.reshape({-1, 1}), state] { set_quantized(exact_clone(packed), state); });
    } catch (const Error& e) {  // named by the key, as the loader's other errors are
      loader.error("'" + key + "': " + e.what());
    }
    return;
  }
  // A float checkpoint: quantize on load.
  const Tensor* incoming = loader.take(key);
  if (incoming == nullptr) {
    loader.missing(key);
  } else if (!incoming->is_floating_point() || incoming->shape() != Shape({out_features, in_features})) {
    loader.error(weft::detail::cat("'", key, "' must be a floating (", out_features, ", ", in_features,
                                   ") weight to quantize, or come with its '", key,
                                   ".quant_state.bitsandbytes__*' statistics; got ", incoming->shape(), " ",
                                   incoming->dtype()));
  } else {
    const Tensor source = *incoming;
    loader.defer([this, source] {
      // Quantized from the checkpoint's values in the dtype the layer was built in.
      quantize_weight(source.to(state_.dtype));
    });
  }
}

}  // namespace weft::precision::quant
