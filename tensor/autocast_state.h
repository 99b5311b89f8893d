// Autocast: the thread-local state and the per-op cast policy that the op front-ends consult.
//
// While autocast is on for a device type, an op listed here casts its floating inputs before
// computing, following one table (cast_policy):
//   LowPrecision  matmul, linear run in the autocast dtype (bfloat16 or float16);
//   Float32       numerically touchy ops (softmax family, exp, log, pow, sum/mean/norm, layer
//                 norm, losses) run in float32: narrow floating inputs are widened;
//   Promote       elementwise ops and cat keep their ordinary type promotion, so they need no
//                 cast and their front-ends do not call in here.
// float64 and non-floating inputs are never touched, and ops on other device types are not
// affected. Casts go through Tensor::to, so they are recorded by autograd and each leaf's
// gradient comes back in the leaf's own dtype (Note [Gradient shape and dtype]).
//
// The state is per thread and per device type; it is set only by AutocastStateGuard, so it
// nests strictly and unwinds on exceptions. precision::AutocastGuard is the public face. The
// autograd engine switches autocast off while it runs backward rules (AutocastOffGuard).
#pragma once

#include <array>
#include <cstddef>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace weft {

enum class CastPolicy { LowPrecision, Float32, Promote };

// The op kinds of the policy table.
enum class AutocastOp {
  Matmul,
  Linear,
  Softmax,
  LogSoftmax,
  LogSumExp,
  Exp,
  Log,
  Pow,
  Sum,
  Mean,
  Norm,
  LayerNorm,
  CrossEntropy,
  NllLoss,
  MseLoss,
  Elementwise,
  Cat,
};

CastPolicy cast_policy(AutocastOp op);

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::BFloat16;  // the low-precision dtype
};

// The calling thread's autocast state for one device type.
AutocastState autocast_state(DeviceType device_type);

namespace detail {

// True when autocast is on for any device type on this thread (the front-ends' fast path).
bool autocast_any_enabled();
// Casts inputs[0..n) in place as `op`'s policy asks; undefined tensors are skipped.
void apply_autocast(AutocastOp op, Tensor* inputs, size_t n);

// Sets one device type's state for a scope and restores the previous one on exit.
class AutocastStateGuard {
 public:
  AutocastStateGuard(DeviceType device_type, AutocastState state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  DeviceType device_type_;
  AutocastState saved_;
};

// Switches autocast off on every device type for a scope (the backward pass).
class AutocastOffGuard {
 public:
  AutocastOffGuard();
  ~AutocastOffGuard();
  AutocastOffGuard(const AutocastOffGuard&) = delete;
  AutocastOffGuard& operator=(const AutocastOffGuard&) = delete;

 private:
  std::array<AutocastState, 2> saved_;
};

}  // namespace detail

// The inputs of `op` as autocast hands them to the op: `const auto [a, b] =
// autocast_inputs(AutocastOp::Matmul, {a_in, b_in});`. The inputs themselves when autocast is off.
template <size_t N>
std::array<Tensor, N> autocast_inputs(AutocastOp op, const Tensor (&inputs)[N]) {
  std::array<Tensor, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = inputs[i];
  if (detail::autocast_any_enabled()) detail::apply_autocast(op, out.data(), N);
  return out;
}

}  // namespace weft
