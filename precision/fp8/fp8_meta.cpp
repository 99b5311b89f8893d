// FP8 metadata: the scale rules and the amax-history bookkeeping (precision/fp8/fp8_meta.h).
#include "precision/fp8/fp8_meta.h"

#include <algorithm>
#include <vector>

#include "precision/fp8/fp8_cast.h"
#include "precision/fp8/fp8_scaling_kernels.h"
#include "precision/fp8/fp8_scaling_rules.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

int role_index(Fp8Role role) { return static_cast<int>(role); }

void check_role(Fp8Role role) {
  WEFT_CHECK(role_index(role) >= 0 && role_index(role) < kNumFp8Roles, "[Fp8Metadata] unknown role ",
             role_index(role));
}

Tensor element(const Tensor& t, Fp8Role role) {
  check_role(role);
  return t.slice(0, role_index(role), role_index(role) + 1);
}

}  // namespace

float delayed_scaling_scale(float amax, float old_scale, float fp8_max, int margin) {
  return detail::fp8_delayed_scale(amax, old_scale, fp8_max, margin);
}

float current_scaling_scale(float amax, float fp8_max, const Float8CurrentScaling& recipe) {
  return detail::fp8_current_scale(amax, fp8_max, recipe.amax_epsilon, recipe.power_2_scale);
}

Fp8Metadata::Fp8Metadata(int64_t amax_history_len) {
  WEFT_CHECK(amax_history_len >= 1 && amax_history_len <= kMaxAmaxHistoryLen, "[Fp8Metadata] amax_history_len must "
             "lie in [1, ", kMaxAmaxHistoryLen, "], got ", amax_history_len);
  scale = ones({kNumFp8Roles}, kFloat32);
  scale_inv = ones({kNumFp8Roles}, kFloat32);
  amax_history = zeros({amax_history_len, kNumFp8Roles}, kFloat32);
}

Device Fp8Metadata::device() const {
  WEFT_CHECK(scale.device() == amax_history.device() && scale_inv.device() == amax_history.device(),
             "[Fp8Metadata] expected scale, scale_inv and amax_history on one device, got ", scale.device(), ", ",
             scale_inv.device(), " and ", amax_history.device());
  WEFT_CHECK(scale.is_contiguous() && scale_inv.is_contiguous() && amax_history.is_contiguous(),
             "[Fp8Metadata] internal: scale, scale_inv and amax_history must be contiguous");
  return amax_history.device();
}

Tensor Fp8Metadata::scale_element(Fp8Role role) const { return element(scale, role); }

Tensor Fp8Metadata::scale_inv_element(Fp8Role role) const { return element(scale_inv, role); }

Tensor Fp8Metadata::current_amax_element(Fp8Role role) const { return element(amax_history.select(0, 0), role); }

float Fp8Metadata::scale_of(Fp8Role role) const { return scale_element(role).item<float>(); }

float Fp8Metadata::scale_inv_of(Fp8Role role) const { return scale_inv_element(role).item<float>(); }

float Fp8Metadata::current_amax(Fp8Role role) const { return current_amax_element(role).item<float>(); }

void Fp8Metadata::record_amax(Fp8Role role, float amax) {
  set_current_amax(role, detail::fp8_nan_max(current_amax(role), amax));
}

void Fp8Metadata::set_current_amax(Fp8Role role, float amax) { current_amax_element(role).fill_(amax); }

void Fp8Metadata::set_scale(Fp8Role role, float new_scale) {
  scale_element(role).fill_(new_scale);
  scale_inv_element(role).fill_(1.0f / new_scale);
}

void Fp8Metadata::update(Fp8Role role, const DelayedScaling& recipe) {
  check_role(role);
  const detail::Fp8DelayedUpdateLaunch launch{amax_history, scale, scale_inv, role_index(role),
                                              recipe.amax_compute_algo == AmaxComputeAlgo::MostRecent,
                                              fp8_max(fp8_dtype_for(recipe.fp8_format, role)), recipe.margin};
  detail::fp8_delayed_update_kernels().at(device())(launch);
}

void Fp8Metadata::set_scale_from_amax(Fp8Role role, const Tensor& amax, float fp8_max_value,
                                      const Float8CurrentScaling& recipe) {
  check_role(role);
  const Device where = device();
  WEFT_CHECK(amax.defined() && amax.dtype() == kFloat32 && amax.numel() == 1 && amax.device() == where,
             "[Fp8Metadata] expected the amax as one float32 element on ", where);
  const detail::Fp8CurrentScaleLaunch launch{amax, scale, scale_inv, role_index(role), fp8_max_value,
                                             recipe.amax_epsilon, recipe.power_2_scale};
  detail::fp8_current_scale_kernels().at(where)(launch);
}

void Fp8Metadata::resize_amax_history(int64_t len) {
  WEFT_CHECK(len >= 1 && len <= kMaxAmaxHistoryLen, "[Fp8Metadata] amax_history_len must lie in [1, ",
             kMaxAmaxHistoryLen, "], got ", len);
  const int64_t old_len = amax_history_len();
  if (len == old_len) return;
  std::vector<float> rows(static_cast<size_t>(len * kNumFp8Roles), 0.0f);
  const std::vector<float> old = amax_history.to_vector<float>();
  for (int r = 0; r < kNumFp8Roles; ++r) rows[static_cast<size_t>(r)] = old[static_cast<size_t>(r)];
  // The newest finished rows are the last ones; keep as many as fit, still at the end.
  const int64_t keep = std::min(len, old_len) - 1;
  for (int64_t i = 0; i < keep; ++i)
    for (int r = 0; r < kNumFp8Roles; ++r)
      rows[static_cast<size_t>((len - keep + i) * kNumFp8Roles + r)] =
          old[static_cast<size_t>((old_len - keep + i) * kNumFp8Roles + r)];
  amax_history.set_data(from_vector(rows, {len, kNumFp8Roles}, kFloat32).to(amax_history.device()));
}

}  // namespace weft::precision
