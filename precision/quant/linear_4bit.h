// Linear4bit: a Linear whose weight is stored in NF4 or FP4 (QLoRA's 4-bit layer), as
// bitsandbytes.nn.Linear4bit behaves (quantization-fp8.md §B.1.5), on the CPU.
//
//   weight: the packed codes, uint8 ((out · in + 1) / 2, 1), frozen (not differentiable)
//   bias:   an ordinary trainable parameter in the layer's floating dtype
//   the block statistics (QuantState): plain members, saved under the weight's sub-keys
//
// The layer is quantized as soon as it has float weights: at construction (the ordinary Linear
// initialisation, drawn from the same random numbers, then quantized; under a skip-init tensor
// frame nothing is drawn and the weight is the quantization of zeros, in memory that holds no
// resident page until written: zero_4bit), when a float checkpoint
// loads into it (its "weight" (out, in) is quantized on load), or from an existing Linear
// (from_linear). A quantized checkpoint — bitsandbytes' keys, nested statistics included —
// loads as is and saves back byte for byte; its format (nf4/fp4, block size, nesting) becomes
// the layer's. Strict loading passes with every key consumed.
//
// forward(x: (*, in)) -> (*, out): x is rounded to the compute dtype (the option, else x's own
// dtype), multiplied by matmul_4bit (quant_kernels.h; on the CPU gemm_4bit.h) as the `product`
// option says (product_4bit.h): by default exactly as bitsandbytes, the dequantized weight times
// x summed in float32 (a fused kernel that decodes W in registers for up to 16 rows, exactly
// dequantized tiles and a float32 GEMM for more); Product4bit::Int8Activations, asked for by
// name, quantizes x to int8 per block for up to 16 rows (faster, ~1 % of Σ|x·w| off); with a bfloat16 compute dtype, tiles rounded to bfloat16 and weft's bfloat16 GEMM, as
// bitsandbytes multiplies in its compute dtype), the bias added in float32, the result rounded to
// the compute dtype and returned in x's dtype.
// Gradients flow to x (through the dequantized weight, as bitsandbytes' MatMul4Bit) and to the
// bias; the weight gets none. LoRA adapters (precision/quant/lora.h) make such a model trainable.
//
// Deliberate differences from bitsandbytes: quantization happens on the CPU at once (bitsandbytes
// waits for a move to a device); the compute dtype does not latch onto the first input's dtype;
// a loaded checkpoint's format replaces the layer's instead of being dropped (bitsandbytes #1946).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/linear.h"
#include "nn/module_holder.h"
#include "precision/quant/blockwise.h"
#include "precision/quant/product_4bit.h"

namespace weft::precision::quant {

struct Linear4bitOptions {
  QuantKind quant_type = QuantKind::FP4;  // bitsandbytes' Linear4bit default (LinearNF4: nf4)
  bool compress_statistics = true;        // double quantization, bitsandbytes' Params4bit default
  int64_t blocksize = 64;
  std::optional<DType> compute_dtype;     // unset: compute in the input's dtype
  Product4bit product = Product4bit::Exact;  // Int8Activations: x quantized to int8 for up to 16 rows
};

class Linear4bitImpl : public nn::LinearImpl {
 public:
  Linear4bitImpl(int64_t in_features, int64_t out_features, bool bias = true, Linear4bitOptions options = {});
  // A Linear4bit holding `linear`'s weight, quantized, and a copy of its bias (same dtype).
  static std::shared_ptr<Linear4bitImpl> from_linear(const nn::LinearImpl& linear, Linear4bitOptions options);

  Tensor forward(const Tensor& input) override;
  // Draws float weights as Linear does, then quantizes them.
  void reset_parameters() override;
  std::string type_name() const override { return "Linear4bit"; }
  std::string extra_repr() const override;
  void save_own_state(const std::string& prefix, nn::TensorDict& out) const override;
  void load_own_state(nn::StateLoader& loader, const std::string& prefix) override;

  // Replaces the weight by the quantization of `float_weight` (out, in), in this layer's format.
  void quantize_weight(const Tensor& float_weight);
  // The weight as floating values: (out, in) in the dtype it was quantized from.
  Tensor dequantize_weight() const;
  const QuantState& quant_state() const { return state_; }
  const Linear4bitOptions& options() const { return options_; }
  void set_compute_dtype(std::optional<DType> dtype);
  // Bytes of the quantized weight: packed codes plus statistics.
  int64_t weight_bytes() const;
  // The tensors FSDP shards as frozen bytes (Note [Frozen byte storage] in distributed/flat_param.h),
  // named as in the state dict: "weight" (the packed codes), "weight.absmax", under double
  // quantization "weight.nested_absmax" and "weight.block_absmax" (the decoded float32 absmax the
  // kernels read, which is not saved). The handles are the layer's own tensors, so pointing them
  // at other storage moves the layer's data. The format's code tables stay with the layer.
  std::vector<std::pair<std::string, Tensor>> sharded_storage() const;
  // Sets the mean subtracted from the absmax before nesting (QuantState::offset, saved in the
  // format JSON): FSDP loads a full state dict into the sharded statistics and the decoded absmax
  // itself, and the layer's format then takes the loaded offset.
  void set_nested_offset(float offset) { state_.offset = offset; }

 private:
  // decoded_absmax: block_absmax(state) when the caller has it (else it is computed).
  void set_quantized(const Tensor& packed, const QuantState& state, const Tensor& decoded_absmax = Tensor());

  Linear4bitOptions options_;
  QuantState state_;
  Tensor block_absmax_;  // float32 absmax per block, decoded once for the kernels
};

WEFT_MODULE(Linear4bit);

}  // namespace weft::precision::quant
