// The Fabric facade (reference §5, cases T6, T15, T28, T29, T31, T32, T34, T43, T52): construction
// checks, the wrapped forward, the backward guard, clipping with unscaling, init contexts that
// unwind when they fail, and all-or-nothing checkpoints that carry the precision plugin's state.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <typeinfo>

#include "precision/plugin_test_helpers.h"
#include "fabric/all.h"

using namespace weft;
using testing::contains;
using fabric::Fabric;
using fabric::FabricOptions;

namespace {

FabricOptions with_precision(const char* p) {
  FabricOptions options;
  options.precision = p;
  return options;
}

FabricOptions with_plugin(std::shared_ptr<precision::Precision> plugin) {
  FabricOptions options;
  options.plugin = std::move(plugin);
  return options;
}

// Records the dtype its forward sees, and returns input · 1 (a float output needing grad).
struct DTypeProbe : nn::Module {
  DTypeProbe() { w = register_parameter("w", ones({1})); }
  Tensor forward(const Tensor& input) override {
    seen = input.dtype();
    return mul(input, w.to(input.dtype()));
  }
  Tensor w;
  DType seen = DType::Bool;
};

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("weft_fabric_" + std::to_string(::getpid()) + "_" + name);
}

// Deep copies, so later in-place writes to the originals cannot change them.
nn::TensorDict cloned(const nn::TensorDict& dict) {
  nn::TensorDict out;
  for (const auto& [name, t] : dict) out.insert(name, t.clone());
  return out;
}

bool same(const nn::TensorDict& a, const nn::TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.contains(name) || t.dtype() != b.at(name).dtype() || !equal(t, b.at(name))) return false;
  return true;
}

bool same(const optim::OptimizerState& a, const optim::OptimizerState& b) {
  return a.scalars == b.scalars && same(a.tensors, b.tensors);
}

// A 16-mixed Fabric over Linear(2, 1) + Adam(lr), one step taken, so the model, the optimizer
// (lr, step count, moments) and the scaler (scale 1024, tracker 1) all hold state of their own.
struct TrainedSixteenMixed {
  std::shared_ptr<precision::MixedPrecision> plugin = std::make_shared<precision::MixedPrecision>(
      "16-mixed", "cpu", std::make_unique<precision::GradScaler>(precision::GradScalerOptions{.init_scale = 1024.0}));
  Fabric fabric{with_plugin(plugin)};
  nn::Linear fc{2, 1};
  std::shared_ptr<optim::Adam> adam;
  fabric::FabricModule model = fabric.setup_module(fc);
  fabric::FabricOptimizer optimizer = fabric.setup_optimizer(adam);

  explicit TrainedSixteenMixed(double lr)
      : adam(std::make_shared<optim::Adam>(fc->parameters(), optim::AdamOptions{.lr = lr})) {
    fabric.backward(sum(model(ones({1, 2}))), &model);
    REQUIRE(optimizer.step());
  }
};

}  // namespace

