// FullyShardedDataParallel's sharded checkpoints: every rank writes only what it owns, and a
// checkpoint written at N ranks loads at M.
//
// Note [Sharded checkpoint layout]: <folder>/shard-<r>-of-<N>.safetensors holds, for every
// original parameter, the elements that fall in rank r's shard, as a 1-D tensor named by the
// parameter's dotted name, with metadata "__start__.<name>" (the index of its first element in
// the flattened parameter) and "__shape__.<name>". Optimizer state aligned with the shards is cut
// the same way, named "__optimizer__.state.<name>.<buffer>"; rank 0's file also holds the buffers
// (metadata "__buffer__.<name>"), the optimizer's replicated tensors and scalars, and the caller's
// metadata. <folder>/COMPLETE, holding N, is written last. A save writes <folder>.partial and,
// after every rank has written its file, swaps it with <folder> in one atomic rename, so a save
// that dies half way never replaces the previous checkpoint; a folder without COMPLETE is refused.
#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "distributed/coalesce.h"
#include "distributed/fsdp_state.h"
#include "io/safetensors.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {
namespace {

constexpr const char* kOptimizerPrefix = "__optimizer__.";
constexpr const char* kComplete = "COMPLETE";
// Metadata keys of the layout itself; every other key is the caller's.
constexpr const char* kLayoutKeys[] = {"__shape__.", "__start__.", "__buffer__.", "__optimizer__.", "__world_size__",
                                       "__rank__"};

bool layout_key(const std::string& key) {
  for (const char* prefix : kLayoutKeys)
    if (key.rfind(prefix, 0) == 0) return true;
  return false;
}

// The number of ranks that wrote the checkpoint, from its COMPLETE marker.
int saved_world_size(const std::filesystem::path& folder) {
  std::ifstream complete(folder / kComplete);
  int world = 0;
  WEFT_CHECK(complete && (complete >> world) && world > 0, "[FullyShardedDataParallel.load_sharded] ", folder,
             " has no ", kComplete, " marker: it is not a finished sharded checkpoint (a save was interrupted, or "
             "this is not one)");
  return world;
}

std::string shape_text(const Shape& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  return out;
}

std::filesystem::path shard_file(const std::filesystem::path& folder, int rank, int world) {
  return folder / ("shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors");
}

// Replaces `target` by `fresh` in one step (an exchange when `target` exists), then removes the old.
void swap_into_place(const std::filesystem::path& fresh, const std::filesystem::path& target) {
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    std::filesystem::remove_all(fresh);  // now the previous checkpoint
    return;
  }
  WEFT_CHECK(::rename(fresh.c_str(), target.c_str()) == 0, "[FullyShardedDataParallel.save_sharded] cannot move ",
             fresh, " to ", target, ": ", std::strerror(errno));
}

}  // namespace

void FullyShardedDataParallelImpl::save_sharded(const std::filesystem::path& folder, const optim::Optimizer* optimizer,
                                                const std::map<std::string, std::string>& metadata) {
  State& s = *state_;
  const int rank = pg_->rank(), world = pg_->size();
  for (const auto& [key, value] : metadata)
    WEFT_CHECK(!layout_key(key), "[FullyShardedDataParallel.save_sharded] the metadata key '", key,
               "' is reserved for the checkpoint's layout");
  const std::filesystem::path partial = folder.string() + ".partial";
  if (rank == 0) {
    std::filesystem::remove_all(partial);
    std::filesystem::create_directories(partial);
  }
  pg_->barrier()->wait();

  NoGradGuard no_grad;
  nn::TensorDict tensors;
  io::SafetensorsMetadata meta{{"__world_size__", std::to_string(world)}, {"__rank__", std::to_string(rank)}};
  // The elements of a shard-aligned tensor that belong to each parameter, named by `name_of`.
  const auto cut = [&](const detail::FlatParam& unit, const Tensor& aligned,
                       const std::function<std::string(const std::string&)>& name_of) {
    const int64_t lo = unit.shard_offset(), hi = lo + unit.shard_numel();
    for (const auto& e : unit.entries()) {
      const std::string name = name_of(e.fqn);
      meta["__shape__." + name] = shape_text(e.shape);
      const int64_t a = std::max(e.offset, lo), b = std::min(e.offset + e.numel, hi);
      if (b <= a) continue;
      tensors.insert(name, aligned.narrow(0, a - lo, b - a));
      meta["__start__." + name] = std::to_string(a - e.offset);
    }
  };
  for (const auto& unit : s.units) cut(*unit, unit->shard().detach(), [](const std::string& fqn) { return fqn; });
  if (rank == 0)
    for (const auto& b : s.buffers) {
      tensors.insert(b.fqn, b.tensor.to(b.original_dtype));
      meta["__buffer__." + b.fqn] = "1";
    }
  if (optimizer != nullptr) {
    const detail::Locator where(s, optimizer);
    const optim::OptimizerState st = optimizer->state_dict();
    const auto unit_at = [&](size_t index) {
      WEFT_CHECK(index < where.unit_at.size(), "[FullyShardedDataParallel.save_sharded] optimizer state for an "
                 "unknown parameter ", index);
      return where.unit_at[index];
    };
    for (const auto& [key, t] : st.tensors) {
      const auto indexed = detail::split_indexed(key);
      WEFT_CHECK(indexed.has_value(), "[FullyShardedDataParallel.save_sharded] unexpected optimizer state '", key, "'");
      const auto& unit = *s.units[unit_at(indexed->first)];
      const std::string field = indexed->second;
      const auto name_of = [&](const std::string& fqn) { return std::string(kOptimizerPrefix) + "state." + fqn + "." + field; };
      if (t.dim() == 1 && t.numel() == unit.shard_numel()) {
        cut(unit, t, name_of);
      } else if (rank == 0) {
        for (const auto& e : unit.entries()) tensors.insert(name_of(e.fqn), t);
      }
    }
    if (rank == 0)
      for (const auto& [key, value] : st.scalars) {
        const auto indexed = detail::split_indexed(key);
        if (!indexed) {
          meta[kOptimizerPrefix + key] = value;
          continue;
        }
        for (const auto& e : s.units[unit_at(indexed->first)]->entries())
          meta[std::string(kOptimizerPrefix) + "state." + e.fqn + "." + indexed->second] = value;
      }
  }
  if (rank == 0)
    for (const auto& [key, value] : metadata) meta[key] = value;
  io::save_safetensors(shard_file(partial, rank, world), tensors, meta);
  pg_->barrier()->wait();
  if (rank == 0) {
    std::ofstream(partial / kComplete) << world << "\n";
    swap_into_place(partial, folder);
  }
  pg_->barrier()->wait();
}

