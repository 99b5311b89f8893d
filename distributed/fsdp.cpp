// FullyShardedDataParallel: wrapping (units, shards, hooks) and the unit lifecycle (Note [FSDP
// unit lifecycle] in fsdp.h). Checkpoints are in fsdp_state_dict.cpp.
#include "distributed/fsdp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "distributed/coalesce.h"
#include "distributed/fsdp_state.h"
#include "nn/lazy.h"
#include "nn/tied_state.h"
#include "optim/clip_grad.h"
#include "precision/quant/linear_4bit.h"
#include "tensor/autograd.h"
#include "tensor/enum_check.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {
namespace {

std::mutex g_managed_mutex;
std::unordered_multiset<const nn::Module*> g_managed;

std::string join(const std::string& prefix, const std::string& name) { return prefix.empty() ? name : prefix + "." + name; }

// Marks the units bottom-up: returns how many parameters of `m`'s subtree no unit took.
int64_t pick_units(nn::Module& m, const std::string& name, bool is_root, const AutoWrapPolicy& policy,
                   std::vector<std::pair<nn::Module*, std::string>>& picked) {
  int64_t unwrapped = 0;
  for (const auto& [child_name, child] : m.named_children())
    unwrapped += pick_units(*child, join(name, child_name), false, policy, picked);
  for (const auto& p : m.parameters(false)) unwrapped += p.numel();
  if (!is_root && policy && unwrapped > 0 && policy(m, name, unwrapped)) {
    picked.emplace_back(&m, name);
    return 0;
  }
  return unwrapped;
}

}  // namespace

const char* sharding_strategy_name(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::FullShard: return "FULL_SHARD";
    case ShardingStrategy::ShardGradOp: return "SHARD_GRAD_OP";
    case ShardingStrategy::NoShard: return "NO_SHARD";
  }
  return "?";
}

ShardingStrategy parse_sharding_strategy(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (auto s : {ShardingStrategy::FullShard, ShardingStrategy::ShardGradOp, ShardingStrategy::NoShard})
    if (upper == sharding_strategy_name(s)) return s;
  WEFT_FAIL("[FullyShardedDataParallel] expected sharding strategy FULL_SHARD, SHARD_GRAD_OP or NO_SHARD, got '",
            name, "'");
}

AutoWrapPolicy module_type_auto_wrap_policy(std::set<std::string> types) {
  return [types = std::move(types)](const nn::Module& m, const std::string&, int64_t) {
    return types.count(m.type_name()) > 0;
  };
}

AutoWrapPolicy size_based_auto_wrap_policy(int64_t min_num_params) {
  return [min_num_params](const nn::Module&, const std::string&, int64_t unwrapped) { return unwrapped >= min_num_params; };
}

bool is_fsdp_managed(const nn::Module& module) {
  std::lock_guard<std::mutex> lock(g_managed_mutex);
  return g_managed.count(&module) > 0;
}

// ---- construction ----

