// DeepSpeedPrecision's tables (see precision/deepspeed_precision.h).
#include "precision/deepspeed_precision.h"

#include <algorithm>

#include "precision/precision_input.h"
#include "tensor/error.h"

namespace weft::precision {

DeepSpeedPrecision::DeepSpeedPrecision(std::string_view precision) : precision_(precision) {
  WEFT_CHECK(std::find(kSupported.begin(), kSupported.end(), precision) != kSupported.end(),
             "[DeepSpeedPrecision] `precision='", precision, "'` is not supported in DeepSpeed. `precision` must be one "
             "of: ", detail::quoted_tuple(kSupported), ".");
}

DType DeepSpeedPrecision::desired_dtype() const { return precision_dtype(precision_); }

std::optional<DType> DeepSpeedPrecision::convert_module_dtype() const {
  if (precision_.ends_with("-mixed")) return std::nullopt;
  return desired_dtype();
}

}  // namespace weft::precision
