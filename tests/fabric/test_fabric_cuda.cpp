// Fabric on CUDA: the accelerator table of fabric/accelerator.h cell by cell (any machine), what
// this build and machine answer to "cuda" and "auto", a hand-built MixedPrecision plugin for the
// other device type refused, and — on a GPU only — that setup moves the
// model and the optimizer state, init_module creates on the device, one training step equals the
// CPU's, and bf16-mixed autocasts the products on the CUDA device type.
//
// The GPU cases are reported as skipped by doctest where there is none (and in a build without
// CUDA); they have the same shape as tests/tensor/test_cuda.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "cuda_test_helpers.h"
#include "precision/plugin_test_helpers.h"
#include "fabric/accelerator.h"
#include "fabric/all.h"

using namespace weft;
using test::kNoGpu;
using testing::contains;
using fabric::Fabric;
using fabric::FabricOptions;
using fabric::resolve_accelerator;

namespace {

FabricOptions on(const char* accelerator, const char* precision = "32-true") {
  FabricOptions options;
  options.accelerator = accelerator;
  options.precision = precision;
  return options;
}

nn::Sequential small_mlp() {
  nn::Sequential net;
  net->push_back(nn::Linear(6, 5));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(5, 3));
  return net;
}

// One AdamW step of a fresh seeded MLP on `accelerator`; returns the first layer's weight on the CPU.
Tensor one_step(const char* accelerator, const char* precision) {
  Fabric fabric(on(accelerator, precision));
  Fabric::seed_everything(7);
  nn::Sequential net = small_mlp();
  auto [model, optimizer] = fabric.setup(net, optim::AdamW(net->parameters(), {.lr = 0.1}));
  Generator gen(3);
  const Tensor x = fabric.to_device(randn({4, 6}, {}, &gen));
  const Tensor y = fabric.to_device(from_vector<int64_t>({0, 2, 1, 2}, {4}));
  fabric.backward(cross_entropy(model(x), y), &model);
  optimizer.step();
  return net->parameters()[0].detach().to(kCPU);
}

}  // namespace

TEST_CASE("resolve_accelerator: every request against every build and machine") {
  struct Row {
    const char* request;
    const char* cpu_only;     // CPU-only build
    const char* no_gpu;       // CUDA build, no GPU
    const char* with_gpu;     // CUDA build with a GPU
  };
  // "!" marks a refusal; its message is checked below.
  const Row table[] = {{"cpu", "cpu", "cpu", "cpu"},
                       {"auto", "cpu", "cpu", "cuda"},
                       {"cuda", "!", "!", "cuda"},
                       {"gpu", "!", "!", "cuda"},
                       {"tpu", "!", "!", "!"},
                       {"", "!", "!", "!"}};
  for (const Row& row : table) {
    CAPTURE(row.request);
    const std::pair<bool, bool> machines[] = {{false, false}, {true, false}, {true, true}};
    const char* expected[] = {row.cpu_only, row.no_gpu, row.with_gpu};
    for (int m = 0; m < 3; ++m) {
      CAPTURE(m);
      const auto [built, available] = machines[m];
      if (std::string(expected[m]) == "!") {
        CHECK_THROWS_AS(resolve_accelerator(row.request, built, available), Error);
      } else {
        CHECK(resolve_accelerator(row.request, built, available) == expected[m]);
      }
    }
  }
  CHECK(error_of([] { resolve_accelerator("cuda", false, false); }) ==
        "[Fabric] accelerator 'cuda' needs weft built with the CUDA backend; this build is CPU-only, use "
        "accelerator='cpu'");
  CHECK(error_of([] { resolve_accelerator("gpu", true, false); }) ==
        "[Fabric] accelerator 'gpu' expected a CUDA GPU, got none: weft is built with CUDA but "
        "cuda::is_available() is false (no driver or no device visible); use accelerator='cpu' or 'auto'");
  CHECK(error_of([] { resolve_accelerator("tpu", true, true); }) ==
        "[Fabric] expected accelerator 'cpu', 'cuda', 'gpu' or 'auto', got 'tpu'");
}

