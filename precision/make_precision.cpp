// Plugin selection from a precision input (reference §1.3).
#include "precision/make_precision.h"

#include "precision/mixed_precision.h"
#include "precision/transformer_engine_precision.h"
#include "precision/true_precision.h"

namespace weft::precision {

std::unique_ptr<Precision> make_precision(const PrecisionInput& precision, const std::string& accelerator) {
  const std::string chosen = precision_for_accelerator(normalize_precision(precision), accelerator);
  if (chosen == "32-true") return std::make_unique<Precision>();
  if (chosen == "64-true") return std::make_unique<DoublePrecision>();
  if (chosen == "16-true" || chosen == "bf16-true") return std::make_unique<HalfPrecision>(chosen);
  if (chosen == "16-mixed" || chosen == "bf16-mixed") return std::make_unique<MixedPrecision>(chosen, accelerator);
  TransformerEngineOptions fp8;
  fp8.weights_dtype = precision_dtype(chosen);
  fp8.device = accelerator;
  return std::make_unique<TransformerEnginePrecision>(std::move(fp8));
}

}  // namespace weft::precision
