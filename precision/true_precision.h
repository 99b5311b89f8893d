// The "*-true" plugins: the whole model in one dtype. DoublePrecision is "64-true" (float64),
// HalfPrecision "16-true" (float16) or "bf16-true" (bfloat16).
//
// convert_module casts floating parameters and buffers; both init contexts and the forward
// context set the default floating dtype (a tensor frame only: no layer is replaced); inputs are
// cast to the dtype on the way in and outputs to the default dtype of the caller on the way out
// (float32 normally), floating tensors only (reference §3.2–3.3).
//
// Deliberate difference: Lightning's HalfPrecision accepts any string and silently means float16;
// here anything but "16-true" / "bf16-true" is an error.
#pragma once

#include <string>

#include "precision/precision.h"
#include "tensor/dtype.h"

namespace weft::precision {

class TruePrecision : public Precision {
 public:
  PrecisionMode mode() const override { return mode_; }
  DType dtype() const { return precision_traits(mode_).param_dtype; }

  void convert_module(nn::Module& module) override;
  Context tensor_init_context() override;
  Context module_init_context() override;
  Context forward_context() override;
  Tensor convert_input_tensor(const Tensor& tensor) override;
  Tensor convert_output_tensor(const Tensor& tensor) override;

 protected:
  explicit TruePrecision(PrecisionMode mode) : mode_(mode) {}

 private:
  PrecisionMode mode_;
};

class DoublePrecision : public TruePrecision {
 public:
  DoublePrecision() : TruePrecision(PrecisionMode::Fp64True) {}
};

class HalfPrecision : public TruePrecision {
 public:
  explicit HalfPrecision(const std::string& precision = "16-true");
};

}  // namespace weft::precision
