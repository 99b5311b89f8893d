// The thread-local warning handler behind precision/warnings.h. An empty handler means "print
// to stderr", so a thread that installed nothing still sees every warning.
#include "precision/warnings.h"

#include <cstdio>

namespace weft::precision {
namespace {
// Note [Thread-local state] in tensor/init_context.h.
thread_local WarningHandler current_handler;
}

void warn(const std::string& message) {
  if (current_handler) current_handler(message);
  else std::fprintf(stderr, "weft warning: %s\n", message.c_str());
}

WarningHandlerGuard::WarningHandlerGuard(WarningHandler handler) : previous_(std::move(current_handler)) {
  current_handler = std::move(handler);
}

WarningHandlerGuard::~WarningHandlerGuard() { current_handler = std::move(previous_); }

}  // namespace weft::precision
