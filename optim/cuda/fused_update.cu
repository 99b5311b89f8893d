// CUDA kernels of the optimizers' fused updates and of gradient clipping (optim/fused_kernels.h):
// one thread per element, each line the CPU kernel's (optim/adam.cpp, optim/sgd.cpp,
// optim/clip_grad.cpp) in the same compute type and order, so a step on the GPU matches the CPU
// to the rounding of sqrt and division. Parameters of narrow dtypes are computed in float and
// rounded once on store.
#include <cuda_runtime.h>

#include "optim/cuda/update_launch.h"
#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"

namespace weft::optim::cuda_detail {
namespace {

using weft::cuda::detail::blocks_for;
using weft::cuda::detail::check_launch;
using weft::cuda::detail::itemsize_of;
using weft::cuda::detail::kThreads;
using weft::cuda::detail::load_as;
using weft::cuda::detail::store_as;

template <class C>
__global__ void adam_kernel(AdamArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  C* m = reinterpret_cast<C*>(a.exp_avg);
  C* v = reinterpret_cast<C*>(a.exp_avg_sq);
  C* v_max = reinterpret_cast<C*>(a.max_exp_avg_sq);
  double neg_step_size_wide = a.neg_step_size, inv_bc2_wide = a.inv_bias_correction2_sqrt;
  if (a.step != nullptr) {  // capturable: the host's formulas (optim/adam.cpp) on the device's count
    const double step = *a.step;
    neg_step_size_wide = -(a.lr / (1.0 - pow(a.beta1, step)));
    inv_bc2_wide = 1.0 / sqrt(1.0 - pow(a.beta2, step));
  }
  const C neg_step_size = static_cast<C>(neg_step_size_wide), inv_bc2 = static_cast<C>(inv_bc2_wide);
  const C beta1 = static_cast<C>(a.beta1), one_minus_beta1 = static_cast<C>(a.one_minus_beta1);
  const C beta2 = static_cast<C>(a.beta2), one_minus_beta2 = static_cast<C>(a.one_minus_beta2);
  const C eps = static_cast<C>(a.eps), weight_decay = static_cast<C>(a.weight_decay);
  const C decay_factor = static_cast<C>(a.decay_factor);
  WEFT_GRID_LOOP(i, a.n) {
    C p = load_as<C>(a.param + i * size, a.dtype);
    C g = load_as<C>(a.grad + i * size, a.dtype);
    if (a.coupled_decay) g = g + weight_decay * p;
    if (a.decoupled) p = p * decay_factor;
    m[i] = m[i] * beta1 + one_minus_beta1 * g;
    v[i] = v[i] * beta2 + one_minus_beta2 * g * g;
    C denominator_source = v[i];
    if (v_max) {
      v_max[i] = v_max[i] >= v[i] || v_max[i] != v_max[i] ? v_max[i] : v[i];
      denominator_source = v_max[i];
    }
    p = p + neg_step_size * m[i] / (sqrt(denominator_source) * inv_bc2 + eps);
    store_as(a.param + i * size, a.dtype, p);
  }
}

// The step counts of one launch of advance_steps_kernel, passed by value.
constexpr int kStepsPerLaunch = 64;
struct StepCounts {
  double* counts[kStepsPerLaunch];
  int n;
};

__global__ void advance_steps_kernel(StepCounts steps) {
  if (static_cast<int>(threadIdx.x) < steps.n) *steps.counts[threadIdx.x] += 1.0;
}

template <class C>
__global__ void sgd_kernel(SgdArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  C* buf = reinterpret_cast<C*>(a.momentum_buffer);
  const C weight_decay = static_cast<C>(a.weight_decay), momentum = static_cast<C>(a.momentum);
  const C one_minus_dampening = static_cast<C>(a.one_minus_dampening), neg_lr = static_cast<C>(a.neg_lr);
  WEFT_GRID_LOOP(i, a.n) {
    C p = load_as<C>(a.param + i * size, a.dtype);
    C d = load_as<C>(a.grad + i * size, a.dtype);
    if (a.decay) d = d + weight_decay * p;
    if (buf) {
      buf[i] = a.first_step ? d : buf[i] * momentum + one_minus_dampening * d;
      d = a.nesterov ? d + momentum * buf[i] : buf[i];
    }
    store_as(a.param + i * size, a.dtype, p + neg_lr * d);
  }
}

__device__ double nan_max(double a, double b) { return a != a || a >= b ? a : b; }

// max on a double in device memory, NaN winning, by compare-and-swap.
__device__ void atomic_nan_max(double* target, double value) {
  auto* word = reinterpret_cast<unsigned long long*>(target);
  unsigned long long old = *word, assumed;
  do {
    assumed = old;
    const double merged = nan_max(__longlong_as_double(static_cast<long long>(assumed)), value);
    old = atomicCAS(word, assumed, static_cast<unsigned long long>(__double_as_longlong(merged)));
  } while (old != assumed);
}

__global__ void grad_norm_kernel(const char* grad, DType dtype, int64_t n, double p, double* total) {
  __shared__ double scratch[kThreads];
  const int64_t size = itemsize_of(dtype);
  const bool is_inf = isinf(p);
  double acc = 0;
  WEFT_GRID_LOOP(i, n) {
    const double v = fabs(load_as<double>(grad + i * size, dtype));
    acc = is_inf ? nan_max(acc, v) : acc + (p == 2.0 ? v * v : p == 1.0 ? v : pow(v, p));
  }
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      scratch[threadIdx.x] = is_inf ? nan_max(scratch[threadIdx.x], scratch[threadIdx.x + half])
                                    : scratch[threadIdx.x] + scratch[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (is_inf) atomic_nan_max(total, scratch[0]);
    else atomicAdd(total, scratch[0]);
  }
}

template <class C>
__global__ void scale_kernel(char* grad, DType dtype, int64_t n, double coef) {
  const int64_t size = itemsize_of(dtype);
  const C c = static_cast<C>(coef);
  WEFT_GRID_LOOP(i, n) store_as(grad + i * size, dtype, load_as<C>(grad + i * size, dtype) * c);
}

}  // namespace

void launch_adam(const AdamArgs& a, StreamHandle stream) {
  if (a.n == 0) return;
  if (a.dtype == kFloat64) adam_kernel<double><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  else adam_kernel<float><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  check_launch("Adam");
}

void launch_advance_steps(double* const* steps, int64_t count, StreamHandle stream) {
  for (int64_t first = 0; first < count; first += kStepsPerLaunch) {
    StepCounts chunk{};
    chunk.n = static_cast<int>(count - first < kStepsPerLaunch ? count - first : kStepsPerLaunch);
    for (int i = 0; i < chunk.n; ++i) chunk.counts[i] = steps[first + i];
    advance_steps_kernel<<<1, kStepsPerLaunch, 0, stream>>>(chunk);
    check_launch("Adam");
  }
}

void launch_sgd(const SgdArgs& a, StreamHandle stream) {
  if (a.n == 0) return;
  if (a.dtype == kFloat64) sgd_kernel<double><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  else sgd_kernel<float><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  check_launch("SGD");
}

void launch_grad_norm(const char* grad, DType dtype, int64_t n, double p, double* total, StreamHandle stream) {
  if (n == 0) return;
  grad_norm_kernel<<<blocks_for(n), kThreads, 0, stream>>>(grad, dtype, n, p, total);
  check_launch("clip_grad_norm_");
}

void launch_scale(char* grad, DType dtype, int64_t n, double coef, StreamHandle stream) {
  if (n == 0) return;
  if (dtype == kFloat64) scale_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(grad, dtype, n, coef);
  else scale_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(grad, dtype, n, coef);
  check_launch("clip_grad_norm_");
}

}  // namespace weft::optim::cuda_detail