TEST_CASE("Fabric construction: strategies by name, one precision source (T6, T19, T45)") {
  CHECK(Fabric().precision().precision() == "32-true");
  auto make = [](const char* accelerator, int64_t devices, const char* strategy) {
    FabricOptions options;
    options.accelerator = accelerator;
    options.devices = devices;
    options.strategy = strategy;
    return Fabric(options);
  };
  CHECK(contains(error_of([&] { make("tpu", 1, "auto"); }), "expected accelerator 'cpu', 'cuda', 'gpu' or 'auto'"));
  CHECK(make("cpu", 2, "auto").strategy().name() == "ddp");  // several processes: ddp
  CHECK(make("cpu", 1, "auto").strategy().name() == "single_device");
  CHECK(make("cpu", 2, "fsdp").strategy().name() == "fsdp");
  CHECK(contains(error_of([&] { make("cpu", 2, "single_device"); }), "strategy 'single_device' runs one process"));
  CHECK(contains(error_of([&] { make("cpu", 1, "zero3"); }), "expected strategy 'auto', 'single_device', 'ddp' or"));
  CHECK(contains(error_of([&] { make("cpu", 0, "auto"); }), "expected devices >= 1"));
  FabricOptions fsdp_plugin;
  fsdp_plugin.strategy = "fsdp";
  fsdp_plugin.plugin = std::make_shared<precision::Precision>();
  CHECK(contains(error_of([&] { Fabric{fsdp_plugin}; }), "The FSDP strategy can only work with the `FSDPPrecision` "
                                                          "plugin, found 32-true plugin"));
  // QLoRA-FSDP: the 4-bit plugin shards (distributed/fsdp.h); its int8 layers do not.
  FabricOptions fsdp_nf4;
  fsdp_nf4.strategy = "fsdp";
  fsdp_nf4.plugin = std::make_shared<precision::BitsandbytesPrecision>("nf4-dq");
  CHECK(Fabric{fsdp_nf4}.strategy().name() == "fsdp");
  FabricOptions fsdp_int8 = fsdp_nf4;
  fsdp_int8.plugin = std::make_shared<precision::BitsandbytesPrecision>("int8");
  CHECK(contains(error_of([&] { Fabric{fsdp_int8}; }), "can only work with the `FSDPPrecision` plugin, found 32-true "
                                                        "plugin 'int8'; pass the precision as a string"));
  FabricOptions fsdp_double = with_precision("64-true");
  fsdp_double.strategy = "fsdp";
  CHECK(contains(error_of([&] { Fabric{fsdp_double}; }), "is not supported in FSDP"));
  FabricOptions both = with_precision("16-true");
  both.plugin = std::make_shared<precision::Precision>();
  CHECK(contains(error_of([&] { Fabric{both}; }), "Received both `precision=16-true` and `plugins="));
  CHECK(Fabric(with_precision("64-true")).precision().precision() == "64-true");
}

TEST_CASE("T32 16-true: the module sees f16, the caller gets f32, integer inputs stay") {
  Fabric fabric(with_precision("16-true"));
  auto probe = std::make_shared<DTypeProbe>();
  auto model = fabric.setup_module(probe);
  CHECK(probe->w.dtype() == kFloat16);
  const Tensor out = model(ones({2}));
  CHECK(probe->seen == kFloat16);
  CHECK(out.dtype() == kFloat32);
  CHECK(fabric.precision().convert_input(arange(2.0, TensorOptions(kInt64))).dtype() == kInt64);
}

TEST_CASE("T31 under *-mixed, loss.backward() on a model output is refused; fabric.backward works") {
  for (const char* p : {"bf16-mixed"}) {
    CAPTURE(p);
    Fabric fabric(with_precision(p));
    auto model = fabric.setup_module(nn::Linear(3, 2));
    const Tensor loss = sum(model(ones({4, 3})));
    CHECK(contains(error_of([&] { loss.backward(); }),
                   "requires you to call `fabric.backward(loss)` instead of `loss.backward()`."));
    const Tensor again = sum(model(ones({4, 3})));
    fabric.backward(again, &model);
    CHECK(model->parameters()[0].grad().defined());
  }
  // 16-mixed with its scaler (a plugin given directly, since the cpu connector would pick bf16).
  Fabric fp16(with_plugin(std::make_shared<precision::MixedPrecision>("16-mixed", "cpu")));
  auto fc = fp16.setup_module(nn::Linear(3, 2));
  CHECK_THROWS_WITH_AS(sum(fc(ones({4, 3}))).backward(), doctest::Contains("fabric.backward(loss)"), Error);
  // No guard where the plugin does not own backward.
  for (const char* p : {"32-true", "bf16-true"}) {
    CAPTURE(p);
    Fabric fabric(with_precision(p));
    auto model = fabric.setup_module(nn::Linear(3, 2));
    sum(model(ones({4, 3}))).backward();
    CHECK(model->parameters()[0].grad().defined());
  }
}

