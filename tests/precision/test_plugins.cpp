// The precision plugins against the reference (fabric-precision.md §2, §3.1–3.4 and cases
// T4, T5, T8–T14, T16, T26, T27, T30, T33): hook defaults, dtype contexts and their nesting,
// input/output casting, autocast in the forward, loss scaling, selection from a precision input.
#include <doctest/doctest.h>

#include <limits>
#include <map>
#include <stdexcept>
#include <string>

#include "plugin_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using testing::contains;
using namespace weft::precision;
using testing::NamedSgd;

namespace {

}  // namespace

TEST_CASE("T10 base Precision: identity hooks, empty state, main_params group by group") {
  Precision plugin;
  CHECK(plugin.precision() == "32-true");
  nn::Linear fc(2, 2);
  plugin.convert_module(*fc);
  CHECK(fc->weight.dtype() == kFloat32);
  CHECK(plugin.convert_input(ones({2}, kFloat64)).dtype() == kFloat64);
  CHECK(plugin.convert_output(ones({2}, kFloat64)).dtype() == kFloat64);
  CHECK(plugin.state_dict().empty());
  CHECK(plugin.tensor_init_context().empty());
  CHECK(plugin.module_init_context().empty());
  CHECK(plugin.forward_context().empty());
  CHECK_FALSE(plugin.requires_plugin_backward());

  Tensor a = ones({1}), b = ones({2}), c = ones({3});
  NamedSgd sgd("SGD", {{a, b}, {c}});
  const auto params = plugin.main_params(sgd);
  REQUIRE(params.size() == 3);
  CHECK(params[0].is_same(a));
  CHECK(params[1].is_same(b));
  CHECK(params[2].is_same(c));
  CHECK(plugin.optimizer_step(sgd));
  CHECK(sgd.steps == 1);
}

