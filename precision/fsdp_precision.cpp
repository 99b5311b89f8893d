// FSDPPrecision's tables (see precision/fsdp_precision.h).
#include "precision/fsdp_precision.h"

#include <algorithm>

#include "precision/precision_input.h"
#include "precision/warnings.h"
#include "tensor/error.h"

namespace weft::precision {
FSDPPrecision::FSDPPrecision(std::string_view precision, std::shared_ptr<GradScaler> scaler)
    : precision_(precision), scaler_(std::move(scaler)) {
  WEFT_CHECK(std::find(kSupported.begin(), kSupported.end(), precision) != kSupported.end(),
             "[FSDPPrecision] `precision='", precision, "'` is not supported in FSDP. `precision` must be one of: ",
             detail::quoted_tuple(kSupported), ".");
  if (precision_ == "16-mixed") {
    if (!scaler_) scaler_ = std::make_shared<GradScaler>();
  } else {
    WEFT_CHECK(scaler_ == nullptr, "[FSDPPrecision] `precision='", precision_,
               "'` does not use a scaler, found a GradScaler. Pass a scaler only with precision='16-mixed'.");
  }
}

bool FSDPPrecision::is_mixed() const { return precision_.ends_with("-mixed"); }

DType FSDPPrecision::desired_input_dtype() const { return is_mixed() ? kFloat32 : precision_dtype(precision_); }

FSDPMixedPrecision FSDPPrecision::mixed_precision_config() const {
  if (precision_ == "16-true" || precision_ == "bf16-true")
    warn("FSDP with `" + precision_ + "` enables computation in lower precision. FSDP will always retain a "
         "full-precision copy of the model parameters for sharding.");
  const DType d = precision_dtype(precision_);
  return {d, d, d};
}

std::optional<DType> FSDPPrecision::convert_module_dtype() const {
  if (is_mixed()) return std::nullopt;
  return desired_input_dtype();
}

std::optional<DType> FSDPPrecision::forward_autocast_dtype() const {
  if (!is_mixed()) return std::nullopt;
  return precision_dtype(precision_);
}

std::optional<DType> FSDPPrecision::forward_default_dtype() const {
  if (is_mixed()) return std::nullopt;
  return desired_input_dtype();
}

}  // namespace weft::precision
