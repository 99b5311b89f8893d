// The thread-local tensor frame. Only the resolved innermost frame is stored; each guard keeps
// the frame it replaced and puts it back, which is all strict nesting needs.
#include "tensor/init_context.h"

#include "tensor/error.h"

namespace weft {
namespace {
// Note [Thread-local state] in tensor/init_context.h.
thread_local ResolvedTensorFrame current_frame;
}

const ResolvedTensorFrame& current_tensor_frame() { return current_frame; }

TensorFrameGuard::TensorFrameGuard(const TensorFrame& frame) : saved_(current_frame) {
  WEFT_CHECK(!frame.dtype || is_floating(*frame.dtype),
             "[init_context] the default dtype must be floating, got ", *frame.dtype);
  if (frame.dtype) current_frame.dtype = *frame.dtype;
  if (frame.device) current_frame.device = *frame.device;
  if (frame.skip_init) current_frame.skip_init = *frame.skip_init;
}

TensorFrameGuard::~TensorFrameGuard() { current_frame = saved_; }

}  // namespace weft
