// Lazy layers under a precision plugin (reference §6.1, case T47): a LazyLinear built inside a
// plugin's module_init_context captures the plugin's dtype in its placeholders and, at its first
// forward, becomes exactly the Linear an eager construction in that context would have built.
#include <doctest/doctest.h>

#include "plugin_test_helpers.h"
#include "precision/all.h"

using namespace weft;

TEST_CASE("T47 LazyLinear built under bf16-true module_init_context becomes a bf16 Linear at its first forward") {
  precision::HalfPrecision plugin("bf16-true");
  manual_seed(47);
  nn::Linear eager{nullptr};
  {
    precision::Context ctx = plugin.module_init_context();
    eager = nn::Linear(3, 4);
  }
  manual_seed(47);
  nn::LazyLinear lazy{nullptr};
  {
    precision::Context ctx = plugin.module_init_context();
    lazy = nn::LazyLinear(4);
  }
  CHECK(default_dtype() == kFloat32);
  CHECK(lazy->weight.is_uninitialized());
  CHECK(lazy->weight.dtype() == kBFloat16);
  CHECK(lazy->bias.dtype() == kBFloat16);
  CHECK(lazy->type_name() == "LazyLinear");

  const Tensor x = tensor({1.0, -2.0, 0.5, 3.0, 0.25, -1.0}).reshape({2, 3}).to(kBFloat16);
  const Tensor y = lazy(x);

  CHECK_FALSE(nn::has_uninitialized_params(lazy));
  CHECK(lazy->type_name() == "Linear");
  CHECK(lazy->in_features == 3);
  CHECK(lazy->weight.shape() == Shape{4, 3});
  CHECK(lazy->weight.dtype() == kBFloat16);
  CHECK(lazy->bias.shape() == Shape{4});
  CHECK(lazy->bias.dtype() == kBFloat16);
  CHECK(lazy->weight.abs().sum().item() > 0.0);  // pytorch#149691 produced all-zero weights
  CHECK(lazy->to_string() == "Linear(in_features=3, out_features=4, bias=true)");
  // The same draws in the same dtype as the eager Linear built in the same context.
  CHECK(equal(lazy->weight, eager->weight));
  CHECK(equal(lazy->bias, eager->bias));
  CHECK(y.dtype() == kBFloat16);
  CHECK(equal(y, eager(x)));
  // No lazy machinery is left (PyTorch removes its hooks): a wider input is refused as the eager
  // Linear refuses it, instead of re-materialising.
  const Tensor wider = ones({2, 5}, kBFloat16);
  const std::string refusal = error_of([&] { eager(wider); });
  CHECK(!refusal.empty());
  CHECK(error_of([&] { lazy(wider); }) == refusal);
  CHECK(lazy->weight.shape() == Shape{4, 3});
}
