// DeepSpeedPrecision: which dtypes a DeepSpeed-style (ZeRO) engine uses for each precision
// setting (reference fabric-precision.md §3.6). Pure configuration, like FSDPPrecision.
//
//   precision   desired (inputs)   convert_module   init contexts
//   32-true     f32                f32              f32
//   16-true     f16                f16              f16
//   bf16-true   bf16               bf16             bf16
//   16-mixed    f16                unchanged        none (module init stays f32)
//   bf16-mixed  bf16               unchanged        none
//
// Inputs are cast to the half dtype even in the mixed modes, because the engine keeps its own
// half-precision copy of the model and runs that. There is no forward context and no scaler
// (the engine scales the loss itself); backward and the optimizer step go through the engine.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "precision/precision_mode.h"
#include "tensor/dtype.h"

namespace weft::precision {

class DeepSpeedPrecision {
 public:
  static constexpr std::array<PrecisionMode, 5> kSupported = {PrecisionMode::Fp32True, PrecisionMode::Fp16True,
                                                              PrecisionMode::Bf16True, PrecisionMode::Fp16Mixed,
                                                              PrecisionMode::Bf16Mixed};

  explicit DeepSpeedPrecision(std::string_view precision);

  PrecisionMode mode() const { return mode_; }
  std::string precision() const { return std::string(precision_name(mode_)); }
  // The dtype inputs are cast to (convert_input).
  DType desired_dtype() const;
  // The dtype convert_module casts to and the init contexts' default dtype: the desired dtype
  // for *-true, none for mixed.
  std::optional<DType> convert_module_dtype() const;
  std::optional<DType> tensor_init_dtype() const { return convert_module_dtype(); }
  std::optional<DType> module_init_dtype() const { return convert_module_dtype(); }

 private:
  PrecisionMode mode_;
};

}  // namespace weft::precision