TEST_CASE("T11 DoublePrecision: convert_module casts to float64; forward_context sets the default dtype") {
  DoublePrecision plugin;
  CHECK(plugin.precision() == "64-true");
  nn::Linear fc(2, 2);
  plugin.convert_module(*fc);
  CHECK(fc->weight.dtype() == kFloat64);
  CHECK(fc->bias.dtype() == kFloat64);
  {
    Context forward = plugin.forward_context();
    CHECK(default_dtype() == kFloat64);
    CHECK(zeros({1}).dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat32);
}

TEST_CASE("T12 DoublePrecision: floating inputs to float64, integers untouched, outputs to the default dtype") {
  DoublePrecision plugin;
  std::map<std::string, Tensor> batch{{"x", ones({2})}, {"i", arange(3.0, TensorOptions(kInt64))}};
  const auto converted = plugin.convert_input(batch);
  CHECK(converted.at("x").dtype() == kFloat64);
  CHECK(converted.at("i").dtype() == kInt64);
  CHECK(plugin.convert_output(ones({2}, kFloat64)).dtype() == kFloat32);
}

TEST_CASE("T13 HalfPrecision bf16-true: module_init_context builds bf16 layers and restores after an exception") {
  HalfPrecision plugin("bf16-true");
  CHECK(plugin.precision() == "bf16-true");
  try {
    Context init = plugin.module_init_context();
    nn::Linear fc(2, 2);
    CHECK(fc->weight.dtype() == kBFloat16);
    throw std::runtime_error("inside");
  } catch (const std::runtime_error&) {
  }
  CHECK(default_dtype() == kFloat32);
  CHECK(contains(error_of([] { HalfPrecision("32-true"); }), "expected precision '16-true' or 'bf16-true'"));
}

TEST_CASE("T14 HalfPrecision 16-true tensor_init_context: floats f16, integers int64, explicit dtype wins") {
  HalfPrecision plugin("16-true");
  Context init = plugin.tensor_init_context();
  CHECK(tensor({42.0}).dtype() == kFloat16);
  CHECK(arange(3.0, TensorOptions(kInt64)).dtype() == kInt64);
  CHECK(tensor({42.0}, kFloat64).dtype() == kFloat64);
}

TEST_CASE("T16 nested contexts restore last-in first-out") {
  DoublePrecision plugin;
  {
    Context outer = plugin.tensor_init_context();
    CHECK(default_dtype() == kFloat64);
    {
      Context inner = plugin.forward_context();
      CHECK(default_dtype() == kFloat64);
    }
    CHECK(default_dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat32);
  // exit() ends a context early; moving one moves its ownership, nothing is undone twice.
  Context moved;
  {
    Context ctx = HalfPrecision("16-true").tensor_init_context();
    moved = std::move(ctx);
    CHECK(default_dtype() == kFloat16);
  }
  CHECK(default_dtype() == kFloat16);
  moved.exit();
  CHECK(default_dtype() == kFloat32);
}

TEST_CASE("T8 MixedPrecision refuses anything but 16-mixed and bf16-mixed, printing the input's repr") {
  CHECK(contains(error_of([] { MixedPrecision("16", "cpu"); }),
                 "Passed `MixedPrecision(precision='16')`. Precision must be '16-mixed' or 'bf16-mixed'."));
  CHECK(contains(error_of([] { MixedPrecision(16, "cpu"); }), "Passed `MixedPrecision(precision=16)`."));
  CHECK(contains(error_of([] { MixedPrecision("bf16", "cpu"); }), "Passed `MixedPrecision(precision='bf16')`."));
  CHECK(contains(error_of([] { MixedPrecision("bf16-mixed", "tpu"); }), "expected device 'cpu' or 'cuda'"));
}

TEST_CASE("T9 MixedPrecision: bf16-mixed refuses a scaler; 16-mixed makes one") {
  CHECK(contains(error_of([] { MixedPrecision("bf16-mixed", "cpu", std::make_unique<GradScaler>()); }),
                 "`precision='bf16-mixed'` does not use a scaler"));
  CHECK(MixedPrecision("bf16-mixed", "cpu").scaler() == nullptr);
  MixedPrecision fp16("16-mixed", "cpu");
  REQUIRE(fp16.scaler() != nullptr);
  CHECK(fp16.scaler()->get_scale() == 65536.0);
  CHECK(fp16.requires_plugin_backward());
  CHECK(MixedPrecision("bf16-mixed", "cpu").requires_plugin_backward());
}

TEST_CASE("T33 bf16-mixed on the cpu: autocast inside the forward context, f32 weights, casts in and out") {
  MixedPrecision plugin("bf16-mixed", "cpu");
  nn::Linear fc(4, 2);
  plugin.convert_module(*fc);
  CHECK(fc->weight.dtype() == kFloat32);
  const Tensor x = plugin.convert_input(ones({3, 4}));
  CHECK(x.dtype() == kBFloat16);
  Tensor out;
  {
    Context forward = plugin.forward_context();
    CHECK(is_autocast_enabled(DeviceType::CPU));
    CHECK(autocast_dtype(DeviceType::CPU) == kBFloat16);
    out = fc(x);
    CHECK(out.dtype() == kBFloat16);
  }
  CHECK_FALSE(is_autocast_enabled(DeviceType::CPU));
  CHECK(plugin.convert_output(out).dtype() == kFloat32);
}

TEST_CASE("16-mixed: backward scales the loss, optimizer_step unscales, steps and updates") {
  MixedPrecision plugin("16-mixed", "cpu");
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  NamedSgd sgd("SGD", {{w}});
  // loss = 3·w0 + 5·w1, so dloss/dw = (3, 5); the scaled backward gives 65536·(3, 5).
  const Tensor loss = sum(mul(w, tensor({3.0, 5.0})));
  plugin.backward(loss, nullptr);
  CHECK(w.grad().to(kFloat64).data<double>()[0] == 3.0 * 65536.0);
  CHECK(plugin.optimizer_step(sgd));
  CHECK(sgd.steps == 1);
  const Tensor updated = w.detach().to(kFloat64);
  CHECK(updated.data<double>()[0] == 1.0 - 3.0);
  CHECK(updated.data<double>()[1] == 2.0 - 5.0);
  CHECK(plugin.scaler()->get_scale() == 65536.0);
  CHECK(plugin.scaler()->growth_tracker() == 1);

  // An inf gradient: the step is skipped and the scale backs off.
  sgd.zero_grad();
  plugin.backward(sum(mul(w, tensor({std::numeric_limits<double>::infinity(), 1.0}))), nullptr);
  CHECK_FALSE(plugin.optimizer_step(sgd));
  CHECK(sgd.steps == 1);
  CHECK(plugin.scaler()->get_scale() == 32768.0);

  // The state round-trips into a fresh plugin.
  MixedPrecision restored("16-mixed", "cpu");
  restored.load_state_dict(plugin.state_dict());
  CHECK(restored.scaler()->get_scale() == 32768.0);
  CHECK(restored.scaler()->growth_tracker() == 0);
  CHECK(contains(error_of([&] { restored.load_state_dict({}); }), "The source state dict is empty"));
  CHECK(MixedPrecision("bf16-mixed", "cpu").state_dict().empty());
}

TEST_CASE("T30 16-mixed built directly on the cpu: unscale before clipping, step does not unscale again") {
  MixedPrecision plugin("16-mixed", "cpu");
  Tensor w = tensor({0.0}).requires_grad_();
  NamedSgd sgd("SGD", {{w}});
  plugin.backward(sum(mul(w, 4.0)), nullptr);  // g = 4, grad = 4·S
  CHECK(w.grad().item<double>() == 4.0 * 65536.0);
  plugin.unscale_gradients(sgd);
  CHECK(w.grad().item<double>() == 4.0);
  optim::clip_grad_value_(plugin.main_params(sgd), 1.5);
  CHECK(w.grad().item<double>() == 1.5);
  CHECK(contains(error_of([&] { plugin.unscale_gradients(sgd); }),
                 "unscale_() has already been called on this optimizer since the last update()."));
  CHECK(plugin.optimizer_step(sgd));
  CHECK(w.detach().item<double>() == -1.5);
}

TEST_CASE("T26 16-mixed refuses LBFGS; bf16-mixed steps it") {
  Tensor w = tensor({1.0}).requires_grad_();
  NamedSgd lbfgs("LBFGS", {{w}});
  MixedPrecision fp16("16-mixed", "cpu");
  CHECK(contains(error_of([&] { fp16.optimizer_step(lbfgs); }), "AMP and the LBFGS optimizer are not compatible."));
  MixedPrecision bf16("bf16-mixed", "cpu");
  CHECK(bf16.optimizer_step(lbfgs));
  CHECK(lbfgs.steps == 1);
}

TEST_CASE("T27 16-mixed refuses clipping with an optimizer that unscales in its own step") {
  Tensor w = tensor({1.0}).requires_grad_();
  NamedSgd fused("Adam", {{w}}, /*supports_amp=*/true);
  MixedPrecision fp16("16-mixed", "cpu");
  CHECK(contains(error_of([&] { fp16.unscale_gradients(fused); }),
                 "Gradient clipping is not implemented for optimizers handling the unscaling."));
  MixedPrecision bf16("bf16-mixed", "cpu");
  bf16.unscale_gradients(fused);  // no scaler: nothing to unscale, nothing refused
}

TEST_CASE("T4 make_precision picks the plugin for each cpu precision") {
  CHECK(testing::has_type<Precision>(*make_precision("32-true")));
  CHECK(testing::has_type<Precision>(*make_precision(32)));
  CHECK(testing::has_type<DoublePrecision>(*make_precision("64-true")));
  auto half = make_precision("16-true");
  REQUIRE(dynamic_cast<HalfPrecision*>(half.get()) != nullptr);
  CHECK(dynamic_cast<HalfPrecision&>(*half).dtype() == kFloat16);
  auto bhalf = make_precision("bf16-true");
  CHECK(dynamic_cast<HalfPrecision&>(*bhalf).dtype() == kBFloat16);
  auto mixed = make_precision("bf16-mixed", "cpu");
  auto* amp = dynamic_cast<MixedPrecision*>(mixed.get());
  REQUIRE(amp != nullptr);
  CHECK(amp->device_type() == DeviceType::CPU);
  CHECK(amp->scaler() == nullptr);
  auto te = make_precision("transformer-engine", "cpu");
  REQUIRE(dynamic_cast<TransformerEnginePrecision*>(te.get()) != nullptr);
  CHECK(dynamic_cast<TransformerEnginePrecision&>(*te).weights_dtype() == kBFloat16);
  auto te16 = make_precision("transformer-engine-float16", "cpu");
  CHECK(dynamic_cast<TransformerEnginePrecision&>(*te16).weights_dtype() == kFloat16);
  // The reference's class attribute reads "transformer-engine" for float16 weights too (T7).
  CHECK(te16->precision() == "transformer-engine");
  CHECK(te16->mode() == PrecisionMode::TransformerEngineFloat16);
  CHECK(te->precision() == "transformer-engine");
  CHECK(contains(error_of([] { make_precision("invalid"); }), "Precision 'invalid' is invalid."));
}

TEST_CASE("T5 make_precision: 16-mixed on the cpu warns and becomes bf16-mixed without a scaler") {
  CaptureWarnings warnings;
  auto plugin = make_precision("16-mixed", "cpu");
  REQUIRE(warnings.messages().size() == 1);
  CHECK(contains(warnings.messages()[0], "AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'`"));
  CHECK(plugin->precision() == "bf16-mixed");
  CHECK(dynamic_cast<MixedPrecision&>(*plugin).scaler() == nullptr);
  // On cuda it stays 16-mixed, with its scaler.
  auto cuda = make_precision("16-mixed", "cuda");
  CHECK(cuda->precision() == "16-mixed");
  CHECK(dynamic_cast<MixedPrecision&>(*cuda).scaler() != nullptr);
}
