// The autocast policy table and the thread-local state behind tensor/autocast_state.h.
#include "tensor/autocast_state.h"

#include "tensor/error.h"

namespace weft {
namespace {

static_assert(static_cast<int>(DeviceType::CUDA) == 1, "one autocast state per device type");

// Note [Thread-local state] in tensor/init_context.h. The low dtypes before any guard are
// PyTorch's defaults: bfloat16 on the cpu, float16 on cuda.
thread_local std::array<AutocastState, 2> states = {AutocastState{false, DType::BFloat16},
                                                   AutocastState{false, DType::Float16}};
thread_local int enabled_count = 0;  // how many entries of `states` are enabled

AutocastState& state_of(DeviceType type) { return states[static_cast<size_t>(type)]; }

void set_state(DeviceType type, AutocastState state) {
  AutocastState& slot = state_of(type);
  enabled_count += static_cast<int>(state.enabled) - static_cast<int>(slot.enabled);
  slot = state;
}

// float64 stays float64 under every policy (as PyTorch's autocast), and only floats are cast.
Tensor cast_for(CastPolicy policy, DType low, const Tensor& t) {
  if (!t.defined() || !t.is_floating_point() || t.dtype() == DType::Float64) return t;
  switch (policy) {
    case CastPolicy::LowPrecision: return t.to(low);
    case CastPolicy::Float32: return is_narrow_float(t.dtype()) ? t.to(DType::Float32) : t;
    case CastPolicy::Promote: return t;
  }
  return t;
}

}  // namespace

CastPolicy cast_policy(AutocastOp op) {
  switch (op) {
    case AutocastOp::Matmul:
    case AutocastOp::Linear: return CastPolicy::LowPrecision;
    case AutocastOp::Softmax:
    case AutocastOp::LogSoftmax:
    case AutocastOp::LogSumExp:
    case AutocastOp::Exp:
    case AutocastOp::Log:
    case AutocastOp::Pow:
    case AutocastOp::Sum:
    case AutocastOp::Mean:
    case AutocastOp::Norm:
    case AutocastOp::LayerNorm:
    case AutocastOp::CrossEntropy:
    case AutocastOp::NllLoss:
    case AutocastOp::MseLoss: return CastPolicy::Float32;
    case AutocastOp::Elementwise:
    case AutocastOp::Cat: return CastPolicy::Promote;
  }
  WEFT_FAIL("[autocast] unknown op kind ", static_cast<int>(op));
}

AutocastState autocast_state(DeviceType device_type) { return state_of(device_type); }

namespace detail {

bool autocast_any_enabled() { return enabled_count > 0; }

void apply_autocast(AutocastOp op, Tensor* inputs, size_t n) {
  const Tensor* first = nullptr;
  for (size_t i = 0; i < n && first == nullptr; ++i)
    if (inputs[i].defined()) first = &inputs[i];
  if (first == nullptr) return;
  const AutocastState state = state_of(first->device().type);
  if (!state.enabled) return;
  const CastPolicy policy = cast_policy(op);
  for (size_t i = 0; i < n; ++i) inputs[i] = cast_for(policy, state.dtype, inputs[i]);
}

AutocastStateGuard::AutocastStateGuard(DeviceType device_type, AutocastState state)
    : device_type_(device_type), saved_(state_of(device_type)) {
  WEFT_CHECK(!state.enabled || state.dtype == DType::BFloat16 || state.dtype == DType::Float16,
             "[autocast] expected bfloat16 or float16 as the low-precision dtype, got ", state.dtype);
  set_state(device_type, state);
}

AutocastStateGuard::~AutocastStateGuard() { set_state(device_type_, saved_); }

AutocastOffGuard::AutocastOffGuard() : saved_(states) {
  for (size_t i = 0; i < saved_.size(); ++i) set_state(static_cast<DeviceType>(i), AutocastState{false, saved_[i].dtype});
}

AutocastOffGuard::~AutocastOffGuard() {
  for (size_t i = 0; i < saved_.size(); ++i) set_state(static_cast<DeviceType>(i), saved_[i]);
}

}  // namespace detail
}  // namespace weft
