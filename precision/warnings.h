// Warnings of the precision layer: the messages Lightning raises as UserWarning (a deprecated
// precision alias, the CPU fallback from fp16 to bf16, FSDP's lower-precision notice).
//
// A warning goes to the calling thread's innermost handler, installed by a WarningHandlerGuard;
// with none installed it is printed to stderr. Guards nest strictly and restore on exceptions,
// so a test can capture exactly the warnings of the code it runs (CaptureWarnings).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace weft::precision {

using WarningHandler = std::function<void(const std::string& message)>;

// Emits `message` to the current handler.
void warn(const std::string& message);

// Routes this thread's warnings to `handler` for the guard's lifetime.
class WarningHandlerGuard {
 public:
  explicit WarningHandlerGuard(WarningHandler handler);
  ~WarningHandlerGuard();
  WarningHandlerGuard(const WarningHandlerGuard&) = delete;
  WarningHandlerGuard& operator=(const WarningHandlerGuard&) = delete;

 private:
  WarningHandler previous_;
};

// Collects this thread's warnings, in order, while it lives.
class CaptureWarnings {
 public:
  CaptureWarnings() : guard_([this](const std::string& m) { messages_.push_back(m); }) {}
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
  WarningHandlerGuard guard_;
};

}  // namespace weft::precision
