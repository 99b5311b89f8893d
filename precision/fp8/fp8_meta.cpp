// FP8 metadata: the scale rules and the amax-history bookkeeping (precision/fp8/fp8_meta.h).
#include "precision/fp8/fp8_meta.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "precision/fp8/fp8_cast.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

constexpr float kFloatMax = std::numeric_limits<float>::max();

float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

int role_index(Fp8Role role) { return static_cast<int>(role); }

void check_role(Fp8Role role) {
  WEFT_CHECK(role_index(role) >= 0 && role_index(role) < kNumFp8Roles, "[Fp8Metadata] unknown role ",
             role_index(role));
}

}  // namespace

float delayed_scaling_scale(float amax, float old_scale, float fp8_max, int margin) {
  if (!(std::isfinite(amax) && amax > 0.0f)) return old_scale;
  const float scaled_max = fp8_max * std::ldexp(1.0f, -margin);
  const float scale = scaled_max / amax;
  return std::isinf(scale) ? kFloatMax : scale;
}

float current_scaling_scale(float amax, float fp8_max, const Float8CurrentScaling& recipe) {
  const float a = std::isnan(amax) ? amax : std::fmax(amax, recipe.amax_epsilon);
  if (!(std::isfinite(a) && a > 0.0f)) return 1.0f;
  float scale = fp8_max / a;
  if (std::isinf(scale)) scale = kFloatMax;
  // Keeping only sign and exponent rounds a positive normal float down to a power of two.
  if (recipe.power_2_scale) scale = std::bit_cast<float>(std::bit_cast<uint32_t>(scale) & 0xFF800000u);
  return scale;
}

Fp8Metadata::Fp8Metadata(int64_t amax_history_len) {
  WEFT_CHECK(amax_history_len >= 1, "[Fp8Metadata] amax_history_len must be at least 1, got ", amax_history_len);
  scale = ones({kNumFp8Roles}, kFloat32);
  scale_inv = ones({kNumFp8Roles}, kFloat32);
  amax_history = zeros({amax_history_len, kNumFp8Roles}, kFloat32);
}

float& Fp8Metadata::history(int64_t row, Fp8Role role) const {
  return amax_history.data<float>()[row * kNumFp8Roles + role_index(role)];
}

float Fp8Metadata::scale_of(Fp8Role role) const {
  check_role(role);
  return scale.data<float>()[role_index(role)];
}

float Fp8Metadata::scale_inv_of(Fp8Role role) const {
  check_role(role);
  return scale_inv.data<float>()[role_index(role)];
}

float Fp8Metadata::current_amax(Fp8Role role) const {
  check_role(role);
  return history(0, role);
}

void Fp8Metadata::record_amax(Fp8Role role, float amax) {
  check_role(role);
  history(0, role) = nan_max(history(0, role), amax);
}

void Fp8Metadata::set_current_amax(Fp8Role role, float amax) {
  check_role(role);
  history(0, role) = amax;
}

void Fp8Metadata::set_scale(Fp8Role role, float new_scale) {
  check_role(role);
  scale.data<float>()[role_index(role)] = new_scale;
  scale_inv.data<float>()[role_index(role)] = 1.0f / new_scale;
}

void Fp8Metadata::update(Fp8Role role, const DelayedScaling& recipe) {
  check_role(role);
  const int64_t len = amax_history_len();
  float amax = history(0, role);
  if (recipe.amax_compute_algo == AmaxComputeAlgo::Max)
    for (int64_t row = 1; row < len; ++row) amax = nan_max(amax, history(row, role));
  const float current = history(0, role);
  for (int64_t row = 1; row + 1 < len; ++row) history(row, role) = history(row + 1, role);
  if (len > 1) history(len - 1, role) = current;
  history(0, role) = 0.0f;
  const float fp8_max_value = fp8_max(fp8_dtype_for(recipe.fp8_format, role));
  set_scale(role, delayed_scaling_scale(amax, scale_of(role), fp8_max_value, recipe.margin));
}

void Fp8Metadata::resize_amax_history(int64_t len) {
  WEFT_CHECK(len >= 1, "[Fp8Metadata] amax_history_len must be at least 1, got ", len);
  const int64_t old_len = amax_history_len();
  if (len == old_len) return;
  std::vector<float> rows(static_cast<size_t>(len * kNumFp8Roles), 0.0f);
  const float* old = amax_history.data<float>();
  for (int r = 0; r < kNumFp8Roles; ++r) rows[static_cast<size_t>(r)] = old[r];
  // The newest finished rows are the last ones; keep as many as fit, still at the end.
  const int64_t keep = std::min(len, old_len) - 1;
  for (int64_t i = 0; i < keep; ++i)
    for (int r = 0; r < kNumFp8Roles; ++r)
      rows[static_cast<size_t>((len - keep + i) * kNumFp8Roles + r)] = old[(old_len - keep + i) * kNumFp8Roles + r];
  amax_history.set_data(from_vector(rows, {len, kNumFp8Roles}, kFloat32));
}

}  // namespace weft::precision