FullyShardedDataParallelImpl::FullyShardedDataParallelImpl(std::shared_ptr<nn::Module> module,
                                                           std::shared_ptr<ProcessGroup> pg, FSDPOptions options)
    : module_(std::move(module)), pg_(std::move(pg)), options_(std::move(options)), state_(std::make_shared<State>()) {
  const char* op = "[FullyShardedDataParallel]";
  WEFT_CHECK(module_ != nullptr && pg_ != nullptr, op, " expected a module and a process group");
  WEFT_CHECK(!nn::has_uninitialized_params(*module_), op, " Modules with uninitialized parameters can't be used "
             "with `FullyShardedDataParallel`. Run a dummy forward pass to correctly initialize the modules "
             "(nn::materialize(model, example_input))");
  weft::detail::check_enum(options_.sharding_strategy, 3, "FullyShardedDataParallel",
                           "ShardingStrategy");  // FullShard, ShardGradOp, NoShard
  State& s = *state_;
  s.pg = pg_.get();
  s.options = options_;

  verify_same_shapes(*pg_, module_->parameters(), "FullyShardedDataParallel");

  // Units: the policy's picks, then the root for what is left; each unit's parameters in the
  // module's registration order. Note [Tied parameters in FSDP]: a parameter registered by several
  // modules (weight tying) is stored once, in the innermost unit whose subtree holds every module
  // that uses it (the root at worst, so a tie never has to be refused): that unit is gathered
  // during the forward and backward of all the uses. Its other names are aliases for the state
  // dicts.
  std::vector<std::pair<nn::Module*, std::string>> picked;
  pick_units(*module_, "", true, options_.auto_wrap_policy, picked);
  std::vector<std::pair<nn::Module*, std::string>> unit_specs{{module_.get(), ""}};
  for (const auto& [mname, m] : module_->named_modules())
    for (const auto& pick : picked)
      if (pick.first == m.get()) unit_specs.push_back(pick);
  std::unordered_map<const weft::detail::TensorImpl*, std::vector<const nn::Module*>> users;
  for (const auto& m : module_->modules())
    for (const auto& p : m->parameters(false)) users[p.impl()].push_back(m.get());
  std::unordered_map<const weft::detail::TensorImpl*, size_t> owner;  // parameter -> index into unit_specs
  for (size_t u = 0; u < unit_specs.size(); ++u) {  // parents before children: the innermost fit wins
    std::unordered_set<const nn::Module*> subtree;
    for (const auto& m : unit_specs[u].first->modules()) subtree.insert(m.get());
    for (const auto& p : unit_specs[u].first->parameters()) {
      const auto& used_by = users[p.impl()];
      if (std::all_of(used_by.begin(), used_by.end(), [&](const nn::Module* m) { return subtree.count(m) > 0; }))
        owner[p.impl()] = u;
    }
  }

  // Note [Frozen byte storage] (flat_param.h): the Linear4bit layers whose weight a unit owns give
  // it a byte-storage FlatParam of their packed codes and statistics.
  std::unordered_map<const weft::detail::TensorImpl*, std::pair<std::string, precision::quant::Linear4bitImpl*>>
      quantized;  // packed weight -> (the layer's dotted name, the layer)
  for (const auto& [mname, m] : module_->named_modules())
    if (auto* layer = dynamic_cast<precision::quant::Linear4bitImpl*>(m.get()))
      quantized[layer->weight.impl()] = {mname, layer};

  const std::vector<std::vector<std::string>> tied = nn::tied_groups(module_->state_dict());
  const bool sharded = options_.sharding_strategy != ShardingStrategy::NoShard;
  const auto add_unit = [&](size_t spec, std::unique_ptr<detail::FlatParam> unit) {
    if (spec == 0) s.root_units.push_back(s.units.size());
    s.units.push_back(std::move(unit));
    s.unit_modules.push_back(unit_specs[spec].first);
    for (const auto& group : tied)
      for (const auto& e : s.units.back()->entries())
        if (std::find(group.begin(), group.end(), e.fqn) != group.end())
          for (const std::string& name : group)
            if (name != e.fqn) s.tied_alias[name] = e.fqn;
    register_parameter("_flat_param_" + std::to_string(s.units.size() - 1), s.units.back()->shard(),
                       s.units.back()->requires_grad());
  };
  for (size_t u = 0; u < unit_specs.size(); ++u) {
    // A unit's parameters become one FlatParam per (dtype, requires_grad), in order of first
    // appearance (a LoRA layer's frozen base and trained adapters are two), plus its 4-bit storage.
    std::vector<detail::FlatParamEntry> storage;
    std::vector<std::vector<detail::FlatParamEntry>> groups;
    for (const auto& [fqn, p] : module_->named_parameters()) {
      if (owner[p.impl()] != u) continue;
      const auto q = quantized.find(p.impl());
      if (q != quantized.end()) {
        const std::string prefix = q->second.first.empty() ? "" : q->second.first + ".";
        s.quantized_layers.emplace_back(prefix, q->second.second);
        for (const auto& [name, t] : q->second.second->sharded_storage())
          storage.push_back({prefix + name, t, t.shape(), t.numel(), 0, t.dtype()});
        continue;
      }
      WEFT_CHECK(is_floating(p.dtype()), op, " '", fqn, "' is a ", p.dtype(), " parameter; FSDP shards floating "
                 "parameters and the packed weights of Linear4bit layers");
      const Tensor& param = p;  // a structured binding cannot be captured (C++20 as clang 14 reads it)
      auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        return g[0].param.dtype() == param.dtype() && g[0].param.requires_grad() == param.requires_grad();
      });
      if (group == groups.end()) group = groups.insert(groups.end(), std::vector<detail::FlatParamEntry>{});
      group->push_back({fqn, p, p.shape(), p.numel(), 0, p.dtype()});
    }
    for (auto& entries : groups) {
      const DType master = entries[0].param.dtype();
      const DType compute = options_.mixed_precision ? options_.mixed_precision->param_dtype : master;
      const DType reduce = options_.mixed_precision ? options_.mixed_precision->reduce_dtype : compute;
      const DType grad = options_.mixed_precision && options_.mixed_precision->keep_low_precision_grads ? reduce : master;
      // Rank 0's values are the model (PyTorch's sync_module_states).
      std::vector<Tensor> params;
      for (const auto& e : entries) params.push_back(e.param);
      broadcast_coalesced(*pg_, params, 0);
      add_unit(u, std::make_unique<detail::FlatParam>(unit_specs[u].second, std::move(entries), pg_->rank(),
                                                      pg_->size(), sharded, compute, reduce, grad));
    }
    if (!storage.empty()) {
      std::vector<Tensor> tensors;
      for (const auto& e : storage) tensors.push_back(e.param);
      broadcast_coalesced(*pg_, tensors, 0);
      add_unit(u, detail::FlatParam::byte_storage(unit_specs[u].second, std::move(storage), pg_->rank(), pg_->size(),
                                                  sharded));
    }
  }

  // Buffers: rank 0's, in buffer_dtype; never sharded.
  std::vector<Tensor> buffers;
  for (const auto& [fqn, b] : module_->named_buffers()) {
    s.buffers.push_back({fqn, b, b.dtype()});
    buffers.push_back(b);
  }
  broadcast_coalesced(*pg_, buffers, 0);
  if (options_.mixed_precision)
    for (auto& b : s.buffers)
      if (b.tensor.is_floating_point()) b.tensor.set_data(b.tensor.to(options_.mixed_precision->buffer_dtype));

  // Hooks: forward hooks on every unit's module but the root's (forward() handles it), and a
  // post-accumulate hook on every original parameter.
  std::weak_ptr<State> weak = state_;
  for (size_t u = 0; u < s.units.size(); ++u) {
    if (!s.is_root(u)) {
      nn::Module* m = s.unit_modules[u];
      const size_t pre = m->register_forward_pre_hook([weak, u](nn::Module&) {
        if (auto st = weak.lock()) st->pre_forward(u);
      });
      const size_t post = m->register_forward_hook([weak, u](nn::Module&, const Tensor& out) {
        auto st = weak.lock();
        return st ? st->post_forward(u, out) : out;
      });
      s.hooks.push_back({m, {pre, post}});
    }
    const auto& entries = s.units[u]->entries();
    for (size_t k = 0; k < entries.size(); ++k) {
      Tensor p = entries[k].param;
      if (p.requires_grad())
        p.register_post_accumulate_grad_hook([weak, u, k](Tensor&) {
          if (auto st = weak.lock()) st->on_grad(u, k);
        });
    }
  }

  std::lock_guard<std::mutex> lock(g_managed_mutex);
  for (const auto& m : module_->modules()) {
    s.managed.push_back(m.get());
    g_managed.insert(m.get());
  }
}

