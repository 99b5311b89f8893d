// Contexts that end out of order (Note [Context order] in precision/context.h): the thread's state
// always comes back to what it was before the outer context began, exit() reports the mistake as
// an error and a destructor as a warning, and a context cannot be ended from another thread.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "precision/plugin_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using precision::Context;
using testing::contains;

namespace {

constexpr const char* kOutOfOrder = "[precision.Context] contexts must end in the reverse order they began";

std::unique_ptr<precision::Precision> plugin(const char* name) { return precision::make_precision(name); }

bool thread_at_bottom() {
  return default_dtype() == kFloat32 && !precision::is_autocast_enabled(DeviceType::CPU) && !skip_init();
}

}  // namespace

TEST_CASE("exit() out of order restores the thread's state, then throws") {
  const auto bf16 = plugin("bf16-true");
  REQUIRE(thread_at_bottom());
  // The case: the outer bf16 frame ends first; its inner twin used to put bf16 back.
  Context init = bf16->tensor_init_context();
  Context forward = bf16->forward_context();
  CHECK(contains(error_of([&] { init.exit(); }), kOutOfOrder));
  CHECK(thread_at_bottom());
  CHECK(init.empty());
  CHECK(forward.empty());  // ended with it, innermost first
  forward.exit();          // a no-op now
  CHECK(thread_at_bottom());
}

TEST_CASE("out of order across kinds of state: a dtype frame and autocast") {
  const auto f64 = plugin("64-true");
  const auto mixed = plugin("bf16-mixed");
  Context outer = f64->tensor_init_context();
  Context middle = mixed->forward_context();
  Context inner = f64->forward_context();
  CHECK(default_dtype() == kFloat64);
  CHECK(precision::is_autocast_enabled(DeviceType::CPU));
  // Ending the middle one ends the inner one too, and leaves the outer one in force.
  CHECK(contains(error_of([&] { middle.exit(); }), "while 1 context begun after it was still open"));
  CHECK(default_dtype() == kFloat64);
  CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
  CHECK(inner.empty());
  CHECK_FALSE(outer.empty());
  outer.exit();  // in order now
  CHECK(thread_at_bottom());
}

TEST_CASE("a destructor out of order restores the state and warns") {
  const auto bf16 = plugin("bf16-true");
  const auto f64 = plugin("64-true");
  precision::CaptureWarnings warnings;
  auto outer = std::make_unique<Context>(bf16->tensor_init_context());
  Context inner = f64->tensor_init_context();
  outer.reset();
  CHECK(thread_at_bottom());
  REQUIRE(warnings.messages().size() == 1);
  CHECK(contains(warnings.messages()[0], kOutOfOrder));
  CHECK(inner.empty());
}

TEST_CASE("contexts in a container come back to the bottom whatever order it destroys them in") {
  const auto bf16 = plugin("bf16-true");
  const auto mixed = plugin("bf16-mixed");
  precision::CaptureWarnings warnings;
  {
    std::vector<Context> stack;
    stack.push_back(bf16->tensor_init_context());
    stack.push_back(mixed->forward_context());
    stack.push_back(plugin("64-true")->tensor_init_context());  // moves as the vector grows
    CHECK(default_dtype() == kFloat64);
  }
  CHECK(thread_at_bottom());
}

TEST_CASE("moved contexts keep their place; in-order ends are silent") {
  const auto bf16 = plugin("bf16-true");
  const auto f64 = plugin("64-true");
  precision::CaptureWarnings warnings;
  Context first = bf16->tensor_init_context();
  Context moved = std::move(first);
  {
    Context second = f64->tensor_init_context();
    CHECK(default_dtype() == kFloat64);
    Context reassigned;
    reassigned = std::move(second);
    CHECK(default_dtype() == kFloat64);
  }
  CHECK(default_dtype() == kBFloat16);
  moved.exit();
  CHECK(thread_at_bottom());
  CHECK(warnings.messages().empty());
}

TEST_CASE("only the innermost open context takes more guards") {
  const auto bf16 = plugin("bf16-true");
  Context outer = bf16->tensor_init_context();
  Context inner = bf16->tensor_init_context();
  CHECK(contains(error_of([&] { outer.push<DefaultDTypeGuard>(kFloat64); }),
                 "[precision.Context] push: only the innermost open context of its thread can take more guards"));
  CHECK(default_dtype() == kBFloat16);
  inner.exit();
  outer.exit();
  CHECK(thread_at_bottom());
}

TEST_CASE("exit() on another thread changes nothing and says why") {
  const auto f64 = plugin("64-true");
  Context context = f64->tensor_init_context();
  std::string error;
  std::thread other([&] {
    error = error_of([&] { context.exit(); });
    CHECK(default_dtype() == kFloat32);  // the other thread's own state was never touched
  });
  other.join();
  CHECK(contains(error, "[precision.Context] a context must end on the thread that began it"));
  CHECK(default_dtype() == kFloat64);
  context.exit();
  CHECK(thread_at_bottom());
}
