// The inside of FullyShardedDataParallel, shared by fsdp.cpp (construction and the unit
// lifecycle) and fsdp_state_dict.cpp (checkpoints). Not part of the public API.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "distributed/flat_param.h"
#include "distributed/fsdp.h"
#include "precision/quant/linear_4bit.h"

namespace weft::distributed {

struct FullyShardedDataParallelImpl::State : std::enable_shared_from_this<State> {
  ProcessGroup* pg = nullptr;
  FSDPOptions options;
  DType param_dtype_override = kFloat32;  // valid when options.mixed_precision is set
  std::vector<std::unique_ptr<detail::FlatParam>> units;  // only units that hold parameters
  std::vector<nn::Module*> unit_modules;                   // the module of each unit (several may share one)
  std::vector<size_t> root_units;                          // the root's units (none when it holds no parameters)
  // The other state-dict names of a tied parameter -> its entry's fqn (Note [Tied parameters in FSDP]).
  std::map<std::string, std::string> tied_alias;
  std::vector<std::pair<nn::Module*, std::vector<size_t>>> hooks;  // forward hooks to remove at the end
  struct Buffer {
    std::string fqn;
    Tensor tensor;
    DType original_dtype;
  };
  std::vector<Buffer> buffers;
  // The Linear4bit layers whose bytes a unit holds (Note [Frozen byte storage]), by state-dict
  // prefix ("h.0.attn.c_attn.base_layer."): their code tables and format stay with the layer.
  std::vector<std::pair<std::string, precision::quant::Linear4bitImpl*>> quantized_layers;
  std::vector<const nn::Module*> managed;

  // iteration state (Note [FSDP unit lifecycle])
  std::vector<size_t> forward_order;  // units in the order their forward ran, recorded once
  bool order_recorded = false;
  int64_t iterations = 0;
  bool sync_enabled = true;
  bool sync_this_backward = true;
  bool finish_queued = false;
  std::vector<size_t> reduce_order;  // units whose reduction is in flight, in issue order

  bool is_root(size_t u) const;
  bool frees_after_forward(size_t u) const;
  void pre_forward(size_t u);
  Tensor post_forward(size_t u, const Tensor& output);
  // Puts an identity node on `output` whose backward runs pre_backward(u) (u < 0: the root,
  // which only queues the end-of-backward work).
  Tensor hook_backward(int u, const Tensor& output);
  void pre_backward(int u);
  void on_grad(size_t u, size_t entry);
  void post_backward(size_t u);
  void finish_backward();
  void reshard_all();
  // A 4-bit layer's replicated state-dict key (code tables, format JSON), never sharded.
  bool is_quant_format_key(const std::string& name) const;
  // A byte-storage entry that is no state-dict key but computed from others (the decoded absmax),
  // and its value from a full state dict.
  bool is_derived(const std::string& fqn) const;
  Tensor derived_value(const std::string& fqn, const nn::TensorDict& state) const;
  // A 4-bit layer's format as a full state dict gives it (its quant_state JSON parsed over the
  // layer's own), or nullopt when the dict has no JSON for it.
  std::optional<precision::quant::QuantState> loaded_format(const std::string& prefix,
                                                            const precision::quant::Linear4bitImpl& layer,
                                                            const nn::TensorDict& state) const;
  // The unit of an optimizer's parameter (a shard), or -1.
  int unit_of_shard(const Tensor& param) const;
};

namespace detail {

// The whole flat buffer of a unit, from a tensor aligned with this rank's shard (collective).
Tensor gather_flat(ProcessGroup& pg, const FlatParam& unit, const Tensor& shard_aligned);
// This rank's shard of a unit's flat buffer (numel elements or more), zero padded.
Tensor slice_shard(const FlatParam& unit, const Tensor& flat);
// "state.<i>.<field>" -> (i, field), as an optimizer keys its state; nullopt for other keys.
std::optional<std::pair<size_t, std::string>> split_indexed(const std::string& key);
// "state.<fqn>.<field>" -> (fqn, field): a dotted name, then a field without dots.
std::optional<std::pair<std::string, std::string>> split_named(const std::string& key);

// Where every original parameter lives, and which optimizer index holds each unit's shard.
struct Locator {
  std::unordered_map<std::string, std::pair<size_t, size_t>> entry;  // fqn -> (unit, entry)
  std::vector<size_t> optimizer_index;                              // unit -> index in the optimizer
  std::vector<size_t> unit_at;                                      // index in the optimizer -> unit
  Locator(const FullyShardedDataParallelImpl::State& s, const optim::Optimizer* optimizer);
};

}  // namespace detail
}  // namespace weft::distributed
