// DeepSpeedPrecision's tables (see precision/deepspeed_precision.h).
#include "precision/deepspeed_precision.h"

#include <algorithm>

#include "precision/precision_input.h"
#include "tensor/error.h"

namespace weft::precision {

DeepSpeedPrecision::DeepSpeedPrecision(std::string_view precision)
    : mode_(weft::detail::supported_precision_mode(kSupported, precision, "DeepSpeed")) {}

DType DeepSpeedPrecision::desired_dtype() const { return precision_traits(mode_).compute_dtype; }

std::optional<DType> DeepSpeedPrecision::convert_module_dtype() const {
  if (is_mixed(mode_)) return std::nullopt;
  return desired_dtype();
}

}  // namespace weft::precision
