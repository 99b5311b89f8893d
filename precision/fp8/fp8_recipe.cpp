// FP8 recipes: validation, the format of each role, names, and recipes from mappings.
#include "precision/fp8/fp8_recipe.h"

#include <cmath>

#include "tensor/enum_check.h"
#include "tensor/error.h"

namespace weft::precision {
namespace {

template <class T>
const T& value_as(const std::string& key, const RecipeValue& value, const char* expected) {
  const T* v = std::get_if<T>(&value);
  WEFT_CHECK(v != nullptr, "[DelayedScaling] recipe key '", key, "' expects ", expected);
  return *v;
}

constexpr int kNumFp8Formats = 3;       // E4M3, E5M2, HYBRID
constexpr int kNumAmaxComputeAlgos = 2;  // Max, MostRecent

}  // namespace

void validate(const Fp8Recipe& recipe) {
  weft::detail::check_enum(fp8_format_of(recipe), kNumFp8Formats, "fp8 recipe", "Fp8Format");
  WEFT_CHECK(fp8_format_of(recipe) != Fp8Format::E5M2, "[fp8 recipe] Pure E5M2 training is not supported: "
             "use fp8_format E4M3 or HYBRID (E5M2 for the gradients only)");
  if (const auto* d = std::get_if<DelayedScaling>(&recipe)) {
    WEFT_CHECK(d->amax_history_len >= 1 && d->amax_history_len <= kMaxAmaxHistoryLen,
               "[DelayedScaling] amax_history_len must lie in [1, ", kMaxAmaxHistoryLen, "], got ",
               d->amax_history_len);
    weft::detail::check_enum(d->amax_compute_algo, kNumAmaxComputeAlgos, "DelayedScaling", "AmaxComputeAlgo");
    WEFT_CHECK(d->margin >= -100 && d->margin <= 100, "[DelayedScaling] margin must lie in [-100, 100], got ",
               d->margin);
  } else {
    const auto& c = std::get<Float8CurrentScaling>(recipe);
    WEFT_CHECK(std::isfinite(c.amax_epsilon) && c.amax_epsilon >= 0.0f,
               "[Float8CurrentScaling] amax_epsilon must be finite and non-negative, got ", c.amax_epsilon);
  }
}

Fp8Format fp8_format_of(const Fp8Recipe& recipe) {
  return std::visit([](const auto& r) { return r.fp8_format; }, recipe);
}

DType fp8_dtype_for(Fp8Format format, Fp8Role role) {
  weft::detail::check_enum(format, kNumFp8Formats, "fp8_dtype_for", "Fp8Format");
  weft::detail::check_enum(role, kNumFp8Roles, "fp8_dtype_for", "Fp8Role");
  if (format == Fp8Format::E5M2) return kFloat8E5M2;
  if (format == Fp8Format::HYBRID && role == Fp8Role::GradOutput) return kFloat8E5M2;
  return kFloat8E4M3FN;
}

std::string_view to_string(Fp8Format format) {
  switch (format) {
    case Fp8Format::E4M3: return "E4M3";
    case Fp8Format::E5M2: return "E5M2";
    case Fp8Format::HYBRID: return "HYBRID";
  }
  return "?";
}

std::string_view to_string(AmaxComputeAlgo algo) {
  weft::detail::check_enum(algo, kNumAmaxComputeAlgos, "to_string", "AmaxComputeAlgo");
  return algo == AmaxComputeAlgo::Max ? "max" : "most_recent";
}

std::string_view to_string(Fp8Role role) {
  switch (role) {
    case Fp8Role::Input: return "input";
    case Fp8Role::Weight: return "weight";
    case Fp8Role::GradOutput: return "grad_output";
  }
  return "?";
}

Fp8Format fp8_format_from_name(std::string_view name) {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2, Fp8Format::HYBRID})
    if (to_string(f) == name) return f;
  WEFT_FAIL("[fp8 recipe] expected fp8_format E4M3, E5M2 or HYBRID, got '", name, "'");
}

DelayedScaling delayed_scaling_from_mapping(const RecipeMapping& mapping) {
  DelayedScaling recipe;
  for (const auto& [key, value] : mapping) {
    if (key == "margin") {
      recipe.margin = static_cast<int>(value_as<int64_t>(key, value, "an integer"));
    } else if (key == "fp8_format") {
      recipe.fp8_format = fp8_format_from_name(value_as<std::string>(key, value, "a name: E4M3, E5M2 or HYBRID"));
    } else if (key == "amax_history_len") {
      recipe.amax_history_len = value_as<int64_t>(key, value, "an integer");
    } else if (key == "amax_compute_algo") {
      const std::string& algo = value_as<std::string>(key, value, "'max' or 'most_recent'");
      WEFT_CHECK(algo == "max" || algo == "most_recent",
                 "[DelayedScaling] recipe key 'amax_compute_algo' expects 'max' or 'most_recent', got '", algo, "'");
      recipe.amax_compute_algo = algo == "max" ? AmaxComputeAlgo::Max : AmaxComputeAlgo::MostRecent;
    } else if (key == "reduce_amax") {
      recipe.reduce_amax = value_as<bool>(key, value, "a bool");
    } else {
      WEFT_FAIL("[DelayedScaling] unexpected recipe key '", key, "'; expected margin, fp8_format, amax_history_len, "
                "amax_compute_algo or reduce_amax");
    }
  }
  validate(recipe);
  return recipe;
}

}  // namespace weft::precision
