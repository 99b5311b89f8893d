// Linear: y = x·Wᵀ + b, with PyTorch's default initialisation.
//
// weight: (out_features, in_features) ~ U(−1/√in, 1/√in) (kaiming_uniform_ with a = √5);
// bias: (out_features) ~ U(−1/√in, 1/√in). Both draw from the default generator, weight first.
//
// `nn::Linear fc(in, out)` is built by make_linear(), which asks the innermost module frame
// (nn/module_init_context.h) whether Linear is replaced; replacements subclass LinearImpl and
// override forward (and whatever else they change). Constructing a LinearImpl directly is how a
// replacement builds its base, and bypasses the seam.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

// Note [Linear dtype rule]: every linear layer (Linear, LazyLinear, Linear4bit, Linear8bitLt,
// Fp8Linear) computes in float64, float32, float16 or bfloat16. A float8 input, or a float8
// compute dtype, is refused with one message naming the layer: float8 is a storage format, and
// FP8 products are what Fp8Linear does, inside fp8_autocast, from an input in a wider dtype.
// `what` reads before the dtype: "an input in", "the compute dtype".
void check_linear_dtype(const char* layer, const char* what, DType dtype);

class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);

  // x: (*, in) · weight: (out, in)ᵀ + bias: (out) -> (*, out)
  Tensor forward(const Tensor& input) override;
  // Draws weight and bias again from the default initialisation.
  virtual void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_features;
  int64_t out_features;
  Tensor weight;
  Tensor bias;  // undefined without bias

 protected:
  // For LazyLinear: in_features unknown (0), parameters uninitialized placeholders in the
  // current tensor frame's dtype and device.
  struct Uninitialized {};
  LinearImpl(Uninitialized, int64_t out_features, bool bias);
};

// Builds a Linear as the innermost module frame says: the frame's replacement, or LinearImpl.
std::shared_ptr<LinearImpl> make_linear(int64_t in_features, int64_t out_features, bool bias = true);

class Linear : public ModuleHolder<LinearImpl> {
 public:
  Linear(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  Linear(std::shared_ptr<LinearImpl> impl) : ModuleHolder(std::move(impl)) {}  // NOLINT
  Linear(int64_t in_features, int64_t out_features, bool bias = true)
      : ModuleHolder(make_linear(in_features, out_features, bias)) {}
};

}  // namespace weft::nn