TEST_CASE("16-mixed end to end through Fabric: the scaled backward is unscaled by the step") {
  // Autocast runs the Linear in float16, so the scaled gradient must fit float16 (max 65504).
  precision::GradScalerOptions scaler_options;
  scaler_options.init_scale = 1024.0;
  auto plugin = std::make_shared<precision::MixedPrecision>(
      "16-mixed", "cpu", std::make_unique<precision::GradScaler>(scaler_options));
  Fabric fabric(with_plugin(plugin));
  nn::Linear fc(2, 1, /*bias=*/false);
  {
    NoGradGuard no_grad;
    fc->weight.fill_(0.5);
  }
  auto [model, optimizer] = fabric.setup(fc, optim::SGD(fc->parameters(), {.lr = 1.0}));
  // loss = sum over batch of x·w with x = (1, 2) twice: dloss/dw = (2, 4), exact in fp16 and bf16.
  const Tensor x = tensor({1.0, 2.0, 1.0, 2.0}).reshape({2, 2});
  fabric.backward(sum(model(x)), &model);
  CHECK(fc->weight.grad().to(kFloat64).data<double>()[1] == 4.0 * 1024.0);
  CHECK(optimizer.step());
  const Tensor w = fc->weight.detach().to(kFloat64);
  CHECK(w.data<double>()[0] == 0.5 - 2.0);
  CHECK(w.data<double>()[1] == 0.5 - 4.0);

  // With the default scale 65536 the float16 gradient overflows: the first step is skipped and
  // the scale backs off (reference §3.4.1, "practical consequence").
  auto default_plugin = std::make_shared<precision::MixedPrecision>("16-mixed", "cpu");
  Fabric fabric2(with_plugin(default_plugin));
  nn::Linear fc2(2, 1, /*bias=*/false);
  auto [model2, optimizer2] = fabric2.setup(fc2, optim::SGD(fc2->parameters(), {.lr = 1.0}));
  const Tensor before = fc2->weight.clone();
  fabric2.backward(sum(model2(x)), &model2);
  CHECK_FALSE(optimizer2.step());
  CHECK(equal(fc2->weight, before));
  CHECK(default_plugin->scaler()->get_scale() == 32768.0);
}

TEST_CASE("T28 clip_gradients needs exactly one of clip_val and max_norm") {
  Fabric fabric;
  nn::Linear fc(2, 2);
  // Named members, not structured bindings: the lambdas below capture them (clang 14 cannot
  // capture a structured binding).
  const auto wrapped = fabric.setup(fc, optim::SGD(fc->parameters(), {}));
  const fabric::FabricModule& model = wrapped.first;
  const fabric::FabricOptimizer& optimizer = wrapped.second;
  CHECK(contains(error_of([&] { fabric.clip_gradients(model, optimizer, 1.0, 1.0); }),
                 "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping "
                 "algorithm!"));
  CHECK(contains(error_of([&] { fabric.clip_gradients(model, optimizer); }),
                 "You have to specify either `clip_val` or `max_norm` to do gradient clipping!"));
}

TEST_CASE("T29 32-true clipping: by norm returns the norm before clipping; by value clamps") {
  for (bool by_norm : {true, false}) {
    CAPTURE(by_norm);
    Fabric fabric;
    nn::Linear fc(32, 2, /*bias=*/false);
    {
      NoGradGuard no_grad;
      fc->weight.fill_(0.01);
    }
    auto [model, optimizer] = fabric.setup(fc, optim::SGD(fc->parameters(), {}));
    // Batch of 4 rows of 0.1: every weight gradient is 4 · 0.1 = 0.4; 64 of them, norm 0.4 · 8 = 3.2.
    fabric.backward(sum(model(full({4, 32}, 0.1))), &model);
    const Tensor grad = fc->weight.grad();
    if (by_norm) {
      const auto norm = fabric.clip_gradients(model, optimizer, std::nullopt, 1.6);
      REQUIRE(norm.has_value());
      CHECK(*norm == doctest::Approx(3.2).epsilon(1e-6));
      CHECK(std::sqrt(sum(mul(grad, grad)).item<double>()) == doctest::Approx(1.6).epsilon(1e-5));
    } else {
      CHECK_FALSE(fabric.clip_gradients(model, optimizer, 0.2).has_value());
      CHECK(max(grad).item<double>() == doctest::Approx(0.2));
      CHECK(min(grad).item<double>() == doctest::Approx(0.2));
    }
  }
}

