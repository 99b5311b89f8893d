// Promotion and naming for dtypes, all read from the traits table in dtype.h.
#include "tensor/dtype.h"

#include <ostream>
#include <string>

#include "tensor/enum_check.h"
#include "tensor/error.h"

namespace weft {
namespace {

int category(DType d) {
  if (is_floating(d)) return 2;
  if (is_integral(d)) return 1;
  return 0;
}

bool is_float8(DType d) { return d == DType::Float8E4M3FN || d == DType::Float8E5M2; }

}  // namespace

DType promote_types(DType a, DType b) {
  detail::check_enum(a, kNumDTypes, "promote_types", "DType");
  detail::check_enum(b, kNumDTypes, "promote_types", "DType");
  if (a == b) return a;
  WEFT_CHECK(!is_float8(a) && !is_float8(b), "[promote_types] float8 types do not promote: ", a,
             " with ", b, "; convert explicitly with .to(dtype)");
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  const int ra = traits(a).promotion_rank, rb = traits(b).promotion_rank;
  if (ra != rb) return ra > rb ? a : b;
  // Same rank, different types: float16/bfloat16 or int8/uint8. Meet one step up.
  return is_floating(a) ? DType::Float32 : DType::Int32;
}

DType dtype_from_name(std::string_view name) {
  for (const auto& t : kDTypeTraits) {
    if (name == t.name || name == t.safetensors_name) return t.dtype;
  }
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {{"double", kFloat64}, {"float", kFloat32}, {"half", kFloat16},
                                       {"fp32", kFloat32},   {"fp16", kFloat16},  {"bf16", kBFloat16},
                                       {"fp64", kFloat64},   {"long", kInt64},    {"int", kInt32}};
  for (const auto& a : kAliases) {
    if (name == a.name) return a.dtype;
  }
  std::string accepted;
  for (const auto& t : kDTypeTraits) accepted += (accepted.empty() ? "" : ", ") + std::string(t.name);
  WEFT_FAIL("[dtype] unknown dtype '", name, "'; expected one of: ", accepted);
}

// An invalid value prints as such (error messages about it must not index the table with it).
void append_to(std::string& out, DType d) {
  const int raw = static_cast<int>(d);
  if (raw >= kNumDTypes) out += detail::cat("DType(", raw, ")");
  else out += dtype_name(d);
}

std::ostream& operator<<(std::ostream& os, DType d) {
  std::string text;
  append_to(text, d);
  return os << text;
}

}  // namespace weft
