// Fabric: the facade a training loop talks to, after Lightning Fabric (reference §5). It owns the
// precision plugin and routes every precision-relevant step through it:
//
//   fabric::Fabric fabric({.precision = "bf16-mixed"});
//   auto [model, optimizer] = fabric.setup(net, std::move(adamw));  // convert_module, then wrap
//   Tensor loss = cross_entropy(model(x), y);               // convert_input → autocast → convert_output
//   fabric.backward(loss);                                  // loss scaling under 16-mixed
//   fabric.clip_gradients(model, optimizer, std::nullopt, 1.0);  // by norm; unscales first
//   optimizer.step();                                       // the plugin's step (skips on inf)
//
// Several processes (fabric/strategy.h): `Fabric({.devices = 2, .strategy = "fsdp"}).launch()`
// starts the ranks (or, under weft-run or torchrun, joins the ones the launcher started); then
// setup_module wraps the model in DDP or FSDP, the collectives (all_reduce, all_gather, broadcast,
// barrier) work across ranks, print() speaks on rank 0 only, save() has rank 0 write a full
// checkpoint (or, under fsdp with state_dict_type "sharded", every rank its shard), and
// distributed_sampler() hands each rank its share of a dataset. "cuda" fails: the build has no
// CUDA backend. The ddp and fsdp strategies live in the weft_distributed library: a program that
// uses them links weft::distributed, and one that does not is told so (Note [Strategy table] in
// fabric/strategy.h); single-process training needs only the core library.
//
// Note [Backward guard]: when the plugin owns backward (requires_plugin_backward), every output
// of a FabricModule that requires grad passes through an identity autograd node whose backward
// fails unless Fabric::backward is running on this thread. So `loss.backward()` under 16-mixed or
// bf16-mixed is the reference's error at the first backward, instead of an unscaled loss that
// surfaces as a GradScaler assertion at step time (Lightning issue #18510).
//
// Checkpoints (save/load) hold the model, the optimizer and the plugin's state in one safetensors
// file (io/checkpoint.h). The plugin's state goes into the metadata as "__precision__.<key>"
// numbers, with "__precision__" naming the plugin's precision; loading always restores it, so a
// 16-mixed run resumes with its loss scale, and loading a file saved without scaler state into a
// 16-mixed plugin fails as GradScaler::load_state_dict does. Loading is all or nothing: a load
// that fails leaves the model, the optimizer and the plugin as they were.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/sampler.h"
#include "fabric/strategy.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "optim/optimizer.h"
#include "precision/context.h"
#include "precision/precision.h"
#include "precision/precision_input.h"

namespace weft::fabric {

struct FabricOptions {
  // "cpu", "cuda" (or "gpu"), or "auto": cuda when a GPU is available, else cpu (fabric/accelerator.h).
  // cuda trains in one process, on the current CUDA device.
  std::string accelerator = "cpu";
  int64_t devices = 1;              // processes per node
  int64_t num_nodes = 1;
  // "auto" (ddp for several processes, else single_device), "single_device", "ddp" or "fsdp"
  std::string strategy = "auto";
  // At most one of these; neither means "32-true".
  std::optional<precision::PrecisionInput> precision{};  // {}: designated initializers may leave it out
  std::shared_ptr<precision::Precision> plugin{};  // {}: designated initializers may leave it out
  // Strategy settings: ddp's buckets; fsdp's sharding, wrapping and checkpoint kind ("full": one
  // file written by rank 0, "sharded": a folder of per-rank files); every collective's timeout.
  distributed::DDPOptions ddp{};
  std::string sharding_strategy = "FULL_SHARD";
  distributed::AutoWrapPolicy auto_wrap_policy{};
  std::string state_dict_type = "full";
  // fsdp: the optimizer gets gradient shards in the precision's reduce dtype (16-bit under the
  // mixed and half modes) instead of float32 (FSDPMixedPrecision::keep_low_precision_grads).
  bool keep_low_precision_grads = false;
  std::chrono::milliseconds timeout{1'800'000};
};

class Fabric;

// A model set up by Fabric: calling it runs convert_input → forward_context → the strategy's
// wrapped module (DDP, FSDP, or the module itself) → convert_output. module() is the model as the
// user built it (its state_dict has the original names); wrapped() is what training runs through
// (under fsdp, its parameters() are the shards an optimizer must train).
class FabricModule {
 public:
  Tensor operator()(const Tensor& input) const;
  Tensor forward(const Tensor& input) const { return (*this)(input); }
  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::shared_ptr<nn::Module>& wrapped() const { return wrapped_; }
  nn::Module* operator->() const { return module_.get(); }

