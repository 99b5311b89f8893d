// The thread-local module frame. As for tensor frames, only the resolved innermost frame is
// stored and each guard puts back the one it replaced.
#include "nn/module_init_context.h"

namespace weft::nn {
namespace {
// Note [Thread-local state] in tensor/init_context.h.
thread_local ResolvedModuleFrame current_frame;
}

const ResolvedModuleFrame& current_module_frame() { return current_frame; }

ModuleFrameGuard::ModuleFrameGuard(const ModuleFrame& frame) : saved_(current_frame) {
  if (frame.linear) current_frame.linear = *frame.linear;
  if (frame.layer_norm) current_frame.layer_norm = *frame.layer_norm;
}

ModuleFrameGuard::ModuleFrameGuard(const ResolvedModuleFrame& frame) : saved_(current_frame) {
  current_frame = frame;
}

ModuleFrameGuard::~ModuleFrameGuard() { current_frame = std::move(saved_); }

}  // namespace weft::nn
