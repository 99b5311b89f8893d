// The fsdp strategy: FullyShardedDataParallel under Fabric (see fabric/strategy.h).
//
// The precision's FSDP table gives the param / reduce / buffer dtypes (64-true is refused there,
// as in Lightning). The optimizer must train the shards, so it is built after setup_module from
// the wrapped module's parameters. Full checkpoints are gathered on every rank and written by rank
// 0 in the layout of io/checkpoint.h, with the optimizer's state keyed by the original parameters'
// names ("__optimizer__.state.<name>.<buffer>"), so they load at any world size; sharded ones are
// a folder (Note [Sharded checkpoint layout] in distributed/fsdp_sharded_checkpoint.cpp).
#include <unordered_set>

#include "fabric/multiprocess/process_group_strategy.h"
#include "precision/fsdp_precision.h"
#include "tensor/error.h"

namespace weft::fabric {
namespace {

class FSDPStrategy final : public ProcessGroupStrategy {
 public:
  FSDPStrategy(StrategyOptions options, const std::string& precision) : ProcessGroupStrategy(std::move(options)) {
    options_.fsdp.sharding_strategy = distributed::parse_sharding_strategy(options_.sharding_strategy);
    WEFT_CHECK(options_.state_dict_type == "full" || options_.state_dict_type == "sharded",
               "[Fabric] expected state_dict_type 'full' or 'sharded', got '", options_.state_dict_type, "'");
    options_.fsdp.mixed_precision = precision::FSDPPrecision(precision).mixed_precision_config();
    options_.fsdp.mixed_precision->keep_low_precision_grads = options_.keep_low_precision_grads;
  }

  std::shared_ptr<nn::Module> wrap(const std::shared_ptr<nn::Module>& module) override {
    return distributed::FullyShardedDataParallel(module, pg_, options_.fsdp).ptr();
  }

  void check_optimizer(const optim::Optimizer& optimizer, const nn::Module& wrapped) const override {
    std::unordered_set<const weft::detail::TensorImpl*> shards;
    for (const auto& p : wrapped.parameters()) shards.insert(p.impl());
    for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
      for (const auto& p : optimizer.params(g))
        WEFT_CHECK(shards.count(p.impl()), "[Fabric.setup_optimizer] under the fsdp strategy the optimizer trains "
                   "the flat shards: call fabric.setup_module(model) first, then build the optimizer from the "
                   "parameters of the module it returns");
  }

  double clip_grad_norm(nn::Module& wrapped, const std::vector<Tensor>&, double max_norm, double norm_type,
                        bool error_if_nonfinite) override {
    return fsdp(wrapped).clip_grad_norm_(max_norm, norm_type, error_if_nonfinite);
  }

  void clip_grad_value(nn::Module& wrapped, const std::vector<Tensor>&, double clip_value) override {
    fsdp(wrapped).clip_grad_value_(clip_value);
  }

  std::shared_ptr<void> no_backward_sync(nn::Module& wrapped) override {
    auto& f = fsdp(wrapped);
    f.set_requires_gradient_sync(false);
    return std::shared_ptr<void>(nullptr, [&f](void*) { f.set_requires_gradient_sync(true); });
  }

  void save(const std::filesystem::path& path, const nn::Module&, nn::Module& wrapped, const optim::Optimizer* optimizer,
            const io::SafetensorsMetadata& metadata) override {
    auto& f = fsdp(wrapped);
    if (options_.state_dict_type == "sharded") {
      f.save_sharded(path, optimizer, metadata);
      return;
    }
    io::SafetensorsMetadata meta;
    nn::TensorDict tensors = io::drop_tied_names(f.full_state_dict(), meta);  // as io::save_checkpoint
    for (const auto& [key, value] : metadata) meta[key] = value;
    if (optimizer != nullptr) {
      const optim::OptimizerState state = f.full_optim_state_dict(*optimizer);
      for (const auto& [name, t] : state.tensors) tensors.insert(io::kOptimizerPrefix + name, t);
      for (const auto& [key, value] : state.scalars) meta[io::kOptimizerPrefix + key] = value;
    }
    if (global_rank() == 0) io::save_safetensors(path, tensors, meta, io::Checksum::Crc32);
    pg_->barrier()->wait();
  }

  io::SafetensorsMetadata read_metadata(const std::filesystem::path& path) override {
    if (std::filesystem::is_directory(path)) return distributed::read_sharded_metadata(path);
    return Strategy::read_metadata(path);
  }

  void load(const std::filesystem::path& path, nn::Module&, nn::Module& wrapped, optim::Optimizer* optimizer) override {
    auto& f = fsdp(wrapped);
    if (std::filesystem::is_directory(path)) {
      f.load_sharded(path, optimizer);
      return;
    }
    const io::Checkpoint checkpoint = io::read_checkpoint(path);
    if (optimizer == nullptr) {
      f.load_full_state_dict(checkpoint.model);
      return;
    }
    // The model's part first (Note in io/checkpoint.h): a file of another model is reported as such.
    try {
      f.check_full_state_dict(checkpoint.model);
    } catch (const Error& e) {
      WEFT_FAIL("[Fabric.load] '", path.string(), "' does not fit the model: ", e.what());
    }
    WEFT_CHECK(!checkpoint.optimizer.scalars.empty(), "[Fabric.load] ", path.string(), " holds no optimizer state; "
               "it was saved without an optimizer");
    const optim::OptimizerState previous = optimizer->state_dict();
    f.load_full_optim_state_dict(*optimizer, checkpoint.optimizer);
    try {
      f.load_full_state_dict(checkpoint.model);
    } catch (...) {
      optimizer->load_state_dict(previous);
      throw;
    }
  }

 private:
  static distributed::FullyShardedDataParallelImpl& fsdp(nn::Module& wrapped) {
    auto* f = dynamic_cast<distributed::FullyShardedDataParallelImpl*>(&wrapped);
    WEFT_CHECK(f != nullptr, "[Fabric] under the fsdp strategy the module must be wrapped: call fabric.launch() "
               "before fabric.setup_module(model) (with one device it makes a group of one in this process)");
    return *f;
  }
};

}  // namespace

std::unique_ptr<Strategy> make_fsdp_strategy(StrategyOptions options, const std::string& precision) {
  return std::make_unique<FSDPStrategy>(std::move(options), precision);
}

}  // namespace weft::fabric
