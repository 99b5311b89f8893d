// Normalisation of precision inputs (see precision/precision_input.h). The alias table and the
// order of the allowed-values tuple follow Lightning's connector, so error texts match it.
#include "precision/precision_input.h"

#include <algorithm>

#include "precision/warnings.h"
#include "tensor/error.h"

namespace weft::precision {
namespace {

constexpr std::array<int, 3> kIntAliases = {64, 32, 16};
constexpr std::array<std::string_view, 4> kStringAliases = {"64", "32", "16", "bf16"};

std::string canonical_of_alias(std::string_view alias) {
  if (alias == "64") return "64-true";
  if (alias == "32") return "32-true";
  if (alias == "16") return "16-mixed";
  return "bf16-mixed";
}

// Python's repr of the tuple of allowed values: strings quoted, integers bare.
std::string allowed_values_text() {
  std::string ints;
  for (int i : kIntAliases) ints += ", " + std::to_string(i);
  const std::string strings = detail::quoted_tuple(kPrecisionStrings);
  const std::string aliases = detail::quoted_tuple(kStringAliases);
  return strings.substr(0, strings.size() - 1) + ints + ", " + aliases.substr(1);
}

bool is_allowed(const PrecisionInput& p) {
  const std::string s = p.str();
  if (p.is_int()) return std::find(kIntAliases.begin(), kIntAliases.end(), std::stoi(s)) != kIntAliases.end();
  return is_canonical_precision(s) || std::find(kStringAliases.begin(), kStringAliases.end(), s) != kStringAliases.end();
}

}  // namespace

std::string PrecisionInput::str() const {
  if (const int* i = std::get_if<int>(&value_)) return std::to_string(*i);
  return std::get<std::string>(value_);
}

std::string PrecisionInput::repr() const {
  if (is_int()) return str();
  std::string quoted(1, '\'');
  quoted.append(str()).push_back('\'');
  return quoted;
}

bool is_canonical_precision(std::string_view precision) {
  return std::find(kPrecisionStrings.begin(), kPrecisionStrings.end(), precision) != kPrecisionStrings.end();
}

std::string normalize_precision(const PrecisionInput& precision) {
  WEFT_CHECK(is_allowed(precision), "[precision] Precision ", precision.repr(),
             " is invalid. Allowed precision values: ", allowed_values_text());
  const std::string s = precision.str();
  if (is_canonical_precision(s)) return s;
  const std::string canonical = canonical_of_alias(s);
  if (!s.starts_with("32") && !s.starts_with("64"))
    warn("`precision=" + s + "` is supported for historical reasons but its usage is discouraged. "
         "Please set your precision to " + canonical + " instead!");
  return canonical;
}

DType precision_dtype(std::string_view precision) {
  WEFT_CHECK(is_canonical_precision(precision), "[precision] expected a canonical precision (normalize_precision "
             "gives one), got '", precision, "'");
  if (precision == "64-true") return kFloat64;
  if (precision == "32-true") return kFloat32;
  if (precision.starts_with("16-") || precision == "transformer-engine-float16") return kFloat16;
  return kBFloat16;
}

std::string precision_for_accelerator(std::string_view precision, std::string_view accelerator) {
  WEFT_CHECK(accelerator == "cpu" || accelerator == "cuda", "[precision] expected the accelerator 'cpu' or 'cuda', got '",
             accelerator, "'");
  WEFT_CHECK(is_canonical_precision(precision), "[precision] expected a canonical precision (normalize_precision "
             "gives one), got '", precision, "'");
  if (accelerator == "cpu" && precision == "16-mixed") {
    warn("You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. "
         "Using `precision='bf16-mixed'` instead.");
    return "bf16-mixed";
  }
  return std::string(precision);
}

}  // namespace weft::precision

namespace weft::detail {
std::string quoted_tuple(std::span<const std::string_view> items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + std::string(items[i]) + "'";
  return out + ")";
}
}  // namespace weft::detail
