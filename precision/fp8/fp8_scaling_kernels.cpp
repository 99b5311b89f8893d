// The CPU kernels and the registries of the FP8 scale updates
// (precision/fp8/fp8_scaling_kernels.h).
#include "precision/fp8/fp8_scaling_kernels.h"

#include "precision/fp8/fp8_recipe.h"
#include "precision/fp8/fp8_scaling_rules.h"

namespace weft::precision::detail {

void cpu_fp8_delayed_update(const Fp8DelayedUpdateLaunch& l) {
  float* column = l.amax_history.data<float>() + l.role;
  const int64_t len = l.amax_history.size(0);
  auto row = [&](int64_t r) -> float& { return column[r * kNumFp8Roles]; };
  const float current = row(0);
  float amax = current;
  if (!l.most_recent)
    for (int64_t r = 1; r < len; ++r) amax = fp8_nan_max(amax, row(r));
  for (int64_t r = 1; r + 1 < len; ++r) row(r) = row(r + 1);
  if (len > 1) row(len - 1) = current;
  row(0) = 0.0f;
  float& scale = l.scale.data<float>()[l.role];
  scale = fp8_delayed_scale(amax, scale, l.fp8_max, l.margin);
  l.scale_inv.data<float>()[l.role] = 1.0f / scale;
}

void cpu_fp8_current_scale(const Fp8CurrentScaleLaunch& l) {
  const float scale = fp8_current_scale(*l.amax.data<float>(), l.fp8_max, l.amax_epsilon, l.power_2_scale);
  l.scale.data<float>()[l.role] = scale;
  l.scale_inv.data<float>()[l.role] = 1.0f / scale;
}

weft::detail::KernelRegistry<Fp8DelayedUpdateKernel>& fp8_delayed_update_kernels() {
  static weft::detail::KernelRegistry<Fp8DelayedUpdateKernel> registry("DelayedScaling", &cpu_fp8_delayed_update,
                                                                       cuda_fp8_delayed_update);
  return registry;
}

weft::detail::KernelRegistry<Fp8CurrentScaleKernel>& fp8_current_scale_kernels() {
  static weft::detail::KernelRegistry<Fp8CurrentScaleKernel> registry("Float8CurrentScaling", &cpu_fp8_current_scale,
                                                                      cuda_fp8_current_scale);
  return registry;
}

}  // namespace weft::precision::detail
