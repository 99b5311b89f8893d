// FullyShardedDataParallel's full state dicts: the model's and the optimizer's, gathered from the
// shards and unflattened to the original parameters' names and shapes, and loaded back into the
// shards of any world size. Optimizer state that is aligned with a shard (a (shard_numel) tensor,
// as Adam's moments) is cut like the parameters; anything else is replicated. A 4-bit layer's
// bytes (Note [Frozen byte storage] in flat_param.h) come back in their own dtypes and
// bitsandbytes' keys, its code tables and format from the layer itself; loading rebuilds the
// decoded absmax from the loaded statistics.
#include <cctype>
#include <cstdint>
#include <unordered_map>

#include "distributed/coalesce.h"
#include "distributed/fsdp_state.h"
#include "io/safetensors.h"
#include "precision/quant/quant_state.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {
namespace detail {

Tensor gather_flat(ProcessGroup& pg, const detail::FlatParam& unit, const Tensor& shard_aligned) {
  if (!unit.sharded()) return shard_aligned;
  Tensor full = empty({unit.padded_numel()}, TensorOptions(shard_aligned.dtype()));
  pg.all_gather(full, shard_aligned.contiguous())->wait();
  return full;
}

Tensor slice_shard(const detail::FlatParam& unit, const Tensor& flat) {
  Tensor shard = zeros({unit.shard_numel()}, TensorOptions(flat.dtype()));
  const int64_t begin = std::min(unit.shard_offset(), unit.numel());
  const int64_t end = std::min(unit.shard_offset() + unit.shard_numel(), unit.numel());
  if (end > begin) shard.narrow(0, 0, end - begin).copy_(flat.narrow(0, begin, end - begin));
  return shard;
}

std::optional<std::pair<size_t, std::string>> split_indexed(const std::string& key) {
  if (key.rfind("state.", 0) != 0) return std::nullopt;
  const auto dot = key.find('.', 6);
  if (dot == std::string::npos || dot == 6) return std::nullopt;
  for (size_t i = 6; i < dot; ++i)
    if (!std::isdigit(static_cast<unsigned char>(key[i]))) return std::nullopt;
  return std::make_pair(static_cast<size_t>(std::stoull(key.substr(6, dot - 6))), key.substr(dot + 1));
}

std::optional<std::pair<std::string, std::string>> split_named(const std::string& key) {
  if (key.rfind("state.", 0) != 0) return std::nullopt;
  const auto dot = key.rfind('.');
  if (dot <= 6) return std::nullopt;
  return std::make_pair(key.substr(6, dot - 6), key.substr(dot + 1));
}

Locator::Locator(const FullyShardedDataParallelImpl::State& s, const optim::Optimizer* optimizer) {
  for (size_t u = 0; u < s.units.size(); ++u)
    for (size_t k = 0; k < s.units[u]->entries().size(); ++k) entry[s.units[u]->entries()[k].fqn] = {u, k};
  if (optimizer == nullptr) return;
  optimizer_index.assign(s.units.size(), SIZE_MAX);
  size_t i = 0;
  for (size_t g = 0; g < optimizer->num_param_groups(); ++g)
    for (const Tensor& p : optimizer->params(g)) {
      const int u = s.unit_of_shard(p);
      WEFT_CHECK(u >= 0, "[FullyShardedDataParallel] the optimizer holds a parameter that is not one of this "
                 "module's shards; build the optimizer from fsdp->parameters()");
      optimizer_index[static_cast<size_t>(u)] = i++;
      unit_at.push_back(static_cast<size_t>(u));
    }
}

}  // namespace detail

