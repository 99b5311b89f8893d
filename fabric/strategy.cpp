// The strategies' shared behaviour, single_device and ddp (fsdp is in fsdp_strategy.cpp).
#include "fabric/strategy.h"

#include <cstdlib>

#include "optim/clip_grad.h"
#include "tensor/error.h"

namespace weft::fabric {

std::unique_ptr<Strategy> make_fsdp_strategy(StrategyOptions options, const std::string& precision);

namespace {

class SingleDeviceStrategy final : public Strategy {
 public:
  explicit SingleDeviceStrategy(StrategyOptions options) : Strategy(std::move(options)) {}
};

class DDPStrategy final : public Strategy {
 public:
  explicit DDPStrategy(StrategyOptions options) : Strategy(std::move(options)) {}

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

void Strategy::connect() {
  distributed::InitOptions init;
  init.timeout = options_.timeout;
  if (distributed::launched_by_launcher()) {
    env_ = distributed::read_dist_env(true);
    pg_ = distributed::init_process_group(init);
  } else {  // one process on its own: a group of one, whose store is never read again
    char folder[] = "/tmp/weft-solo-XXXXXX";
    WEFT_CHECK(::mkdtemp(folder) != nullptr, "[Fabric.launch] cannot create a temporary folder");
    init.init_method = std::string("file://") + folder;
    init.rank = 0;
    init.world_size = 1;
    pg_ = distributed::init_process_group(init);
    std::filesystem::remove_all(folder);
  }
  // Precision code that must agree across ranks (FP8 amax) reduces through this group.
  std::weak_ptr<distributed::ProcessGroup> weak = pg_;
  cross_rank_ = std::make_unique<precision::CrossRankReductionGuard>([weak](const Tensor& values) {
    if (auto pg = weak.lock()) pg->all_reduce(values, distributed::ReduceOp::Max)->wait();
  });
}

double Strategy::clip_grad_norm(nn::Module&, const std::vector<Tensor>& params, double max_norm, double norm_type,
                                bool error_if_nonfinite) {
  return optim::clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite);
}

void Strategy::clip_grad_value(nn::Module&, const std::vector<Tensor>& params, double clip_value) {
  optim::clip_grad_value_(params, clip_value);
}

std::shared_ptr<void> Strategy::no_backward_sync(nn::Module&) { return nullptr; }

void Strategy::save(const std::filesystem::path& path, const nn::Module& module, nn::Module&,
                    const optim::Optimizer* optimizer, const io::SafetensorsMetadata& metadata) {
  if (global_rank() == 0) io::save_checkpoint(path, module, optimizer, metadata);
  if (pg_) pg_->barrier()->wait();  // nobody reads the file before it is complete
}

namespace {

// A folder is never a checkpoint file; a sharded one is named as such, with the ways to load it.
void check_not_sharded(const std::filesystem::path& path, const std::string& strategy) {
  if (!distributed::is_sharded_checkpoint(path)) return;
  WEFT_FAIL("[Fabric.load] '", path.string(), "' is a sharded checkpoint (a folder of per-rank shards, as "
            "Fabric({.strategy = \"fsdp\", .state_dict_type = \"sharded\"}) saves it), and the ", strategy,
            " strategy loads single-file checkpoints only: load it with strategy \"fsdp\" (at any number of ranks, "
            "one included), or convert it to one file by loading it there and saving with state_dict_type \"full\"");
}

}  // namespace

io::SafetensorsMetadata Strategy::read_metadata(const std::filesystem::path& path) {
  check_not_sharded(path, options_.name);
  return io::read_checkpoint(path).metadata;
}

void Strategy::load(const std::filesystem::path& path, nn::Module& module, nn::Module&, optim::Optimizer* optimizer) {
  check_not_sharded(path, options_.name);
  io::apply_checkpoint(io::read_checkpoint(path), module, optimizer);
}

std::unique_ptr<Strategy> make_strategy(StrategyOptions options, const std::string& precision) {
  if (options.name == "single_device") return std::make_unique<SingleDeviceStrategy>(std::move(options));
  if (options.name == "ddp") return std::make_unique<DDPStrategy>(std::move(options));
  if (options.name == "fsdp") return make_fsdp_strategy(std::move(options), precision);
  WEFT_FAIL("[Fabric] expected strategy 'auto', 'single_device', 'ddp' or 'fsdp', got '", options.name, "'");
}

}  // namespace weft::fabric
