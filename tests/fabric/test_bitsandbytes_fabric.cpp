// BitsandbytesPrecision through Fabric on the CPU: T38 (the reference refuses a non-CUDA
// accelerator; weft's plugin runs — a deliberate difference) and T39 through fabric.init_tensor()
// / fabric.init_module().
#include <doctest/doctest.h>

#include <typeinfo>

#include "fabric/all.h"

using namespace weft;
using precision::BitsandbytesPrecision;
using precision::quant::Linear4bitImpl;
using precision::quant::Linear8bitLtImpl;

namespace {

const char* kModes[] = {"nf4", "nf4-dq", "fp4", "fp4-dq", "int8-training", "int8"};

bool is_quantized(const std::string& mode, const std::shared_ptr<nn::Module>& m) {
  if (mode.starts_with("int8")) return dynamic_cast<Linear8bitLtImpl*>(m.get()) != nullptr;
  return dynamic_cast<Linear4bitImpl*>(m.get()) != nullptr;
}

fabric::Fabric make_fabric(const char* mode) {
  fabric::FabricOptions options;
  options.accelerator = "cpu";
  options.plugin = std::make_shared<BitsandbytesPrecision>(mode);
  return fabric::Fabric(options);
}

}  // namespace

TEST_CASE("T38 (deliberate difference) the bitsandbytes plugin runs on the CPU through Fabric; the reference requires a CUDA GPU") {
  for (const char* mode : kModes) {
    CAPTURE(mode);
    fabric::Fabric f = make_fabric(mode);
    manual_seed(38);
    nn::Sequential net(nn::Linear(128, 64), nn::ReLU(), nn::Linear(64, 10));
    fabric::FabricModule model = f.setup_module(net);
    CHECK(is_quantized(mode, (*net)[0]));
    const Tensor y = model(randn({4, 128}));
    CHECK(y.shape() == Shape{4, 10});
    CHECK(y.dtype() == kFloat32);
    CHECK(isfinite(y).to(kInt64).sum().item<int64_t>() == 40);
    // Gradients reach the trainable parts: biases, and the float weights in int8-training.
    f.backward(sum(y));
    auto first = std::dynamic_pointer_cast<nn::LinearImpl>((*net)[0]);
    CHECK(first->bias.grad().defined());
    CHECK(first->weight.grad().defined() == (std::string(mode) == "int8-training"));
  }
}

TEST_CASE("T39 fabric.init_tensor() builds plain Linear layers in the plugin's dtype; fabric.init_module() the quantized ones") {
  for (const char* mode : kModes) {
    CAPTURE(mode);
    fabric::Fabric f = make_fabric(mode);
    {
      precision::Context ctx = f.init_tensor();
      nn::Linear fc(64, 8);
      const nn::Module& built = *fc;  // typeid of a named reference (clang warns about typeid(*call))
      CHECK(typeid(built) == typeid(nn::LinearImpl));
      CHECK(fc->weight.dtype() == (std::string(mode).starts_with("int8") ? kFloat16 : kBFloat16));
    }
    {
      precision::Context ctx = f.init_module();
      nn::Linear fc(64, 8);
      CHECK(is_quantized(mode, fc.ptr()));
    }
    CHECK(default_dtype() == kFloat32);
  }
}
