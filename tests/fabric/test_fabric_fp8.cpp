// FP8 training through the Fabric facade with precision "transformer-engine": setup converts the
// layers, the forward runs in FP8, the scales move, the parameters stay bfloat16 (reference §3.9).
#include <doctest/doctest.h>

#include <memory>
#include <typeinfo>

#include "fabric/all.h"

using namespace weft;
using namespace weft::precision;

TEST_CASE("an FP8 training step through Fabric: layers converted, FP8 forward, scales move, parameters stay bfloat16") {
  manual_seed(1);
  fabric::FabricOptions options;
  options.precision = "transformer-engine";
  fabric::Fabric fabric(options);
  CHECK(fabric.precision().precision() == "transformer-engine");
  nn::Sequential net(nn::Linear(32, 64), nn::ReLU(), nn::Linear(64, 10));
  CaptureWarnings warnings;
  const fabric::FabricModule model = fabric.setup_module(net);
  CHECK(warnings.messages().size() == 1);  // the 64 -> 10 layer
  const nn::Module& first = *(*net)[0];  // typeid of a named reference (clang warns about typeid(*call))
  const nn::Module& last = *(*net)[2];
  CHECK(typeid(first) == typeid(Fp8LinearImpl));
  CHECK(typeid(last) == typeid(nn::LinearImpl));  // 10 outputs: kept
  const fabric::FabricOptimizer optimizer = fabric.setup_optimizer(optim::AdamW(net->parameters(), {.lr = 1e-2}));
  auto fc = std::dynamic_pointer_cast<Fp8LinearImpl>((*net)[0]);
  const Tensor x = randn({16, 32});
  const Tensor labels = randint(0, 10, {16});
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 20; ++step) {
    const Tensor out = model(x);
    CHECK(out.dtype() == kFloat32);  // convert_output
    const Tensor loss = cross_entropy(out, labels);
    optimizer.zero_grad();
    fabric.backward(loss, &model);
    optimizer.step();
    (step == 0 ? first_loss : last_loss) = loss.item();
  }
  CHECK(last_loss < first_loss);
  CHECK(fc->weight.dtype() == kBFloat16);
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == doctest::Approx(448.0 / amax(abs(x)).item<double>()).epsilon(1e-2));
  CHECK(fc->fp8_meta().scale_of(Fp8Role::GradOutput) > 57344.0f);  // E5M2, gradients well below 1
}
