// Gradient clipping (clip_grad.h). The norm and the scaling are device kernels
// (optim/fused_kernels.h), one launch per device; on the CPU single passes over each gradient's
// memory, with the optimizer kernels' dtype dispatch and blocks (optim/fused_update.h).
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "optim/fused_kernels.h"
#include "optim/fused_update.h"
#include "tensor/ops.h"

namespace weft::optim {

namespace {

using weft::detail::KernelRegistry;

// Blocks per parallel task: fixed, so the order of the sums, and the norm, do not depend on the
// thread count.
constexpr int64_t kBlocksPerTask = 16;

// max that propagates NaN, as torch.max does.
double nan_max(double a, double b) { return std::isnan(a) || a >= b ? a : b; }

// Σ f(x) over n values, in double, as 8 interleaved partial sums the compiler can vectorise
// (a single running sum is a dependency chain it may not reorder).
template <class C, class F>
double lane_sum(const C* x, int64_t n, F f) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += f(static_cast<double>(x[i + k]));
  double sum = 0.0;
  for (; i < n; ++i) sum += f(static_cast<double>(x[i]));
  for (double lane : lanes) sum += lane;
  return sum;
}

// Σ|g|^p over one gradient (max |g| when p is infinite), accumulated in double; NaN propagates.
template <class P>
double grad_norm_part(const Tensor& grad, double p) {
  using C = detail::ComputeType<P>;
  const P* data = grad.data<P>();
  const int64_t n = grad.numel();
  const int64_t blocks = (n + detail::kBlock - 1) / detail::kBlock;
  const int64_t tasks = (blocks + kBlocksPerTask - 1) / kBlocksPerTask;
  const bool is_inf = std::isinf(p);
  std::vector<double> partial(static_cast<size_t>(tasks), 0.0);
  parallel_for(tasks, [&](int64_t task) {
    double acc = 0.0;
    alignas(64) C widened[detail::kBlock];
    for (int64_t b = task * kBlocksPerTask; b < std::min(blocks, (task + 1) * kBlocksPerTask); ++b) {
      const int64_t offset = b * detail::kBlock, length = std::min(detail::kBlock, n - offset);
      const C* x = widened;
      if constexpr (std::is_same_v<P, C>)
        x = data + offset;
      else
        detail::convert_values(data + offset, length, widened);
      if (is_inf)
        for (int64_t i = 0; i < length; ++i) acc = nan_max(acc, std::abs(static_cast<double>(x[i])));
      else if (p == 2.0)
        acc += lane_sum(x, length, [](double v) { return v * v; });
      else if (p == 1.0)
        acc += lane_sum(x, length, [](double v) { return std::abs(v); });
      else
        acc += lane_sum(x, length, [p](double v) { return std::pow(std::abs(v), p); });
    }
    partial[static_cast<size_t>(task)] = acc;
  });
  double total = 0.0;
  for (double x : partial) total = is_inf ? nan_max(total, x) : total + x;
  return total;
}

template <class P>
void scale_in_place(const Tensor& grad, double coef) {
  using C = detail::ComputeType<P>;
  P* g = grad.data<P>();
  const int64_t n = grad.numel();
  const C c = static_cast<C>(coef);
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n / detail::kUpdateGrain));
  parallel_for(tasks, [&](int64_t task) {
    for (int64_t i = n * task / tasks; i < n * (task + 1) / tasks; ++i)
      g[i] = detail::narrow<P>(detail::widen(g[i]) * c);
  });
}

}  // namespace

double detail::cpu_grad_norm_kernel(const std::vector<Tensor>& grads, double norm_type) {
  const bool is_inf = std::isinf(norm_type);
  double accumulated = 0.0;
  for (const Tensor& g : grads) {
    double part = 0.0;
    dispatch_param_dtype(g.dtype(), "clip_grad_norm_", [&](auto tag) { part = grad_norm_part<decltype(tag)>(g, norm_type); });
    accumulated = is_inf ? nan_max(accumulated, part) : accumulated + part;
  }
  return accumulated;
}

