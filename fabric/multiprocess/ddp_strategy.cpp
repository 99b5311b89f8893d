// The ddp strategy: DistributedDataParallel under Fabric (see fabric/strategy.h).
#include "fabric/multiprocess/process_group_strategy.h"

namespace weft::fabric {
namespace {

class DDPStrategy final : public ProcessGroupStrategy {
 public:
  explicit DDPStrategy(StrategyOptions options) : ProcessGroupStrategy(std::move(options)) {}

  std::shared_ptr<nn::Module> wrap(const std::shared_ptr<nn::Module>& module) override {
    return distributed::DistributedDataParallel(module, pg_, options_.ddp).ptr();
  }

  std::shared_ptr<void> no_backward_sync(nn::Module& wrapped) override {
    auto& ddp = dynamic_cast<distributed::DistributedDataParallelImpl&>(wrapped);
    ddp.set_requires_gradient_sync(false);
    return std::shared_ptr<void>(nullptr, [&ddp](void*) { ddp.set_requires_gradient_sync(true); });
  }
};

}  // namespace

std::unique_ptr<Strategy> make_ddp_strategy(StrategyOptions options, const std::string&) {
  return std::make_unique<DDPStrategy>(std::move(options));
}

}  // namespace weft::fabric