std::map<std::string, std::string> FullyShardedDataParallelImpl::load_sharded(const std::filesystem::path& folder,
                                                                              optim::Optimizer* optimizer) {
  const char* op = "[FullyShardedDataParallel.load_sharded]";
  const int saved_world = saved_world_size(folder);

  // Reassemble every parameter (and optimizer tensor) whole from the pieces of all files.
  std::map<std::string, Tensor> whole;      // name -> flattened tensor
  std::map<std::string, int64_t> covered;   // name -> elements seen
  std::map<std::string, Shape> shapes;
  nn::TensorDict buffers;
  optim::OptimizerState optim_state;
  std::map<std::string, std::string> user;
  NoGradGuard no_grad;
  for (int r = 0; r < saved_world; ++r) {
    const io::SafetensorsFile file = io::load_safetensors(shard_file(folder, r, saved_world));
    for (const auto& [key, value] : file.metadata) {
      if (key.rfind("__shape__.", 0) == 0) {
        Shape shape;
        std::stringstream ss(value);
        for (std::string d; std::getline(ss, d, ',');) shape.push_back(std::stoll(d));
        shapes[key.substr(10)] = shape;
      } else if (r == 0 && key.rfind(kOptimizerPrefix, 0) == 0) {
        optim_state.scalars[key.substr(std::string(kOptimizerPrefix).size())] = value;
      } else if (r == 0 && !layout_key(key)) {
        user[key] = value;
      }
    }
    for (const auto& [name, t] : file.tensors) {
      if (file.metadata.count("__buffer__." + name)) {
        buffers.insert(name, t);
        continue;
      }
      const auto start = file.metadata.find("__start__." + name);
      if (start == file.metadata.end()) {  // a replicated optimizer tensor, whole (rank 0 only)
        optim_state.tensors.insert(name.substr(std::string(kOptimizerPrefix).size()), t);
        continue;
      }
      WEFT_CHECK(shapes.count(name), op, " '", name, "' has no recorded shape in ", folder);
      Tensor& w = whole[name];
      if (!w.defined()) w = zeros({weft::detail::shape_numel(shapes[name])}, TensorOptions(t.dtype()));
      const int64_t at = std::stoll(start->second);
      WEFT_CHECK(at >= 0 && at + t.numel() <= w.numel(), op, " '", name, "' has a piece past its end in rank ", r,
                 "'s file");
      w.narrow(0, at, t.numel()).copy_(t);
      covered[name] += t.numel();
    }
  }
  for (const auto& [name, w] : whole)
    WEFT_CHECK(covered[name] == w.numel(), op, " '", name, "' is incomplete: ", covered[name], " of ", w.numel(),
               " elements found in ", folder);

  nn::TensorDict model_state;
  for (const auto& [name, w] : whole) {
    if (name.rfind(kOptimizerPrefix, 0) == 0) optim_state.tensors.insert(name.substr(std::string(kOptimizerPrefix).size()), w.view(shapes[name]));
    else model_state.insert(name, w.view(shapes[name]));
  }
  for (const auto& [name, b] : buffers) model_state.insert(name, b);
  // Validate and load the optimizer first (it changes nothing when it refuses), then the model
  // (which also validates everything before it writes).
  if (optimizer != nullptr) {
    WEFT_CHECK(!optim_state.tensors.empty() || !optim_state.scalars.empty(), op, " ", folder,
               " holds no optimizer state");
    const optim::OptimizerState previous = optimizer->state_dict();
    load_full_optim_state_dict(*optimizer, optim_state);
    try {
      load_full_state_dict(model_state);
    } catch (...) {
      optimizer->load_state_dict(previous);
      throw;
    }
  } else {
    load_full_state_dict(model_state);
  }
  return user;
}

std::map<std::string, std::string> read_sharded_metadata(const std::filesystem::path& folder) {
  const int world = saved_world_size(folder);
  std::map<std::string, std::string> user;
  for (const auto& [key, value] : io::load_safetensors(shard_file(folder, 0, world)).metadata)
    if (!layout_key(key)) user[key] = value;
  return user;
}

}  // namespace weft::distributed