FullyShardedDataParallelImpl::~FullyShardedDataParallelImpl() {
  for (const auto& [m, ids] : state_->hooks)
    for (size_t id : ids) m->remove_forward_hook(id);
  std::lock_guard<std::mutex> lock(g_managed_mutex);
  for (const nn::Module* m : state_->managed) g_managed.erase(g_managed.find(m));
}

// ---- the unit lifecycle ----

bool FullyShardedDataParallelImpl::State::frees_after_forward(size_t u) const {
  return options.sharding_strategy == ShardingStrategy::FullShard && !is_root(u);
}

bool FullyShardedDataParallelImpl::State::is_root(size_t u) const {
  return std::find(root_units.begin(), root_units.end(), u) != root_units.end();
}

void FullyShardedDataParallelImpl::State::pre_forward(size_t u) {
  if (!order_recorded) forward_order.push_back(u);
  units[u]->finish_gather(*pg);
  if (options.forward_prefetch && order_recorded) {
    const auto at = std::find(forward_order.begin(), forward_order.end(), u);
    if (at != forward_order.end() && at + 1 != forward_order.end()) units[*(at + 1)]->start_gather(*pg);
  }
}

Tensor FullyShardedDataParallelImpl::State::post_forward(size_t u, const Tensor& output) {
  WEFT_CHECK(output.defined(), "[FullyShardedDataParallel] unit '", units[u]->name(), "' (", unit_modules[u]->type_name(),
             ") did not return one Tensor; wrap a module whose forward does, or its parent");
  if (frees_after_forward(u)) units[u]->reshard();
  return hook_backward(static_cast<int>(u), output);
}

