// Precision inputs: what a user may pass as `precision`, and how it is parsed into one of the
// eight PrecisionModes (precision/precision_mode.h), as Lightning Fabric's connector normalises it
// to a canonical string (reference §1.1–1.3).
//
// Accepted: the canonical strings, the integers 64, 32, 16 and the strings "64", "32", "16",
// "bf16". Aliases map to "64-true", "32-true", "16-mixed", "bf16-mixed"; the 16-bit ones (16,
// "16", "bf16") warn that they are kept for historical reasons. Anything else fails with the
// list of allowed values, printed as Python prints that tuple. A missing precision means
// kDefaultPrecision. Parsing happens once; everything after it uses the mode.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "precision/precision_mode.h"

namespace weft::precision {

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

// The mode a canonical string names exactly (no aliases, no warnings), or nullopt.
std::optional<PrecisionMode> precision_mode_named(std::string_view name);

// Warns (precision/warnings.h) for the 16-bit aliases; throws weft::Error "Precision <repr> is
// invalid. Allowed precision values: (...)" for anything not accepted.
PrecisionMode parse_precision(const PrecisionInput& precision);

// The mode that runs on `accelerator` ("cpu" or "cuda"): fp16 AMP does not exist on the cpu, so
// 16-mixed becomes bf16-mixed there, with a warning. Others pass unchanged.
PrecisionMode precision_for_accelerator(PrecisionMode mode, std::string_view accelerator);

}  // namespace weft::precision

namespace weft::detail {
// Python's repr of a tuple of strings, for error texts that list allowed values: ('a', 'b').
std::string quoted_tuple(std::span<const std::string_view> items);

// The mode `name` names exactly when it is one of `supported`; otherwise the strategy's
// error: "[<Strategy>Precision] `precision='x'` is not supported in <Strategy>. `precision` must be
// one of: ('32-true', ...)."
precision::PrecisionMode supported_precision_mode(std::span<const precision::PrecisionMode> supported,
                                                 std::string_view name, std::string_view strategy);
}  // namespace weft::detail
