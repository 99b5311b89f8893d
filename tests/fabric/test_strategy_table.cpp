// Fabric's strategy table (Note [Strategy table] in fabric/strategy.h): in a program that links
// weft_distributed, as this one does, its registration object has added ddp and fsdp; a strategy
// a program registers itself is made by Fabric like the built-in ones; a name cannot be
// registered twice; and an unknown name is refused listing the known ones. (The refusal of ddp
// in a program without weft_distributed is checked by the package consumer, tests/package_consumer,
// and by mlp_train's option test.)
#include <doctest/doctest.h>

#include "error_message.h"
#include "fabric/all.h"

using namespace weft;

namespace {

// single_device's behaviour under another name, counting how often it was made.
class CountingStrategy final : public fabric::Strategy {
 public:
  explicit CountingStrategy(fabric::StrategyOptions options) : Strategy(std::move(options)) { ++made; }
  static inline int made = 0;
};

}  // namespace

TEST_CASE("the strategy table: ddp and fsdp registered by weft_distributed, single_device always there") {
  CHECK(fabric::strategy_available("single_device"));
  CHECK(fabric::strategy_available("ddp"));
  CHECK(fabric::strategy_available("fsdp"));
  CHECK_FALSE(fabric::strategy_available("zero3"));
  CHECK(fabric::Fabric({.devices = 2, .strategy = "fsdp"}).strategy().name() == "fsdp");
}

TEST_CASE("the strategy table: a registered strategy is made by Fabric, and a name registers once") {
  fabric::register_strategy("counting", [](fabric::StrategyOptions options, const std::string&) {
    return std::make_unique<CountingStrategy>(std::move(options));
  });
  CHECK(fabric::strategy_available("counting"));
  fabric::Fabric f({.strategy = "counting"});
  f.launch();
  CHECK(CountingStrategy::made == 1);
  CHECK(f.strategy().name() == "counting");
  CHECK(f.world_size() == 1);
  CHECK(f.all_reduce(tensor({2.5})).item() == 2.5);  // one rank: nothing to exchange
  for (const char* name : {"counting", "ddp", "single_device"})
    CHECK(error_of([&] { fabric::register_strategy(name, nullptr); }) ==
          std::string("[register_strategy] strategy '") + name + "' is already registered");
  CHECK(error_of([] { fabric::Fabric({.strategy = "zero3"}); }) ==
        "[Fabric] expected strategy 'auto', 'single_device', 'ddp' or 'fsdp', got 'zero3'");
}
