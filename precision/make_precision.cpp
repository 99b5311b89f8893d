// Plugin selection from a precision input (reference §1.3).
#include "precision/make_precision.h"

#include "precision/mixed_precision.h"
#include "precision/transformer_engine_precision.h"
#include "precision/true_precision.h"

namespace weft::precision {

std::unique_ptr<Precision> make_precision(const PrecisionInput& precision, const std::string& accelerator) {
  const PrecisionMode mode = precision_for_accelerator(parse_precision(precision), accelerator);
  const std::string name(precision_name(mode));
  switch (precision_traits(mode).plugin) {
    case PluginKind::Float32: return std::make_unique<Precision>();
    case PluginKind::Double: return std::make_unique<DoublePrecision>();
    case PluginKind::Half: return std::make_unique<HalfPrecision>(name);
    case PluginKind::Mixed: return std::make_unique<MixedPrecision>(name, accelerator);
    case PluginKind::TransformerEngine: break;
  }
  TransformerEngineOptions fp8;
  fp8.weights_dtype = precision_traits(mode).param_dtype;
  fp8.device = accelerator;
  return std::make_unique<TransformerEnginePrecision>(std::move(fp8));
}

}  // namespace weft::precision
