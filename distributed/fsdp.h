// FullyShardedDataParallel: sharded data parallelism (ZeRO), after PyTorch's FSDP1 FlatParameter
// design (../shared/reference/distributed.md §3.1, §3.5).
//
//   distributed::FullyShardedDataParallel fsdp(model, pg, {
//       .auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear"}),
//       .mixed_precision = precision::FSDPPrecision("bf16-mixed").mixed_precision_config()});
//   optim::AdamW opt(fsdp->parameters(), {.lr = 1e-3});   // the local shards
//   Tensor loss = cross_entropy(fsdp(x_local), y_local);
//   loss.backward();                                      // gradient shards, reduce-scattered
//   opt.step();                                           // on this rank's shards only
//
// Units. The auto-wrap policy picks submodules that become their own unit; the root is a unit
// too and owns every parameter no other unit took. A unit's parameters are flattened into one
// FlatParam (flat_param.h) per dtype and requires_grad (so a LoRA layer's frozen base and its
// trained adapters are two), right-padded to a multiple of the world size; rank r keeps slice r,
// the shard, as a parameter of this module in the parameters' own dtype: that is what the
// optimizer updates (fp32 master shards under mixed precision; build it from the shards that
// require grad). Outside forward and backward a unit's original parameters are empty tensors.
//
// QLoRA-FSDP. The Linear4bit layers (precision/quant/linear_4bit.h) a unit owns add one more
// FlatParam: their packed uint8 codes and block statistics as frozen raw bytes (Note [Frozen byte
// storage] in flat_param.h), sharded and gathered with the unit, never cast, reduced or given
// gradients or optimizer state, as PyTorch's FSDP shards bitsandbytes' weights stored as uint8.
// Each rank holds 1/W of the base's bytes at rest and in forward (each unit freed after its
// forward); in backward a frozen FlatParam (bytes or frozen floats) stays gathered from its unit's
// pre-backward to the end of backward, since no gradient of its own says when its backward is done
// (PyTorch hooks the unit's inputs for that; weft's module hooks do not see them).
// full_state_dict() returns the layers' keys in bitsandbytes' layout and load_full_state_dict()
// takes them back (the code tables and format must be the model's own: the bytes are laid out for
// them); sharded checkpoints cut them by bytes and load at any world size. Other non-floating parameters (Linear8bitLt's int8 weights) are refused.
//
// Tied parameters (one tensor registered by several modules, as a GPT's embedding and LM head)
// are kept once, in the innermost unit that holds every module using them (Note [Tied parameters
// in FSDP] in fsdp.cpp): wrapping the embedding in its own unit moves the tied weight to the
// common parent (the root), where PyTorch's FSDP1 breaks with a size mismatch and FSDP2 refuses.
// Both modules see the same unsharded tensor, its gradient is the sum of both uses, reduced once.
// The full state dict lists it under every name (one tensor), a file keeps it once
// (io/checkpoint.h); loading takes it under any of its names. The sharded checkpoint holds its
// pieces once, under the name parameters() gives it.
//
// Note [FSDP unit lifecycle]:
//   pre-forward    all-gather the unit (in param_dtype); prefetch the next unit's all-gather
//   post-forward   FULL_SHARD frees the unsharded storage (the root keeps it: backward needs it
//                  first); SHARD_GRAD_OP and NO_SHARD keep it
//   pre-backward   (an identity node on the unit's output) all-gather again if it was freed, and
//                  prefetch the unit whose backward comes next
//   post-backward  (when the last of the unit's parameters got its gradient) flatten the
//                  gradients in reduce_dtype, pad, reduce-scatter with Avg (all-reduce for
//                  NO_SHARD), free the unsharded storage and the gradients
//   end of backward (an autograd callback) wait for the reductions, cast them to the shard's
//                  dtype (kept in reduce_dtype under keep_low_precision_grads) and accumulate
//                  them into the shard's .grad
// Freed storage is resized to zero bytes in place, so the views autograd saved in forward keep
// their Storage object and see the parameters again when backward gathers them.
//
// Gradient accumulation: forward passes under no_sync() keep the unsharded gradients and reduce
// nothing; the first synchronised backward reduces the accumulated sums.
//
// Every managed module is annotated (is_fsdp_managed, as PyTorch's _is_fsdp_managed_module), and
// a module with uninitialised (lazy) parameters is refused: materialise it first.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "optim/optimizer.h"
#include "nn/tensor_dict.h"
#include "precision/fsdp_precision.h"
#include "precision/grad_scaler.h"

namespace weft::distributed {

enum class ShardingStrategy { FullShard, ShardGradOp, NoShard };
const char* sharding_strategy_name(ShardingStrategy strategy);
// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" (and lower case).
ShardingStrategy parse_sharding_strategy(const std::string& name);

// Decides whether `module` (at dotted `name`, never the root) becomes its own unit, given how
// many parameters its subtree holds that no unit below it took.
using AutoWrapPolicy = std::function<bool(const nn::Module& module, const std::string& name, int64_t unwrapped_params)>;
// Wraps every module whose type_name() is in `types` ("Linear", "Block").
AutoWrapPolicy module_type_auto_wrap_policy(std::set<std::string> types);
// Wraps a module once its not yet wrapped parameters reach `min_num_params` (PyTorch's default 1e8).
AutoWrapPolicy size_based_auto_wrap_policy(int64_t min_num_params);

struct FSDPOptions {
  ShardingStrategy sharding_strategy = ShardingStrategy::FullShard;
  AutoWrapPolicy auto_wrap_policy{};  // none: the root is the only unit
  // param / reduce / buffer dtypes; none: everything stays in the parameters' dtype
  std::optional<precision::FSDPMixedPrecision> mixed_precision{};
  bool forward_prefetch = true;   // all-gather the next unit while this one computes
  bool backward_prefetch = true;  // likewise in backward (BACKWARD_PRE)
};

class FullyShardedDataParallelImpl : public nn::Module {
 public:
  FullyShardedDataParallelImpl(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> pg,
                               FSDPOptions options = {});
  template <class Impl>
  FullyShardedDataParallelImpl(const nn::ModuleHolder<Impl>& module, std::shared_ptr<ProcessGroup> pg,
                               FSDPOptions options = {})
      : FullyShardedDataParallelImpl(std::static_pointer_cast<nn::Module>(module.ptr()), std::move(pg),
                                     std::move(options)) {}
  ~FullyShardedDataParallelImpl() override;

