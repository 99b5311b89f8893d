// Precision inputs: what a user may pass as `precision`, and how it is normalised to one of the
// eight canonical strings, as Lightning Fabric's connector does (reference §1.1–1.3).
//
// Accepted: the canonical strings, the integers 64, 32, 16 and the strings "64", "32", "16",
// "bf16". Aliases map to "64-true", "32-true", "16-mixed", "bf16-mixed"; the 16-bit ones (16,
// "16", "bf16") warn that they are kept for historical reasons. Anything else fails with the
// list of allowed values, printed as Python prints that tuple. A missing precision means
// kDefaultPrecision.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "tensor/dtype.h"

namespace weft::precision {

// In Lightning's declaration order.
inline constexpr std::array<std::string_view, 8> kPrecisionStrings = {
    "transformer-engine", "transformer-engine-float16", "16-true", "16-mixed",
    "bf16-true",          "bf16-mixed",                 "32-true", "64-true",
};
inline constexpr std::string_view kDefaultPrecision = "32-true";

// A precision as the user wrote it: a string ("bf16-mixed", "16") or an integer (16).
class PrecisionInput {
 public:
  PrecisionInput(std::string value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  PrecisionInput(const char* value) : value_(std::string(value)) {}       // NOLINT
  PrecisionInput(std::string_view value) : value_(std::string(value)) {}  // NOLINT
  PrecisionInput(int value) : value_(value) {}                            // NOLINT

  bool is_int() const { return std::holds_alternative<int>(value_); }
  std::string str() const;   // as Python's str(): 16-mixed, 16
  std::string repr() const;  // as Python's repr(): '16-mixed', 16

 private:
  std::variant<std::string, int> value_;
};

bool is_canonical_precision(std::string_view precision);

// One of kPrecisionStrings; warns (precision/warnings.h) for the 16-bit aliases; throws
// weft::Error "Precision <repr> is invalid. Allowed precision values: (...)" otherwise.
std::string normalize_precision(const PrecisionInput& precision);

// The floating dtype a canonical precision is named after: 64-true float64, 32-true float32,
// 16-true / 16-mixed / transformer-engine-float16 float16, bf16-true / bf16-mixed /
// transformer-engine bfloat16. For *-mixed it is the autocast dtype, not the weights' dtype.
DType precision_dtype(std::string_view precision);

// The precision that runs on `accelerator` ("cpu" or "cuda"): fp16 AMP does not exist on the
// cpu, so "16-mixed" becomes "bf16-mixed" there, with a warning. Others pass unchanged.
std::string precision_for_accelerator(std::string_view precision, std::string_view accelerator);

}  // namespace weft::precision

namespace weft::detail {
// Python's repr of a tuple of strings, for error texts that list allowed values: ('a', 'b').
std::string quoted_tuple(std::span<const std::string_view> items);
}  // namespace weft::detail