TEST_CASE("Fabric on this build and machine: cpu stays cpu, auto follows the GPU, cuda is refused without one") {
  Fabric cpu(on("cpu"));
  CHECK(cpu.accelerator() == "cpu");
  CHECK(cpu.device() == Device(kCPU));
  const Tensor t = arange(4.0);
  CHECK(cpu.to_device(t).device() == Device(kCPU));
  CHECK(cpu.to_device(t).to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(Fabric(on("auto")).accelerator() == (cuda::is_available() ? "cuda" : "cpu"));
  FabricOptions elsewhere;
  elsewhere.plugin = std::make_shared<precision::MixedPrecision>("bf16-mixed", "cuda");
  CHECK(error_of([&] { Fabric{elsewhere}; }) ==
        "[Fabric] the MixedPrecision plugin autocasts on 'cuda' but the accelerator is 'cpu'; construct it with "
        "device='cpu'");
  elsewhere.plugin = std::make_shared<precision::MixedPrecision>("bf16-mixed", "cpu");
  CHECK(Fabric(elsewhere).device() == Device(kCPU));
  if (!cuda::is_built()) {
    CHECK(contains(error_of([] { Fabric{on("cuda")}; }), "needs weft built with the CUDA backend"));
  } else if (!cuda::is_available()) {
    CHECK(contains(error_of([] { Fabric{on("gpu")}; }), "expected a CUDA GPU, got none"));
  }
}

TEST_CASE("Fabric on cuda: setup moves the model, init_module creates on the device, several processes are refused" *
          doctest::skip(kNoGpu)) {
  Fabric fabric(on("cuda"));
  CHECK(fabric.accelerator() == "cuda");
  CHECK(fabric.device() == Device(DeviceType::CUDA, cuda::current_device()));
  nn::Sequential net = small_mlp();
  const fabric::FabricModule model = fabric.setup_module(net);
  for (const Tensor& p : net->parameters()) CHECK(p.device().is_cuda());
  {
    precision::Context init = fabric.init_module();
    CHECK(nn::Linear(2, 2)->parameters()[0].device().is_cuda());
  }
  FabricOptions two = on("cuda");
  two.devices = 2;
  CHECK(contains(error_of([&] { Fabric{two}; }), "accelerator 'cuda' trains in one process"));
}

TEST_CASE("Fabric on cuda: an optimizer that stepped on the cpu gets its state on the device" * doctest::skip(kNoGpu)) {
  nn::Sequential net = small_mlp();
  optim::AdamW adamw(net->parameters(), {.lr = 0.1});
  for (Tensor p : net->parameters()) p.set_grad(ones_like(p));
  adamw.step();
  Fabric fabric(on("cuda"));
  auto [model, optimizer] = fabric.setup(net, std::move(adamw));
  for (const auto& entry : optimizer->state_dict().tensors) {
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(entry.second.device().is_cuda());
  }
  for (Tensor p : net->parameters()) p.set_grad(ones_like(p));
  CHECK(optimizer.step());
}

TEST_CASE("Fabric on cuda: one 32-true and one bf16-mixed AdamW step equal the cpu's" * doctest::skip(kNoGpu)) {
  for (const char* precision : {"32-true", "bf16-mixed"}) {
    CAPTURE(precision);
    const auto gpu = one_step("cuda", precision).to_vector<double>();
    const auto cpu = one_step("cpu", precision).to_vector<double>();
    const double tolerance = std::string(precision) == "32-true" ? 1e-5 : 2e-2;
    REQUIRE(gpu.size() == cpu.size());
    for (size_t i = 0; i < gpu.size(); ++i) CHECK(std::abs(gpu[i] - cpu[i]) <= tolerance);
  }
}

TEST_CASE("Fabric on cuda: bf16-mixed runs the products in bfloat16 and hands back float32" * doctest::skip(kNoGpu)) {
  Fabric fabric(on("cuda", "bf16-mixed"));
  nn::Linear layer(4, 3);
  const fabric::FabricModule model = fabric.setup_module(layer);
  const Tensor x = fabric.to_device(ones({2, 4}));
  {
    precision::Context autocast = fabric.autocast();
    CHECK(precision::is_autocast_enabled(DeviceType::CUDA));
    CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
    CHECK(layer(x).dtype() == kBFloat16);
    CHECK(log_softmax(layer(x), 1).dtype() == kFloat32);
  }
  CHECK(model(x).dtype() == kFloat32);
}
