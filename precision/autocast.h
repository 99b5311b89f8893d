// Autocast, the public face: `precision::AutocastGuard guard(DeviceType::CPU, kBFloat16);`
// turns mixed precision on for the calling thread until the guard leaves scope. Inside, matmul
// and linear on that device type run in the low-precision dtype and the numerically touchy ops
// in float32; the table and its rules live in tensor/autocast_state.h, where the ops read them.
//
// Guards nest (the innermost wins, the outer state comes back on exit, exceptions included),
// are per thread (other threads are unaffected) and per device type (a CUDA guard leaves CPU
// ops alone). `enabled = false` switches autocast off inside an autocast region. The dtype must
// be bfloat16 or float16; anything else fails up front rather than silently disabling autocast
// as PyTorch's CPU autocast does with a warning. The backward pass always runs without autocast.
#pragma once

#include "tensor/autocast_state.h"

namespace weft::precision {

class AutocastGuard {
 public:
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true)
      : device_type_(device_type), dtype_(dtype), enabled_(enabled), state_(device_type, AutocastState{enabled, dtype}) {}

  DeviceType device_type() const { return device_type_; }
  DType dtype() const { return dtype_; }  // PyTorch's `fast_dtype`
  bool enabled() const { return enabled_; }

 private:
  DeviceType device_type_;
  DType dtype_;
  bool enabled_;
  detail::AutocastStateGuard state_;
};

inline bool is_autocast_enabled(DeviceType device_type) { return autocast_state(device_type).enabled; }
// The low-precision dtype autocast uses on that device type (when never set: bfloat16 on the cpu,
// float16 on cuda, as PyTorch).
inline DType autocast_dtype(DeviceType device_type) { return autocast_state(device_type).dtype; }

}  // namespace weft::precision