 private:
  friend class Fabric;
  FabricModule(std::shared_ptr<nn::Module> module, std::shared_ptr<nn::Module> wrapped,
               std::shared_ptr<precision::Precision> plugin)
      : module_(std::move(module)), wrapped_(std::move(wrapped)), plugin_(std::move(plugin)) {}
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<nn::Module> wrapped_;
  std::shared_ptr<precision::Precision> plugin_;
};

// An optimizer set up by Fabric: step() is the plugin's optimizer_step (which may skip). It shares
// ownership of the optimizer, as FabricModule does of the module, so it can never outlive it.
class FabricOptimizer {
 public:
  // Returns whether the optimizer stepped.
  bool step() const { return plugin_->optimizer_step(*optimizer_); }
  void zero_grad(bool set_to_none = true) const { optimizer_->zero_grad(set_to_none); }
  optim::Optimizer& optimizer() const { return *optimizer_; }
  optim::Optimizer* operator->() const { return optimizer_.get(); }

 private:
  friend class Fabric;
  FabricOptimizer(std::shared_ptr<optim::Optimizer> optimizer, std::shared_ptr<precision::Precision> plugin)
      : optimizer_(std::move(optimizer)), plugin_(std::move(plugin)) {}
  std::shared_ptr<optim::Optimizer> optimizer_;
  std::shared_ptr<precision::Precision> plugin_;
};

// What Fabric::setup_optimizer takes: an optimizer moved in (`std::move(adamw)`, or a temporary)
// or a std::shared_ptr to one. A plain reference is refused at compile time: the wrapper would
// hold a pointer that dangles once that optimizer goes out of scope.
template <class T>
concept OptimizerHandover =
    std::derived_from<T, optim::Optimizer> || std::convertible_to<T, std::shared_ptr<optim::Optimizer>>;

class Fabric {
 public:
  explicit Fabric(FabricOptions options = {});

  precision::Precision& precision() const { return *plugin_; }
  const std::string& accelerator() const { return accelerator_; }  // "cpu" or "cuda"
  // Where setup_module puts the model, init_module and init_tensor create tensors, and to_device
  // moves a batch.
  Device device() const { return device_; }
  Tensor to_device(const Tensor& tensor) const;
  const Strategy& strategy() const { return *strategy_; }

  // ---- processes ----
  // Starts the ranks: under weft-run or torchrun (RANK and WORLD_SIZE set), joins them; with one
  // process in all, does nothing more; otherwise this process becomes the launcher of `devices`
  // copies of itself (same arguments) and exits with their exit code (several nodes need weft-run
  // or torchrun on each). Must come before init_module and setup when there are several ranks.
  void launch();
  int global_rank() const { return strategy_->global_rank(); }
  int world_size() const { return strategy_->world_size(); }
  int local_rank() const { return strategy_->local_rank(); }
  int node_rank() const { return strategy_->node_rank(); }
  bool is_global_zero() const { return global_rank() == 0; }

