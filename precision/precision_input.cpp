// Parsing of precision inputs (see precision/precision_input.h). The alias table and the order of
// the allowed-values tuple follow Lightning's connector, so error texts match it.
#include "precision/precision_input.h"

#include <algorithm>
#include <array>
#include <vector>

#include "precision/warnings.h"
#include "tensor/enum_check.h"
#include "tensor/error.h"

namespace weft::precision {
namespace {

constexpr std::array<int, 3> kIntAliases = {64, 32, 16};
constexpr std::array<std::string_view, 4> kStringAliases = {"64", "32", "16", "bf16"};

PrecisionMode mode_of_alias(std::string_view alias) {
  if (alias == "64") return PrecisionMode::Fp64True;
  if (alias == "32") return PrecisionMode::Fp32True;
  if (alias == "16") return PrecisionMode::Fp16Mixed;
  return PrecisionMode::Bf16Mixed;
}

// Python's repr of the tuple of allowed values: strings quoted, integers bare.
std::string allowed_values_text() {
  std::string ints;
  for (int i : kIntAliases) ints += ", " + std::to_string(i);
  std::vector<std::string_view> names;
  for (const auto& row : kPrecisionModes) names.push_back(row.name);
  const std::string strings = detail::quoted_tuple(names);
  const std::string aliases = detail::quoted_tuple(kStringAliases);
  return strings.substr(0, strings.size() - 1) + ints + ", " + aliases.substr(1);
}

bool is_allowed(const PrecisionInput& p) {
  const std::string s = p.str();
  if (p.is_int()) return std::find(kIntAliases.begin(), kIntAliases.end(), std::stoi(s)) != kIntAliases.end();
  return precision_mode_named(s) || std::find(kStringAliases.begin(), kStringAliases.end(), s) != kStringAliases.end();
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

std::optional<PrecisionMode> precision_mode_named(std::string_view name) {
  for (const auto& row : kPrecisionModes)
    if (row.name == name) return row.mode;
  return std::nullopt;
}

PrecisionMode parse_precision(const PrecisionInput& precision) {
  WEFT_CHECK(is_allowed(precision), "[precision] Precision ", precision.repr(),
             " is invalid. Allowed precision values: ", allowed_values_text());
  const std::string s = precision.str();
  if (const auto mode = precision_mode_named(s)) return *mode;
  const PrecisionMode mode = mode_of_alias(s);
  if (!s.starts_with("32") && !s.starts_with("64"))
    warn("`precision=" + s + "` is supported for historical reasons but its usage is discouraged. "
         "Please set your precision to " + std::string(precision_name(mode)) + " instead!");
  return mode;
}

PrecisionMode precision_for_accelerator(PrecisionMode mode, std::string_view accelerator) {
  weft::detail::check_enum(mode, static_cast<int>(std::size(kPrecisionModes)), "precision", "PrecisionMode");
  WEFT_CHECK(accelerator == "cpu" || accelerator == "cuda", "[precision] expected the accelerator 'cpu' or 'cuda', got '",
             accelerator, "'");
  if (accelerator == "cpu" && mode == PrecisionMode::Fp16Mixed) {
    warn("You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. "
         "Using `precision='bf16-mixed'` instead.");
    return PrecisionMode::Bf16Mixed;
  }
  return mode;
}

}  // namespace weft::precision

namespace weft::detail {
std::string quoted_tuple(std::span<const std::string_view> items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + std::string(items[i]) + "'";
  return out + ")";
}
}  // namespace weft::detail

namespace weft::detail {
precision::PrecisionMode supported_precision_mode(std::span<const precision::PrecisionMode> supported,
                                                 std::string_view name, std::string_view strategy) {
  const auto mode = precision::precision_mode_named(name);
  if (mode && std::find(supported.begin(), supported.end(), *mode) != supported.end()) return *mode;
  std::vector<std::string_view> names;
  for (precision::PrecisionMode m : supported) names.push_back(precision::precision_name(m));
  WEFT_FAIL("[", strategy, "Precision] `precision='", name, "'` is not supported in ", strategy,
            ". `precision` must be one of: ", quoted_tuple(names), ".");
}
}  // namespace weft::detail