Tensor FullyShardedDataParallelImpl::State::hook_backward(int u, const Tensor& output) {
  if (!output.requires_grad() || !autograd::grad_mode_enabled()) return output;
  Tensor hooked = output.detach();
  std::weak_ptr<State> weak = weak_from_this();
  autograd::record("FSDPPreBackward", hooked, {output}, [weak, u](const Tensor& grad) {
    if (auto st = weak.lock()) st->pre_backward(u);
    return std::vector<Tensor>{grad};
  });
  return hooked;
}

void FullyShardedDataParallelImpl::State::pre_backward(int u) {
  if (!finish_queued) {
    finish_queued = true;
    std::weak_ptr<State> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto st = weak.lock()) st->finish_backward();
    });
  }
  if (u < 0) return;
  units[static_cast<size_t>(u)]->finish_gather(*pg);
  if (options.backward_prefetch && order_recorded) {
    // The unit whose backward comes next is the one that ran forward just before.
    const auto at = std::find(forward_order.begin(), forward_order.end(), static_cast<size_t>(u));
    if (at != forward_order.end() && at != forward_order.begin()) units[*(at - 1)]->start_gather(*pg);
  }
}

void FullyShardedDataParallelImpl::State::on_grad(size_t u, size_t entry) {
  if (units[u]->grad_ready(entry)) post_backward(u);
}

void FullyShardedDataParallelImpl::State::post_backward(size_t u) {
  detail::FlatParam& unit = *units[u];
  if (sync_this_backward) {
    unit.start_reduce(*pg);
    reduce_order.push_back(u);
  }
  const bool sharded = options.sharding_strategy != ShardingStrategy::NoShard;
  if (sharded && (sync_this_backward || options.sharding_strategy == ShardingStrategy::FullShard)) unit.reshard();
}

void FullyShardedDataParallelImpl::State::finish_backward() {
  finish_queued = false;
  // Units whose hooks did not all fire (a parameter unused in this forward) reduce now, with zeros
  // for the missing gradients, in reverse unit order: the same on every rank.
  if (sync_this_backward)
    for (size_t u = units.size(); u-- > 0;)
      if (units[u]->requires_grad() && !units[u]->all_grads_ready() && !units[u]->reducing()) {
        units[u]->start_reduce(*pg);
        reduce_order.push_back(u);
      }
  for (size_t u : reduce_order) units[u]->finish_reduce();
  reduce_order.clear();
  for (auto& unit : units) unit->reset_grads();
  if (sync_this_backward || options.sharding_strategy == ShardingStrategy::FullShard) reshard_all();
}

void FullyShardedDataParallelImpl::State::reshard_all() {
  if (options.sharding_strategy == ShardingStrategy::NoShard) return;
  for (auto& unit : units)
    if (unit->unsharded() || unit->gathering()) unit->reshard();
}