  // ---- collectives (each returns a new tensor; all ranks must call them) ----
  Tensor all_reduce(const Tensor& tensor, distributed::ReduceOp op = distributed::ReduceOp::Avg) const;
  Tensor all_gather(const Tensor& tensor) const;  // (world_size, *tensor.shape())
  Tensor broadcast(const Tensor& tensor, int src = 0) const;
  void barrier() const;
  // Prints on rank 0 only (rank-aware logging).
  void print(const std::string& message) const;
  // This rank's share of a dataset of `size` samples (distributed/sampler.h).
  distributed::DistributedSampler distributed_sampler(int64_t size, distributed::SamplerOptions options = {}) const;
  // While the returned guard lives, backward passes through `model` accumulate gradients locally
  // (gradient accumulation); the first backward after it synchronises.
  std::shared_ptr<void> no_backward_sync(const FabricModule& model, bool enabled = true) const;

  // Applies the plugin's convert_module, then wraps. Set a model up once: a layer-replacing plugin
  // swaps layers, so build the optimizer from the converted model (setup_module first) when it does.
  FabricModule setup_module(std::shared_ptr<nn::Module> module);
  template <class Impl>
  FabricModule setup_module(const nn::ModuleHolder<Impl>& holder) {
    return setup_module(std::static_pointer_cast<nn::Module>(holder.ptr()));
  }
  // Under fsdp the optimizer must train the shards: build it from setup_module(model).wrapped().
  // `Opt&&` binds an lvalue as Opt = T&, which OptimizerHandover refuses (see above).
  template <class Opt>
    requires OptimizerHandover<Opt>
  FabricOptimizer setup_optimizer(Opt&& optimizer) {
    if constexpr (std::derived_from<Opt, optim::Optimizer>)
      return wrap_optimizer(std::make_shared<Opt>(std::move(optimizer)));
    else
      return wrap_optimizer(std::shared_ptr<optim::Optimizer>(std::forward<Opt>(optimizer)));
  }
  template <class Model, class Opt>
    requires OptimizerHandover<Opt>
  std::pair<FabricModule, FabricOptimizer> setup(const Model& model, Opt&& optimizer) {
    FabricModule wrapped = setup_module(model);
    return {std::move(wrapped), setup_optimizer(std::forward<Opt>(optimizer))};
  }

  // pre_backward → the plugin's backward (loss scaling) → post_backward.
  void backward(const Tensor& loss, const FabricModule* model = nullptr);
  // Unscales the gradients, then clips them by value (returns nullopt) or by total norm (returns
  // the norm before clipping).
  // Exactly one of clip_val / max_norm. error_if_nonfinite defaults to true, as Fabric's (torch's is
  // false): a non-finite total norm throws instead of scaling the gradients by it.
  std::optional<double> clip_gradients(const FabricModule& model, const FabricOptimizer& optimizer,
                                       std::optional<double> clip_val = std::nullopt,
                                       std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                                       bool error_if_nonfinite = true);

  precision::Context autocast() { return plugin_->forward_context(); }
  precision::Context init_tensor();
  // empty_init: parameters are allocated but not initialised (nn::init skips them).
  precision::Context init_module(std::optional<bool> empty_init = std::nullopt);

  void save(const std::filesystem::path& path, const FabricModule& model, const FabricOptimizer* optimizer,
            const io::SafetensorsMetadata& metadata = {}) const;
  // Restores model, optimizer and plugin state, all or nothing; returns the caller's metadata.
  io::SafetensorsMetadata load(const std::filesystem::path& path, const FabricModule& model,
                               const FabricOptimizer* optimizer) const;

  static void seed_everything(uint64_t seed);

 private:
  FabricOptimizer wrap_optimizer(std::shared_ptr<optim::Optimizer> optimizer);
  // Fails unless launch() ran when there are several ranks (`what` names the caller).
  void require_launched(const char* what) const;

  std::string accelerator_;
  Device device_;
  int64_t processes_ = 1;  // devices × num_nodes
  int64_t devices_ = 1;
  bool launched_ = false;
  std::shared_ptr<precision::Precision> plugin_;
  std::unique_ptr<Strategy> strategy_;
  std::vector<std::shared_ptr<nn::Module>> wrapped_;  // what setup_module returned, for setup_optimizer
};

namespace detail {
// True while Fabric::backward runs on this thread (Note [Backward guard]).
bool in_fabric_backward();
}  // namespace detail

}  // namespace weft::fabric
