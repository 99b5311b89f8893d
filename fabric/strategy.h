// Strategy: how Fabric spreads training over devices, after Lightning's strategies.
//
//   single_device   one process; the module as it is
//   ddp             one process per device (weft-run, torchrun or Fabric::launch starts them);
//                   distributed::DistributedDataParallel averages the gradients
//   fsdp            likewise, with distributed::FullyShardedDataParallel: parameters, gradients
//                   and optimizer state sharded; the precision's FSDP dtype table
//                   (precision::FSDPPrecision) sets param / reduce / buffer dtypes
//
// A strategy holds the process group once connect() ran (after the launch) and answers what
// differs per strategy: wrapping the module, which optimizers fit, clipping, checkpoints (rank 0
// writes full checkpoints; FSDP can also write sharded ones) and gradient accumulation without
// synchronisation.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "distributed/ddp.h"
#include "distributed/fsdp.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "io/checkpoint.h"
#include "precision/cross_rank.h"
#include "precision/precision.h"

namespace weft::fabric {

struct StrategyOptions {
  std::string name = "single_device";  // "single_device", "ddp" or "fsdp"
  std::chrono::milliseconds timeout{1'800'000};
  distributed::DDPOptions ddp;
  distributed::FSDPOptions fsdp;        // mixed_precision is filled in from the precision plugin
  bool keep_low_precision_grads = false;  // fsdp: copied into that mixed_precision
  std::string state_dict_type = "full";  // fsdp: "full" (one file, rank 0) or "sharded" (a folder)
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  const std::string& name() const { return options_.name; }

  // ---- the ranks (0 of 1 before connect()) ----
  void connect();
  bool connected() const { return pg_ != nullptr; }
  int global_rank() const { return pg_ ? pg_->rank() : 0; }
  int world_size() const { return pg_ ? pg_->size() : 1; }
  int local_rank() const { return env_.local_rank; }
  int node_rank() const { return env_.local_world_size > 0 ? global_rank() / env_.local_world_size : 0; }
  const std::shared_ptr<distributed::ProcessGroup>& process_group() const { return pg_; }

  // The module training runs through (DDP / FSDP around `module`, or `module` itself).
  virtual std::shared_ptr<nn::Module> wrap(const std::shared_ptr<nn::Module>& module) { return module; }
  // Fails when `optimizer` cannot train `wrapped` under this strategy.
  virtual void check_optimizer(const optim::Optimizer& /*optimizer*/, const nn::Module& /*wrapped*/) const {}
  // Clips by total norm over what this rank holds and returns the norm (the gradients are unscaled).
  virtual double clip_grad_norm(nn::Module& wrapped, const std::vector<Tensor>& params, double max_norm,
                                double norm_type, bool error_if_nonfinite);
  virtual void clip_grad_value(nn::Module& wrapped, const std::vector<Tensor>& params, double clip_value);
  // While the returned guard lives, backward passes do not synchronise gradients.
  virtual std::shared_ptr<void> no_backward_sync(nn::Module& wrapped);

  // Checkpoints. `module` is the unwrapped model. save: rank 0 writes (all ranks must call it).
  virtual void save(const std::filesystem::path& path, const nn::Module& module, nn::Module& wrapped,
                    const optim::Optimizer* optimizer, const io::SafetensorsMetadata& metadata);
  // The metadata of a checkpoint (without loading it), then the loading itself, all or nothing.
  virtual io::SafetensorsMetadata read_metadata(const std::filesystem::path& path);
  virtual void load(const std::filesystem::path& path, nn::Module& module, nn::Module& wrapped,
                    optim::Optimizer* optimizer);

 protected:
  explicit Strategy(StrategyOptions options) : options_(std::move(options)) {}

  StrategyOptions options_;
  distributed::DistEnv env_;
  std::shared_ptr<distributed::ProcessGroup> pg_;
  std::unique_ptr<precision::CrossRankReductionGuard> cross_rank_;
};

// The strategy `options.name` names, for a plugin of `precision` (fsdp needs its dtype table).
std::unique_ptr<Strategy> make_strategy(StrategyOptions options, const std::string& precision);

}  // namespace weft::fabric
