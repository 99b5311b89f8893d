// PrecisionMode: a precision, parsed, and the one table of what each mode means.
//
// A user's precision input ("bf16-mixed", 16, "bf16", ...) is parsed once into a PrecisionMode
// (precision/precision_input.h); from then on plugins, the FSDP/DeepSpeed tables and Fabric ask
// the mode's row instead of comparing strings. Rows are in Lightning's declaration order, which
// the invalid-precision error message lists. A new precision is one row here (and, if it needs
// its own plugin, one PluginKind and one case in make_precision).
#pragma once

#include <cstdint>
#include <string_view>

#include "tensor/dtype.h"

namespace weft::precision {

enum class PrecisionMode : uint8_t {
  TransformerEngine,
  TransformerEngineFloat16,
  Fp16True,
  Fp16Mixed,
  Bf16True,
  Bf16Mixed,
  Fp32True,
  Fp64True,
};

// Which plugin class implements a mode on a single device (make_precision).
enum class PluginKind : uint8_t { Float32, Double, Half, Mixed, TransformerEngine };

struct PrecisionTraits {
  PrecisionMode mode;
  std::string_view name;  // the canonical string, as Lightning spells it
  DType param_dtype;      // the dtype weights are kept in (float32 under *-mixed)
  DType compute_dtype;    // the floating dtype the forward computes in (autocast's under *-mixed)
  bool autocast;          // the forward runs under autocast
  bool loss_scaling;      // backward needs a loss scaler (float16 mixed precision)
  PluginKind plugin;
};

inline constexpr PrecisionTraits kPrecisionModes[] = {
    // mode                                   name                          params     compute    autocast scaling plugin
    {PrecisionMode::TransformerEngine,        "transformer-engine",         kBFloat16, kBFloat16, true,    false,  PluginKind::TransformerEngine},
    {PrecisionMode::TransformerEngineFloat16, "transformer-engine-float16", kFloat16,  kFloat16,  true,    false,  PluginKind::TransformerEngine},
    {PrecisionMode::Fp16True,                 "16-true",                    kFloat16,  kFloat16,  false,   false,  PluginKind::Half},
    {PrecisionMode::Fp16Mixed,                "16-mixed",                   kFloat32,  kFloat16,  true,    true,   PluginKind::Mixed},
    {PrecisionMode::Bf16True,                 "bf16-true",                  kBFloat16, kBFloat16, false,   false,  PluginKind::Half},
    {PrecisionMode::Bf16Mixed,                "bf16-mixed",                 kFloat32,  kBFloat16, true,    false,  PluginKind::Mixed},
    {PrecisionMode::Fp32True,                 "32-true",                    kFloat32,  kFloat32,  false,   false,  PluginKind::Float32},
    {PrecisionMode::Fp64True,                 "64-true",                    kFloat64,  kFloat64,  false,   false,  PluginKind::Double},
};

inline constexpr PrecisionMode kDefaultPrecision = PrecisionMode::Fp32True;

constexpr const PrecisionTraits& precision_traits(PrecisionMode mode) {
  return kPrecisionModes[static_cast<int>(mode)];
}
constexpr std::string_view precision_name(PrecisionMode mode) { return precision_traits(mode).name; }
constexpr bool is_mixed(PrecisionMode mode) { return precision_traits(mode).plugin == PluginKind::Mixed; }
constexpr bool is_true_half(PrecisionMode mode) { return precision_traits(mode).plugin == PluginKind::Half; }

}  // namespace weft::precision