namespace {
constexpr const char* kDecodedAbsmax = "weight.block_absmax";
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

bool FullyShardedDataParallelImpl::State::is_quant_format_key(const std::string& name) const {
  for (const auto& [prefix, layer] : quantized_layers)
    if (starts_with(name, prefix + "weight.") && name != prefix + "weight.absmax" &&
        name != prefix + "weight.nested_absmax" && name != prefix + kDecodedAbsmax)
      return true;
  return false;
}

bool FullyShardedDataParallelImpl::State::is_derived(const std::string& fqn) const {
  for (const auto& [prefix, layer] : quantized_layers)
    if (fqn == prefix + kDecodedAbsmax) return true;
  return false;
}

std::optional<precision::quant::QuantState> FullyShardedDataParallelImpl::State::loaded_format(
    const std::string& prefix, const precision::quant::Linear4bitImpl& layer, const nn::TensorDict& state) const {
  for (const auto& [name, t] : state)
    if (starts_with(name, prefix + "weight.quant_state.")) {
      const Tensor bytes = t.to(kUInt8).contiguous();
      precision::quant::QuantState q = layer.quant_state();
      precision::quant::parse_quant_state_json(
          std::string(reinterpret_cast<const char*>(bytes.data<uint8_t>()), static_cast<size_t>(bytes.numel())), q);
      return q;
    }
  return std::nullopt;
}

Tensor FullyShardedDataParallelImpl::State::derived_value(const std::string& fqn, const nn::TensorDict& state) const {
  for (const auto& [prefix, layer] : quantized_layers)
    if (fqn == prefix + kDecodedAbsmax) {
      // The format with the loaded offset; the tensors from `state`.
      precision::quant::QuantState q = loaded_format(prefix, *layer, state).value();
      q.absmax = state.at(prefix + "weight.absmax");
      q.nested_absmax = state.at(prefix + "weight.nested_absmax");
      return precision::quant::block_absmax(q);
    }
  WEFT_FAIL("[FullyShardedDataParallel] '", fqn, "' is not a decoded absmax");
}

using detail::gather_flat;
using detail::Locator;
using detail::slice_shard;
using detail::split_indexed;
using detail::split_named;

// ---- full state dicts ----

nn::TensorDict FullyShardedDataParallelImpl::full_state_dict() {
  State& s = *state_;
  NoGradGuard no_grad;
  std::unordered_map<std::string, Tensor> params;
  for (const auto& unit : s.units) {
    const Tensor flat = gather_flat(*pg_, *unit, unit->shard().detach());
    for (size_t k = 0; k < unit->entries().size(); ++k)
      params[unit->entries()[k].fqn] = unit->entry_view(flat, k).clone();
  }
  nn::TensorDict out;
  for (const auto& [name, t] : module_->state_dict()) {
    const auto alias = s.tied_alias.find(name);
    const std::string& fqn = alias == s.tied_alias.end() ? name : alias->second;
    if (params.count(fqn)) {
      out.insert(name, params[fqn]);  // one tensor under every name of a tie, as Module::state_dict
      continue;
    }
    for (const auto& b : s.buffers)
      if (b.fqn == name) out.insert(name, b.tensor.to(b.original_dtype).clone());
    if (s.is_quant_format_key(name)) out.insert(name, t.clone());
  }
  return out;
}

namespace {

// A tied parameter may come under any of its names (a file keeps one, io/checkpoint.h): `given`
// under the names the units know. Under several names the values must agree, as
// Module::load_state_dict requires; a disagreement is added to `problems`.
template <class AliasMap>
nn::TensorDict canonical_tied_names(const AliasMap& tied_alias, const nn::TensorDict& given, std::string& problems) {
  nn::TensorDict state;
  for (const auto& [name, t] : given)
    if (!tied_alias.count(name)) state.insert(name, t);
  for (const auto& [alias, fqn] : tied_alias) {
    const Tensor* t = given.find(alias);
    if (t == nullptr) continue;
    const Tensor* kept = state.find(fqn);
    if (kept == nullptr) {
      state.insert(fqn, *t);
    } else if (kept->shape() != t->shape() || !allclose(*kept, *t, 0.0, 0.0, true)) {
      problems += (problems.empty() ? "" : "; ") + ("'" + fqn + "' and '" + alias +
                                                    "' are one tied parameter but carry different values");
    }
  }
  return state;
}

}  // namespace

void FullyShardedDataParallelImpl::check_full_state_dict(const nn::TensorDict& given) const {
  const State& s = *state_;
  std::string problems;
  const auto problem = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  const nn::TensorDict state = canonical_tied_names(s.tied_alias, given, problems);
  std::unordered_map<std::string, Shape> expected;
  for (const auto& unit : s.units)
    for (const auto& e : unit->entries()) {
      if (s.is_derived(e.fqn)) continue;
      expected[e.fqn] = e.shape;
      const Tensor* t = state.find(e.fqn);
      if (unit->byte_storage() && t != nullptr && t->dtype() != e.dtype)
        problem(weft::detail::cat("'", e.fqn, "' is ", t->dtype(), ", the model's 4-bit layer holds ", e.dtype));
    }
  for (const auto& b : s.buffers) expected[b.fqn] = b.tensor.shape();
  // A 4-bit layer's code tables and format: a wrapped model's bytes are laid out for them, so
  // they must be the model's own, but for the nesting offset (a statistic of the weights).
  for (const auto& [name, t] : module_->state_dict()) {
    if (!s.is_quant_format_key(name)) continue;
    const Tensor* given_t = state.find(name);
    expected[name] = given_t != nullptr ? given_t->shape() : t.shape();
    if (given_t == nullptr) continue;
    bool same = given_t->dtype() == t.dtype();
    if (same && name.find(".quant_state.") != std::string::npos) {
      for (const auto& [prefix, layer] : s.quantized_layers) {
        if (!starts_with(name, prefix + "weight.quant_state.")) continue;
        try {
          const precision::quant::QuantState& mine = layer->quant_state();
          const precision::quant::QuantState theirs = s.loaded_format(prefix, *layer, state).value();
          same = theirs.type == mine.type && theirs.blocksize == mine.blocksize && theirs.shape == mine.shape &&
                 theirs.dtype == mine.dtype && theirs.nested == mine.nested &&
                 theirs.nested_blocksize == mine.nested_blocksize && theirs.nested_dtype == mine.nested_dtype;
        } catch (const Error& e) {
          problem("'" + name + "': " + e.what());
        }
      }
    } else {
      same = same && given_t->shape() == t.shape() && equal(*given_t, t);
    }
    if (!same) problem("'" + name + "' differs from the model's: the 4-bit format of a wrapped model cannot change");
  }
  for (const auto& [name, shape] : expected) {
    const Tensor* t = state.find(name);
    if (t == nullptr) problem("missing '" + name + "'");
    else if (t->shape() != shape)
      problem(weft::detail::cat("'", name, "' has shape ", t->shape(), ", the model ", shape));
  }
  for (const auto& [name, t] : state)
    if (!expected.count(name)) problem("unexpected '" + name + "'");
  WEFT_CHECK(problems.empty(), "[FullyShardedDataParallel.load_full_state_dict] the state dict does not fit the "
             "model: ", problems);
}

void FullyShardedDataParallelImpl::load_full_state_dict(const nn::TensorDict& given) {
  check_full_state_dict(given);
  State& s = *state_;
  std::string agreed;  // check_full_state_dict found every alias consistent
  const nn::TensorDict state = canonical_tied_names(s.tied_alias, given, agreed);
  NoGradGuard no_grad;
  for (auto& unit : s.units) {
    std::vector<Tensor> values;
    for (const auto& e : unit->entries())
      values.push_back(s.is_derived(e.fqn) ? s.derived_value(e.fqn, state) : state.at(e.fqn));
    unit->load_shard_from_full(unit->flatten(values));
    if (unit->can_free()) unit->reshard();  // the next forward gathers the new values
  }
  for (auto& b : s.buffers) b.tensor.copy_(state.at(b.fqn));
  for (const auto& [prefix, layer] : s.quantized_layers)
    layer->set_nested_offset(s.loaded_format(prefix, *layer, state)->offset);
}

optim::OptimizerState FullyShardedDataParallelImpl::full_optim_state_dict(const optim::Optimizer& optimizer) {
  State& s = *state_;
  const Locator where(s, &optimizer);
  const std::vector<size_t>& unit_of = where.unit_at;
  const optim::OptimizerState st = optimizer.state_dict();
  optim::OptimizerState out;
  NoGradGuard no_grad;
  for (const auto& [key, t] : st.tensors) {
    const auto indexed = split_indexed(key);
    WEFT_CHECK(indexed && indexed->first < unit_of.size(),
               "[FullyShardedDataParallel.full_optim_state_dict] unexpected optimizer state '", key, "'");
    const auto& unit = *s.units[unit_of[indexed->first]];
    const bool aligned = t.dim() == 1 && t.numel() == unit.shard_numel();
    const Tensor flat = aligned ? gather_flat(*pg_, unit, t) : t;
    for (const auto& e : unit.entries())
      out.tensors.insert("state." + e.fqn + "." + indexed->second,
                         aligned ? flat.narrow(0, e.offset, e.numel).view(e.shape).clone() : t.clone());
  }
  for (const auto& [key, value] : st.scalars) {
    const auto indexed = split_indexed(key);
    if (!indexed) {
      out.scalars[key] = value;
      continue;
    }
    const auto& unit = *s.units.at(unit_of.at(indexed->first));
    for (const auto& e : unit.entries()) out.scalars["state." + e.fqn + "." + indexed->second] = value;
  }
  return out;
}

void FullyShardedDataParallelImpl::load_full_optim_state_dict(optim::Optimizer& optimizer,
                                                               const optim::OptimizerState& state) {
  State& s = *state_;
  const Locator where(s, &optimizer);
  const char* op = "[FullyShardedDataParallel.load_full_optim_state_dict]";
  optim::OptimizerState rebuilt;
  // Per unit and field, the pieces of every original parameter.
  std::map<std::pair<size_t, std::string>, std::vector<Tensor>> pieces;
  for (const auto& [key, t] : state.tensors) {
    const auto named = split_named(key);
    WEFT_CHECK(named && where.entry.count(named->first), op, " unexpected optimizer state '", key, "'");
    const auto [u, k] = where.entry.at(named->first);
    auto& list = pieces[{u, named->second}];
    list.resize(s.units[u]->entries().size());
    list[k] = t;
  }
  NoGradGuard no_grad;
  for (const auto& [unit_field, list] : pieces) {
    const auto& [u, field] = unit_field;
    const auto& unit = *s.units[u];
    const std::string key = "state." + std::to_string(where.optimizer_index[u]) + "." + field;
    bool aligned = true;
    for (size_t k = 0; k < list.size(); ++k) {
      WEFT_CHECK(list[k].defined(), op, " '", unit.entries()[k].fqn, "' has no '", field, "' while the other "
                 "parameters of its unit have one");
      aligned &= list[k].shape() == unit.entries()[k].shape;
    }
    rebuilt.tensors.insert(key, aligned ? slice_shard(unit, flatten_into_buffer(list, list[0].dtype())) : list[0].clone());
  }
  for (const auto& [key, value] : state.scalars) {
    const auto named = split_named(key);
    if (!named) {
      rebuilt.scalars[key] = value;
      continue;
    }
    WEFT_CHECK(where.entry.count(named->first), op, " unexpected optimizer state '", key, "'");
    const auto [u, k] = where.entry.at(named->first);
    if (k == 0) rebuilt.scalars["state." + std::to_string(where.optimizer_index[u]) + "." + named->second] = value;
  }
  optimizer.load_state_dict(rebuilt);
}

}  // namespace weft::distributed