void detail::cpu_scale_grads_kernel(const std::vector<Tensor>& grads, double coef) {
  for (const Tensor& g : grads)
    dispatch_param_dtype(g.dtype(), "clip_grad_norm_", [&](auto tag) { scale_in_place<decltype(tag)>(g, coef); });
}

KernelRegistry<detail::GradNormKernel>& detail::grad_norm_kernels() {
  static KernelRegistry<GradNormKernel> registry("clip_grad_norm_", &cpu_grad_norm_kernel, cuda_grad_norm_kernel);
  return registry;
}

KernelRegistry<detail::ScaleGradsKernel>& detail::scale_grads_kernels() {
  static KernelRegistry<ScaleGradsKernel> registry("clip_grad_norm_", &cpu_scale_grads_kernel, cuda_scale_grads_kernel);
  return registry;
}

double detail::grad_norm_accumulated(const std::vector<Tensor>& grads, double norm_type) {
  // The gradients by device, each contiguous for the norm kernel (a copy where one is not).
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const Tensor& g : grads) {
    auto at = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == g.device(); });
    if (at == by_device.end()) at = by_device.insert(by_device.end(), {g.device(), {}});
    at->second.push_back(g.contiguous());
  }
  const bool is_inf = std::isinf(norm_type);
  double accumulated = 0.0;
  for (const auto& [device, device_grads] : by_device) {
    const double part = grad_norm_kernels().at(device)(device_grads, norm_type);
    accumulated = is_inf ? nan_max(accumulated, part) : accumulated + part;
  }
  return accumulated;
}

double detail::finish_clip_grad_norm(const std::vector<Tensor>& grads, double accumulated, double max_norm,
                                     double norm_type, bool error_if_nonfinite) {
  const bool all_float64 = std::all_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.dtype() == kFloat64; });
  double total = std::isinf(norm_type) ? accumulated
                 : norm_type == 2.0    ? std::sqrt(accumulated)
                                       : std::pow(accumulated, 1.0 / norm_type);
  if (!all_float64) total = static_cast<float>(total);

  WEFT_CHECK(!error_if_nonfinite || std::isfinite(total), "[clip_grad_norm_] the total norm of order ", norm_type,
             " of the gradients is ", total, ", so they cannot be clipped; pass error_if_nonfinite = false to "
             "scale them by it anyway");

  double coef = max_norm / (total + 1e-6);
  if (!all_float64) coef = static_cast<float>(max_norm) / (static_cast<float>(total) + 1e-6f);
  if (coef >= 1.0) return total;  // clamped to 1: scaling would change nothing
  scale_grads_(grads, coef);
  return total;
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  WEFT_CHECK(norm_type > 0.0, "[clip_grad_norm_] expected norm_type > 0 or infinity, got ", norm_type);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  return detail::finish_clip_grad_norm(grads, detail::grad_norm_accumulated(grads, norm_type), max_norm, norm_type,
                                       error_if_nonfinite);
}

void scale_grads_(const std::vector<Tensor>& grads, double coef) {
  // Contiguous gradients go to their device's kernel in one call per device; others multiply.
  std::vector<std::pair<Device, std::vector<Tensor>>> in_place;
  for (const Tensor& g : grads) {
    if (!g.is_contiguous()) {
      Tensor(g).mul_(coef);
      continue;
    }
    auto at = std::find_if(in_place.begin(), in_place.end(), [&](const auto& e) { return e.first == g.device(); });
    if (at == in_place.end()) at = in_place.insert(in_place.end(), {g.device(), {}});
    at->second.push_back(g);
  }
  for (const auto& entry : in_place) {
    detail::scale_grads_kernels().at(entry.first)(entry.second, coef);
    for (const Tensor& g : entry.second) g.storage()->bump_version();
  }
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  WEFT_CHECK(clip_value >= 0.0, "[clip_grad_value_] expected clip_value >= 0, got ", clip_value);
  for (const Tensor& p : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace weft::optim
