// The init-context stack: thread-local frames that say how new tensors are created.
//
// A TensorFrame may set the default floating dtype, the default device and a skip-init flag;
// every unset field inherits from the frame below it. Factories consult the resolved frame only
// for what they were not told explicitly (an explicit dtype always wins), and factories whose
// natural result is an integer (arange over integers, randint) keep their integer dtype.
//
// Frames are pushed by RAII guards, so they nest strictly and unwind on exceptions; each thread
// has its own stack. The module-construction side (which layer kinds are replaced by which
// implementation) lives one layer up in nn/module_init_context.h, pushed together with a tensor
// frame by a precision plugin's module_init_context(); a tensor frame alone never redirects
// module construction.
//
// Note [Thread-local state]
// weft keeps the switches a scope turns on in thread-local variables, so that a scope on one
// thread never changes what another thread computes, and every one is set and restored by an RAII
// guard, so that scopes nest strictly and unwind on exceptions. The complete list, floor by floor:
//   tensor/init_context.cpp      the tensor init frames (default dtype, device, skip-init)
//   tensor/autocast_state.cpp    autocast: enabled and low dtype per device type
//   tensor/autograd.cpp          grad mode (NoGradGuard); the running backward pass's callbacks
//                                (queue_callback, scoped to one run_backward)
//   nn/module_init_context.cpp   the module init frames (layer replacement at construction)
//   nn/module.cpp                the lazy-adoption scope of load_state_dict (Note [Lazy adoption])
//   precision/warnings.cpp       the warning handler (CaptureWarnings, WarningHandlerGuard)
//   precision/context.cpp        the open precision Contexts, so that ending one out of order
//                                is detected and still restores (Note [Context order])
//   precision/fp8/fp8_autocast.cpp  fp8_autocast (enabled, recipe, calibrating), its open region,
//                                an amax-reduction error deferred to the next FP8 call
//   fabric/fabric.cpp            "inside Fabric::backward" (Note [Backward guard])
// A new thread starts at every bottom: float32, cpu, autocast off, grad on, no replacement. What
// is process-wide instead, and so shared by every thread: the thread count, the CPU GEMM library
// and instruction-set level, the backends, the default random generator (which locks, so threads
// may draw from it at once; tensor/generator.h), and the cross-rank reduction a data-parallel
// strategy installs (precision/cross_rank.h).
#pragma once

#include <optional>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace weft {

struct TensorFrame {
  std::optional<DType> dtype;    // default dtype of floating factories
  std::optional<Device> device;  // default device of all factories
  std::optional<bool> skip_init; // nn layers skip their weight initialisation (nn::init honours it)
};

// The resolved innermost frame: every field is set (float32, cpu, false at the bottom).
struct ResolvedTensorFrame {
  DType dtype = DType::Float32;
  Device device;
  bool skip_init = false;
};

const ResolvedTensorFrame& current_tensor_frame();
inline DType default_dtype() { return current_tensor_frame().dtype; }
inline Device default_device() { return current_tensor_frame().device; }
inline bool skip_init() { return current_tensor_frame().skip_init; }

class TensorFrameGuard {
 public:
  explicit TensorFrameGuard(const TensorFrame& frame);
  ~TensorFrameGuard();
  TensorFrameGuard(const TensorFrameGuard&) = delete;
  TensorFrameGuard& operator=(const TensorFrameGuard&) = delete;

 private:
  ResolvedTensorFrame saved_;
};

// Convenience: default dtype / device for a scope.
class DefaultDTypeGuard : public TensorFrameGuard {
 public:
  explicit DefaultDTypeGuard(DType dtype) : TensorFrameGuard(TensorFrame{dtype, {}, {}}) {}
};

}  // namespace weft