  // Casts a floating input to param_dtype under mixed precision, then runs the wrapped module.
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "FullyShardedDataParallel"; }

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  ProcessGroup& process_group() const { return *pg_; }
  ShardingStrategy sharding_strategy() const { return options_.sharding_strategy; }

  // ---- gradient accumulation ----
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(FullyShardedDataParallelImpl& fsdp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    FullyShardedDataParallelImpl& fsdp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  void set_requires_gradient_sync(bool sync);

  // ---- gradients over shards ----
  // torch.nn.utils.clip_grad_norm_ over the whole model: the norm of all shards' gradients
  // together (one all-reduce); returns the total norm before clipping.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0, bool error_if_nonfinite = false);
  void clip_grad_value_(double clip_value);
  // Makes `scaler` a sharded one: each rank sees only its gradient shards, so whether any
  // gradient was inf/NaN is all-reduced and every rank skips the same steps.
  void shard_grad_scaler(precision::GradScaler& scaler);

  // ---- state dicts (collective: every rank calls them) ----
  // The unwrapped module's state_dict (original names and shapes, the parameters' dtype, buffers
  // in the dtype they had before FSDP cast them), on every rank.
  nn::TensorDict full_state_dict();
  // Loads a full state dict (every rank passes the same); strict, all or nothing.
  void load_full_state_dict(const nn::TensorDict& state);
  // Throws unless `state` fits the model, naming every missing, unexpected or differently shaped
  // entry by its original name and shape; changes nothing.
  void check_full_state_dict(const nn::TensorDict& state) const;
  // The optimizer's state with its shard tensors gathered and unflattened to the original
  // parameters' names and shapes ("state.<fqn>.<buffer>"); scalars as the optimizer keeps them.
  optim::OptimizerState full_optim_state_dict(const optim::Optimizer& optimizer);
  void load_full_optim_state_dict(optim::Optimizer& optimizer, const optim::OptimizerState& state);

  // Sharded checkpoint: a folder with one safetensors file per rank holding that rank's pieces
  // of every parameter (and of the optimizer's state, when given), which loads at any world size.
  // Written to a temporary folder and swapped in atomically once every rank has written its file,
  // so an interrupted save never replaces the previous checkpoint.
  void save_sharded(const std::filesystem::path& folder, const optim::Optimizer* optimizer = nullptr,
                    const std::map<std::string, std::string>& metadata = {});
  std::map<std::string, std::string> load_sharded(const std::filesystem::path& folder, optim::Optimizer* optimizer = nullptr);

  // ---- introspection (tests, benchmarks) ----
  struct UnitInfo {
    std::string name;            // dotted name of the unit's module ("" for the root)
    int64_t numel = 0;           // parameters in the unit
    int64_t padded_numel = 0;    // numel rounded up to a multiple of the world size
    int64_t shard_numel = 0;
    bool unsharded = false;      // the full parameters are materialised right now
    bool byte_storage = false;   // frozen 4-bit weights as bytes (numel counts bytes)
  };
  std::vector<UnitInfo> units() const;
  // The shard of unit `i` (a parameter of this module) and its padding, for invariant checks.
  // Several units may share a module (and its name): one per dtype and requires_grad.
  Tensor shard(size_t unit) const;
  int64_t shard_padding(size_t unit) const;

  struct State;  // the implementation's (distributed/fsdp_state.h)

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> pg_;
  FSDPOptions options_;
  std::shared_ptr<State> state_;
};

// The holder: `FullyShardedDataParallel fsdp(model, pg, {.sharding_strategy = ...});`
class FullyShardedDataParallel : public nn::ModuleHolder<FullyShardedDataParallelImpl> {
 public:
  FullyShardedDataParallel(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  FullyShardedDataParallel(std::shared_ptr<FullyShardedDataParallelImpl> impl)  // NOLINT
      : ModuleHolder(std::move(impl)) {}
  template <class Model>
  FullyShardedDataParallel(const Model& module, std::shared_ptr<ProcessGroup> pg, FSDPOptions options = {})
      : ModuleHolder(std::make_shared<FullyShardedDataParallelImpl>(module, std::move(pg), std::move(options))) {}
};

// The caller's metadata of a sharded checkpoint folder, without loading it (refuses an unfinished one).
std::map<std::string, std::string> read_sharded_metadata(const std::filesystem::path& folder);

// True for every module inside a FullyShardedDataParallel (PyTorch's _is_fsdp_managed_module);
// use_orig_params is false: the optimizer sees flat shards.
bool is_fsdp_managed(const nn::Module& module);

}  // namespace weft::distributed
