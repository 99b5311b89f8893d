// The CPU kernel and the registry of GradScaler's fused unscale + inf check
// (precision/amp_kernels.h).
#include "precision/amp_kernels.h"

#include <cmath>
#include <type_traits>

namespace weft::precision::detail {
namespace {

template <class S>
bool unscale_one(const Tensor& g, float inv_scale) {
  using C = std::conditional_t<std::is_same_v<S, double>, double, float>;
  S* data = static_cast<S*>(g.data_ptr());
  const C inv = static_cast<C>(inv_scale);
  bool found = false;
  for (int64_t i = 0; i < g.numel(); ++i) {
    C v;
    if constexpr (kIsNarrowFloat<S>) v = to_float(data[i]);
    else v = data[i];
    found |= !std::isfinite(v);
    if (inv_scale == 1.0f) continue;
    if constexpr (kIsNarrowFloat<S>) data[i] = from_float<S>(v * inv);
    else data[i] = v * inv;
  }
  return found;
}

}  // namespace

bool cpu_unscale_kernel(const std::vector<Tensor>& grads, float inv_scale) {
  bool found = false;
  for (const Tensor& g : grads) {
    WEFT_CHECK(g.is_contiguous(), "[GradScaler] internal: gradients must be contiguous to be unscaled in place");
    visit_dtype(g.dtype(), [&](auto tag) {
      using S = decltype(tag);
      if constexpr (std::is_floating_point_v<S> || kIsNarrowFloat<S>) found |= unscale_one<S>(g, inv_scale);
      else WEFT_FAIL("[GradScaler] expected floating gradients, got ", g.dtype());
    });
  }
  return found;
}

weft::detail::KernelRegistry<UnscaleKernel>& unscale_kernels() {
  static weft::detail::KernelRegistry<UnscaleKernel> registry("GradScaler", &cpu_unscale_kernel, cuda_unscale_kernel);
  return registry;
}

}  // namespace weft::precision::detail
