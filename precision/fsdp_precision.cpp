// FSDPPrecision's tables (see precision/fsdp_precision.h).
#include "precision/fsdp_precision.h"

#include <algorithm>

#include "precision/precision_input.h"
#include "precision/warnings.h"
#include "tensor/error.h"

namespace weft::precision {
FSDPPrecision::FSDPPrecision(std::string_view precision, std::shared_ptr<GradScaler> scaler)
    : mode_(weft::detail::supported_precision_mode(kSupported, precision, "FSDP")), scaler_(std::move(scaler)) {
  if (precision_traits(mode_).loss_scaling) {
    if (!scaler_) scaler_ = std::make_shared<GradScaler>();
  } else {
    WEFT_CHECK(scaler_ == nullptr, "[FSDPPrecision] `precision='", precision_name(mode_),
               "'` does not use a scaler, found a GradScaler. Pass a scaler only with precision='16-mixed'.");
  }
}

bool FSDPPrecision::is_mixed() const { return precision::is_mixed(mode_); }

DType FSDPPrecision::desired_input_dtype() const { return precision_traits(mode_).param_dtype; }

FSDPMixedPrecision FSDPPrecision::mixed_precision_config() const {
  if (is_true_half(mode_))
    warn("FSDP with `" + precision() + "` enables computation in lower precision. FSDP will always retain a "
         "full-precision copy of the model parameters for sharding.");
  const DType d = precision_traits(mode_).compute_dtype;
  return {d, d, d};
}

std::optional<DType> FSDPPrecision::convert_module_dtype() const {
  if (is_mixed()) return std::nullopt;
  return desired_input_dtype();
}

std::optional<DType> FSDPPrecision::forward_autocast_dtype() const {
  if (!is_mixed()) return std::nullopt;
  return precision_traits(mode_).compute_dtype;
}

std::optional<DType> FSDPPrecision::forward_default_dtype() const {
  if (is_mixed()) return std::nullopt;
  return desired_input_dtype();
}

}  // namespace weft::precision