TEST_CASE("clip_gradients under 16-mixed unscales first; a non-finite norm raises by default") {
  auto plugin = std::make_shared<precision::MixedPrecision>("16-mixed", "cpu");
  Fabric fabric(with_plugin(plugin));
  nn::Linear fc(1, 1, /*bias=*/false);
  auto [model, optimizer] = fabric.setup(fc, optim::SGD(fc->parameters(), {.lr = 1.0}));
  fabric.backward(sum(mul(model(tensor({3.0}).reshape({1, 1})), 1.0)), &model);  // grad 3 · S
  CHECK(fabric.clip_gradients(model, optimizer, 1.0) == std::nullopt);
  CHECK(fc->weight.grad().item<double>() == 1.0);
  optimizer.step();
  // Next step: an inf gradient makes the total norm non-finite.
  optimizer.zero_grad();
  fabric.backward(sum(mul(model(tensor({1.0}).reshape({1, 1})), std::numeric_limits<double>::infinity())), &model);
  CHECK_THROWS_AS(fabric.clip_gradients(model, optimizer, std::nullopt, 1.0), Error);
}

TEST_CASE("T34 autocast(): 64-true sets the default dtype, 32-true does nothing, bf16-mixed autocasts") {
  {
    Fabric fabric(with_precision("64-true"));
    precision::Context ctx = fabric.autocast();
    CHECK(default_dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat32);
  {
    Fabric fabric;
    precision::Context ctx = fabric.autocast();
    CHECK(default_dtype() == kFloat32);
    CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
  }
  {
    Fabric fabric(with_precision("bf16-mixed"));
    precision::Context ctx = fabric.autocast();
    CHECK(precision::is_autocast_enabled(DeviceType::CPU));
    CHECK(precision::autocast_dtype(DeviceType::CPU) == kBFloat16);
  }
  CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
}

TEST_CASE("T15 init_module(empty_init) skips initialisation only when true; init_tensor / init_module split") {
  Fabric fabric(with_plugin(std::make_shared<testing::ReplacingPrecision>()));
  {
    auto ctx = fabric.init_module(true);
    CHECK(skip_init());
    nn::Linear fc(2, 2);
    CHECK(dynamic_cast<testing::MarkedLinear*>(fc.get()) != nullptr);
    CHECK(fc->weight.dtype() == kFloat64);
  }
  for (std::optional<bool> empty : {std::optional<bool>(), std::optional<bool>(false)}) {
    auto ctx = fabric.init_module(empty);
    CHECK_FALSE(skip_init());
  }
  {
    auto ctx = fabric.init_tensor();
    CHECK_FALSE(skip_init());
    nn::Linear fc(2, 2);
    CHECK(testing::has_type<nn::LinearImpl>(*fc));
    CHECK(fc->weight.dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat32);
}

TEST_CASE("T43 save/load carries the GradScaler state; a file without it cannot feed a 16-mixed plugin") {
  const auto path = temp_file("scaler.safetensors");
  const auto bf16_path = temp_file("bf16.safetensors");
  Fabric::seed_everything(1);
  auto plugin = std::make_shared<precision::MixedPrecision>("16-mixed", "cpu");
  Fabric fabric(with_plugin(plugin));
  nn::Linear fc(2, 1);
  const auto wrapped = fabric.setup(fc, optim::SGD(fc->parameters(), {.lr = 0.1}));
  const fabric::FabricModule& model = wrapped.first;  // captured by lambdas below: no binding
  const fabric::FabricOptimizer& optimizer = wrapped.second;
  // One inf step (scale backs off to 32768), one clean step (tracker 1).
  fabric.backward(mul(sum(model(ones({1, 2}))), std::numeric_limits<double>::infinity()), &model);
  CHECK_FALSE(optimizer.step());
  optimizer.zero_grad();
  fabric.backward(sum(model(ones({1, 2}))), &model);
  CHECK(optimizer.step());
  fabric.save(path, model, &optimizer, {{"epoch", "4"}});

  Fabric::seed_everything(2);
  auto fresh_plugin = std::make_shared<precision::MixedPrecision>("16-mixed", "cpu");
  Fabric restored(with_plugin(fresh_plugin));
  nn::Linear fc2(2, 1);
  const auto wrapped2 = restored.setup(fc2, optim::SGD(fc2->parameters(), {.lr = 0.1}));
  const fabric::FabricModule& model2 = wrapped2.first;
  const fabric::FabricOptimizer& optimizer2 = wrapped2.second;
  const auto meta = restored.load(path, model2, &optimizer2);
  CHECK(meta == io::SafetensorsMetadata{{"epoch", "4"}});
  CHECK(fresh_plugin->scaler()->get_scale() == 32768.0);
  CHECK(fresh_plugin->scaler()->growth_tracker() == 1);
  CHECK(equal(fc2->weight, fc->weight));

  Fabric bf16(with_precision("bf16-mixed"));
  auto bf16_model = bf16.setup_module(nn::Linear(2, 1));
  bf16.save(bf16_path, bf16_model, nullptr);
  CHECK(contains(error_of([&] { restored.load(bf16_path, model2, nullptr); }), "The source state dict is empty"));
  CHECK(contains(error_of([&] { fabric.save(path, model, nullptr, {{"__precision__.x", "1"}}); }),
                 "reserved prefix"));
  std::filesystem::remove(path);
  std::filesystem::remove(bf16_path);
}

TEST_CASE("a failed load changes nothing: a bf16-mixed file into a 16-mixed fabric (T43's error)") {
  const auto path = temp_file("atomic_bf16.safetensors");
  Fabric::seed_everything(5);
  Fabric bf16(with_precision("bf16-mixed"));
  nn::Linear source(2, 1);
  auto source_adam = std::make_shared<optim::Adam>(source->parameters(), optim::AdamOptions{.lr = 0.1});
  auto [source_model, source_optimizer] = bf16.setup(source, source_adam);
  for (int i = 0; i < 2; ++i) {
    bf16.backward(sum(source_model(ones({1, 2}))), &source_model);
    source_optimizer.step();
  }
  bf16.save(path, source_model, &source_optimizer);

  Fabric::seed_everything(6);
  TrainedSixteenMixed target(0.05);
  const nn::TensorDict model_before = cloned(target.fc->state_dict());
  const optim::OptimizerState optimizer_before = target.adam->state_dict();
  const nn::TensorDict scaler_before = cloned(target.plugin->state_dict());
  // The file differs in every part, so a partial load would show.
  REQUIRE_FALSE(same(source->state_dict(), model_before));
  REQUIRE_FALSE(same(source_adam->state_dict(), optimizer_before));

  CHECK(contains(error_of([&] { target.fabric.load(path, target.model, &target.optimizer); }),
                 "The source state dict is empty"));
  CHECK(same(target.fc->state_dict(), model_before));
  CHECK(same(target.adam->state_dict(), optimizer_before));
  CHECK(same(target.plugin->state_dict(), scaler_before));

  // A precision entry that is not a number is refused before anything is written, too.
  io::save_checkpoint(path, *source, source_adam.get(),
                      {{"__precision__", "16-mixed"}, {"__precision__.scale", "many"}});
  CHECK(error_of([&] { target.fabric.load(path, target.model, &target.optimizer); }) ==
        "[Fabric.load] metadata '__precision__.scale': expected a number, got 'many'");
  CHECK(same(target.fc->state_dict(), model_before));
  CHECK(same(target.adam->state_dict(), optimizer_before));
  CHECK(same(target.plugin->state_dict(), scaler_before));
  std::filesystem::remove(path);
}

TEST_CASE("a load the model refuses after the plugin and optimizer accepted it puts both back") {
  // Same parameter shapes and plugin, other names: the scaler and the optimizer state fit, the
  // model's strict key check does not.
  const auto path = temp_file("atomic_names.safetensors");
  Fabric::seed_everything(7);
  TrainedSixteenMixed source(0.1);
  nn::Sequential renamed(source.fc);
  source.fabric.save(path, source.fabric.setup_module(renamed), &source.optimizer);

  Fabric::seed_everything(8);
  TrainedSixteenMixed target(0.05);
  target.fabric.backward(mul(sum(target.model(ones({1, 2}))), std::numeric_limits<double>::infinity()),
                         &target.model);
  CHECK_FALSE(target.optimizer.step());  // scale 512, tracker 0: not the file's 1024 and 1
  target.optimizer.zero_grad();
  const nn::TensorDict model_before = cloned(target.fc->state_dict());
  const optim::OptimizerState optimizer_before = target.adam->state_dict();
  const nn::TensorDict scaler_before = cloned(target.plugin->state_dict());
  REQUIRE(target.plugin->scaler()->get_scale() == 512.0);
  REQUIRE_FALSE(same(source.fc->state_dict(), model_before));
  REQUIRE_FALSE(same(source.adam->state_dict(), optimizer_before));
  REQUIRE_FALSE(same(source.plugin->state_dict(), scaler_before));

  CHECK(contains(error_of([&] { target.fabric.load(path, target.model, &target.optimizer); }),
                 "missing keys: 'weight', 'bias'"));
  CHECK(same(target.fc->state_dict(), model_before));
  CHECK(same(target.adam->state_dict(), optimizer_before));
  CHECK(same(target.plugin->state_dict(), scaler_before));
  CHECK(target.plugin->scaler()->get_scale() == 512.0);
  CHECK(target.plugin->scaler()->growth_tracker() == 0);
  std::filesystem::remove(path);
}

TEST_CASE("T52 a context that fails after an earlier frame was pushed propagates the error and leaks nothing") {
  // Fabric::init_module pushes its device / skip-init frame, then asks the plugin, which pushes
  // its float64 frame and then refuses (ReplacingPrecision with an ignore list, as bitsandbytes).
  auto plugin = std::make_shared<testing::ReplacingPrecision>();
  plugin->ignore_modules = {"head"};
  Fabric fabric(with_plugin(plugin));
  const char* refusal = "[ReplacingPrecision] Instantiating your model under the `init_module` context manager is "
                        "not supported when used with ignore_modules";
  const DefaultDTypeGuard outer(kFloat16);  // what the failures must come back to
  for (const std::optional<bool> empty_init : {std::optional<bool>(), std::optional<bool>(true)}) {
    CHECK_THROWS_WITH_AS(fabric.init_module(empty_init), refusal, Error);
    CHECK(default_dtype() == kFloat16);
    CHECK(default_device() == kCPU);
    CHECK_FALSE(skip_init());
    CHECK_FALSE(nn::current_module_frame().linear);
  }
  CHECK_THROWS_WITH_AS(plugin->module_init_context(), refusal, Error);
  CHECK(default_dtype() == kFloat16);
  nn::Linear after(2, 2);
  CHECK(testing::has_type<nn::LinearImpl>(*after));
  CHECK(after->weight.dtype() == kFloat16);
  // The failure left nothing behind that changes the contexts that do work.
  {
    auto ctx = fabric.init_tensor();
    CHECK(default_dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat16);
}