int FullyShardedDataParallelImpl::State::unit_of_shard(const Tensor& param) const {
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u]->shard().is_same(param)) return static_cast<int>(u);
  return -1;
}

Tensor FullyShardedDataParallelImpl::forward(const Tensor& input) {
  State& s = *state_;
  if (!s.order_recorded && s.iterations > 0) s.order_recorded = true;
  ++s.iterations;
  s.sync_this_backward = s.sync_enabled;
  for (size_t u : s.root_units) s.pre_forward(u);
  Tensor x = input;
  if (options_.mixed_precision && x.defined() && x.is_floating_point())
    x = x.to(options_.mixed_precision->param_dtype);
  Tensor out = module_->call(x);
  if (!autograd::grad_mode_enabled() || !out.defined() || !out.requires_grad()) {
    s.reshard_all();  // no backward will follow
    return out;
  }
  // The root's units stay gathered through backward: one identity node queues the end-of-backward work.
  return s.hook_backward(-1, out);
}

FullyShardedDataParallelImpl::NoSyncGuard::NoSyncGuard(FullyShardedDataParallelImpl& fsdp)
    : fsdp_(fsdp), previous_(fsdp.state_->sync_enabled) {
  fsdp.state_->sync_enabled = false;
}
FullyShardedDataParallelImpl::NoSyncGuard::~NoSyncGuard() { fsdp_.state_->sync_enabled = previous_; }
void FullyShardedDataParallelImpl::set_requires_gradient_sync(bool sync) { state_->sync_enabled = sync; }

// ---- gradients over shards ----

// optim::clip_grad_norm_ in two halves around an all-reduce: each rank accumulates Σ |g|^p (or
// max |g|) over its shards with the same kernels, the ranks sum (or max, keeping a NaN) those, and
// every rank then scales its shards by the one total.
double FullyShardedDataParallelImpl::clip_grad_norm_(double max_norm, double norm_type, bool error_if_nonfinite) {
  WEFT_CHECK(norm_type > 0, "[clip_grad_norm_] expected norm_type > 0 or infinity, got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const auto& unit : state_->units)
    if (unit->shard().grad().defined()) grads.push_back(unit->shard().grad());
  Tensor accumulated = scalar_tensor(optim::detail::grad_norm_accumulated(grads, norm_type), kFloat64).view({1});
  pg_->all_reduce(accumulated, std::isinf(norm_type) ? ReduceOp::Max : ReduceOp::Sum)->wait();
  return optim::detail::finish_clip_grad_norm(grads, accumulated.item<double>(), max_norm, norm_type, error_if_nonfinite);
}

void FullyShardedDataParallelImpl::clip_grad_value_(double clip_value) {
  NoGradGuard no_grad;
  for (const auto& unit : state_->units) {
    Tensor g = unit->shard().grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

void FullyShardedDataParallelImpl::shard_grad_scaler(precision::GradScaler& scaler) {
  std::weak_ptr<State> weak = state_;
  scaler.set_found_inf_reduction([weak](float found) {
    auto st = weak.lock();
    WEFT_CHECK(st != nullptr, "[GradScaler] the FullyShardedDataParallel this scaler was sharded for is gone");
    Tensor flag = scalar_tensor(found, kFloat32).view({1});
    st->pg->all_reduce(flag, ReduceOp::Max)->wait();
    return flag.item<float>();
  });
}

// ---- introspection ----

std::vector<FullyShardedDataParallelImpl::UnitInfo> FullyShardedDataParallelImpl::units() const {
  std::vector<UnitInfo> out;
  for (const auto& u : state_->units)
    out.push_back({u->name(), u->numel(), u->padded_numel(), u->shard_numel(), u->unsharded(), u->byte_storage()});
  return out;
}

Tensor FullyShardedDataParallelImpl::shard(size_t unit) const { return state_->units.at(unit)->shard(); }

int64_t FullyShardedDataParallelImpl::shard_padding(size_t unit) const {
  const auto& u = *state_->units.at(unit);
  return std::max<int64_t>(0, u.shard_offset() + u.shard_numel() - std::max(u.numel(), u.shard_offset()));
}

}  // namespace weft::distributed
