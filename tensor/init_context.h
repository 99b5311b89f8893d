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
