// Strategy: how Fabric spreads training over devices, after Lightning's strategies.
//
//   single_device   one process; the module as it is
//   ddp             one process per device (weft-run, torchrun or Fabric::launch starts them);
//                   distributed::DistributedDataParallel averages the gradients
//   fsdp            likewise, with distributed::FullyShardedDataParallel: parameters, gradients
//                   and optimizer state sharded; the precision's FSDP dtype table
//                   (precision::FSDPPrecision) sets param / reduce / buffer dtypes
//
// A strategy answers what differs per strategy: the ranks and the collectives between them,
// wrapping the module, which optimizers fit, clipping, checkpoints (rank 0 writes full
// checkpoints; FSDP can also write sharded ones) and gradient accumulation without
// synchronisation. This base is single_device's behaviour: one rank, and collectives with nothing
// to exchange.
//
// Note [Strategy table]: the core library `weft` holds Fabric and single_device; the multi-process
// strategies (fabric/multiprocess/) live in the `weft_distributed` library beside Gloo, and add
// themselves to this table from a registration object. That object is linked into every program
// that links weft::distributed, whose link interface names its anchor symbol
// (WEFT_DISTRIBUTED_STRATEGIES_ANCHOR) for the linker to pull it in. A program that asks for ddp or
// fsdp without linking it is told to link it, so a one-process program never carries Gloo.
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
#include "io/checkpoint.h"
#include "precision/precision.h"

namespace weft::fabric {

struct StrategyOptions {
  std::string name = "single_device";  // "single_device", "ddp" or "fsdp"
  std::chrono::milliseconds timeout{1'800'000};
  distributed::DDPOptions ddp;
  distributed::FSDPOptions fsdp;                 // mixed_precision is filled in from the precision plugin
  std::string sharding_strategy = "FULL_SHARD";  // fsdp: parsed into fsdp.sharding_strategy
  bool keep_low_precision_grads = false;         // fsdp: copied into that mixed_precision
  std::string state_dict_type = "full";          // fsdp: "full" (one file, rank 0) or "sharded" (a folder)
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  const std::string& name() const { return options_.name; }

  // ---- the ranks (0 of 1 before connect()) ----
  // Joins the other ranks (from their launcher's environment, or as a group of one);
  // single_device has nobody to join.
  virtual void connect() {}
  virtual bool connected() const { return false; }
  virtual int global_rank() const { return 0; }
  virtual int world_size() const { return 1; }
  virtual int local_rank() const { return 0; }
  virtual int node_rank() const { return 0; }
  // Starts `nproc_per_node` copies of this program as this node's ranks, waits for them and exits
  // with their status (Fabric::launch without a launcher); single_device refuses.
  [[noreturn]] virtual void run_ranks(int nproc_per_node);

  // ---- collectives over the ranks, in place (one rank: nothing to exchange) ----
  virtual void all_reduce(const Tensor& /*tensor*/, distributed::ReduceOp /*op*/) {}
  // out: world_size() · input.numel() elements, every rank's input in rank order.
  virtual void all_gather(const Tensor& out, const Tensor& input);
  virtual void broadcast(const Tensor& /*tensor*/, int /*src*/) {}
  virtual void barrier() {}

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
};

// Makes a strategy from its options, for a plugin of `precision` (fsdp needs its dtype table).
using StrategyFactory = std::function<std::unique_ptr<Strategy>(StrategyOptions options, const std::string& precision)>;

// Adds `name` to the table (Note [Strategy table]); registering a name twice fails.
void register_strategy(const std::string& name, StrategyFactory factory);

// Whether make_strategy knows `name` in this program ("ddp" and "fsdp" only when it links
// weft_distributed).
bool strategy_available(const std::string& name);

// The strategy `options.name` names, for a plugin of `precision`.
std::unique_ptr<Strategy> make_strategy(StrategyOptions options, const std::string& precision);

}  // namespace weft::fabric

// Defined beside the registration of ddp and fsdp (Note [Strategy table]).
#define WEFT_DISTRIBUTED_STRATEGIES_ANCHOR weft_distributed_strategies_anchor
