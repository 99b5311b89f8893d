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
// Every file records its rank and the world size ("__rank__", "__world_size__"), checked on load.
// A 4-bit layer's tensors (Note [Frozen byte storage] in flat_param.h) are cut by bytes: their
// pieces are uint8, "__start__.<name>" counts bytes, and "__bytes__.<name>" names the tensor's
// dtype; rank 0 keeps the layer's code tables and format JSON whole, as buffers. The decoded
// absmax is not saved: loading rebuilds it from the statistics.
//
// A save never deletes what weft did not write: <folder> (and <folder>.partial) must be absent,
// an empty folder, or a folder holding only the files above (an earlier checkpoint); anything
// else there is refused, naming what is in it, before any rank writes. The old checkpoint that the
// swap moves aside is removed file by file, only its layout files; what else appeared in it
// meanwhile stays.
#include <fcntl.h>
#include <stdio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "distributed/coalesce.h"
#include "distributed/fsdp_state.h"
#include "distributed/sharded_layout.h"
#include "io/safetensors.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {
namespace {

constexpr const char* kOptimizerPrefix = "__optimizer__.";
constexpr const char* kComplete = kShardedCompleteFile;
// Metadata keys of the layout itself; every other key is the caller's.
constexpr const char* kLayoutKeys[] = {"__shape__.", "__start__.", "__buffer__.", "__bytes__.", "__optimizer__.",
                                       "__world_size__", "__rank__"};

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

// The entries of `folder` that are not files of the layout, sorted.
std::vector<std::string> foreign_entries(const std::filesystem::path& folder) {
  std::vector<std::string> foreign;
  for (const auto& [name, ours] : sharded_folder_entries(folder))
    if (!ours) foreign.push_back(name);
  std::sort(foreign.begin(), foreign.end());
  return foreign;
}

std::string listing(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

// Refuses, before anything is written, a `path` a save would have to delete what weft did not
// write to replace: anything but nothing there, an empty folder, or an earlier checkpoint's files.
void check_replaceable(const std::filesystem::path& path) {
  const char* op = "[FullyShardedDataParallel.save_sharded]";
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(path, ec);
  if (!std::filesystem::exists(status)) return;
  WEFT_CHECK(std::filesystem::is_directory(status), op, " ", path, " exists and is not a folder; a sharded "
             "checkpoint is a folder, and weft replaces only an earlier sharded checkpoint: remove it or save to "
             "another path");
  const std::vector<std::string> foreign = foreign_entries(path);
  WEFT_CHECK(foreign.empty(), op, " ", path, " holds ", foreign.size(), " entr", foreign.size() == 1 ? "y" : "ies",
             " that weft's sharded checkpoint does not write (", listing(foreign), "); weft replaces only an earlier "
             "sharded checkpoint and never deletes other files: save to an empty or new folder");
}

// Removes a checkpoint folder file by file, only the layout's files; the folder goes when that
// empties it (what else appeared in it since it was checked stays, folder and all).
void remove_checkpoint_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  for (const auto& [name, ours] : sharded_folder_entries(folder))
    if (ours) std::filesystem::remove(folder / name, ec);
  std::filesystem::remove(folder, ec);  // refuses, harmlessly, a folder that is not empty
}

// Replaces `target` by `fresh` in one step (an exchange when `target` exists), then removes the old.
void swap_into_place(const std::filesystem::path& fresh, const std::filesystem::path& target) {
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    remove_checkpoint_folder(fresh);  // now the previous checkpoint
    return;
  }
  WEFT_CHECK(::rename(fresh.c_str(), target.c_str()) == 0, "[FullyShardedDataParallel.save_sharded] cannot move ",
             fresh, " to ", target, ": ", std::strerror(errno));
}

// A count in a file's metadata (a piece's start, a dimension): decimal digits, at most 18.
int64_t parse_count(const std::string& text, const std::string& key, const std::filesystem::path& path) {
  const bool digits = !text.empty() && text.size() <= 18 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  WEFT_CHECK(digits, "[FullyShardedDataParallel.load_sharded] '", key, "' in ", path,
             " must be a non-negative integer, got '", text, "'");
  return std::stoll(text);
}

// A shape as shape_text writes it ("13,7"; "" for a scalar).
Shape parse_shape(const std::string& text, const std::string& key, const std::filesystem::path& path) {
  Shape shape;
  std::stringstream ss(text);
  for (std::string d; std::getline(ss, d, ',');) shape.push_back(parse_count(d, key, path));
  return shape;
}

// "__optimizer__.state.<fqn>.<field>" -> fqn ("" when the name is not of that form).
std::string parameter_of(const std::string& name) {
  const std::string prefix = std::string(kOptimizerPrefix) + "state.";
  const size_t dot = name.rfind('.');
  if (name.rfind(prefix, 0) != 0 || dot == std::string::npos || dot < prefix.size()) return "";
  return name.substr(prefix.size(), dot - prefix.size());
}

std::string joined(const std::set<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
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
  // Every rank checks (they all see the same folders), so a refusal stops every rank here.
  check_replaceable(folder);
  check_replaceable(partial);
  pg_->barrier()->wait();
  if (rank == 0) {
    if (std::filesystem::exists(partial)) remove_checkpoint_folder(partial);
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
      if (s.is_derived(e.fqn)) continue;
      const std::string name = name_of(e.fqn);
      meta["__shape__." + name] = shape_text(e.shape);
      if (unit.byte_storage()) meta["__bytes__." + name] = dtype_name(e.dtype);
      const int64_t a = std::max(e.offset, lo), b = std::min(e.offset + e.numel, hi);
      if (b <= a) continue;
      tensors.insert(name, aligned.narrow(0, a - lo, b - a));
      meta["__start__." + name] = std::to_string(a - e.offset);
    }
  };
  for (const auto& unit : s.units) cut(*unit, unit->shard().detach(), [](const std::string& fqn) { return fqn; });
  if (rank == 0) {
    for (const auto& b : s.buffers) {
      tensors.insert(b.fqn, b.tensor.to(b.original_dtype));
      meta["__buffer__." + b.fqn] = "1";
    }
    for (const auto& [name, t] : module_->state_dict())
      if (s.is_quant_format_key(name)) {
        tensors.insert(name, t);
        meta["__buffer__." + name] = "1";
      }
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
  io::save_safetensors(shard_file(partial, rank, world), tensors, meta, io::Checksum::Crc32);
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

  // Reassemble every parameter (and optimizer tensor) whole from the pieces of all files. Every
  // recorded shape is checked against the model's before anything is allocated, so a checkpoint
  // of another model (or a damaged one) is refused by parameter names and shapes and never sizes
  // an allocation.
  std::map<std::string, Shape> model_shapes;  // parameter fqn -> shape
  std::map<std::string, DType> byte_dtypes;   // a 4-bit layer's tensor, cut by bytes -> its dtype
  for (const auto& unit : state_->units)
    for (const auto& e : unit->entries()) {
      if (state_->is_derived(e.fqn)) continue;
      model_shapes[e.fqn] = e.shape;
      if (unit->byte_storage()) byte_dtypes[e.fqn] = e.dtype;
    }
  std::map<std::string, Tensor> whole;      // name -> flattened tensor
  std::map<std::string, int64_t> covered;   // name -> elements seen
  std::map<std::string, Shape> shapes;      // every name a file records a shape for
  std::set<std::string> model_problems, optimizer_problems;
  nn::TensorDict buffers;
  optim::OptimizerState optim_state;
  std::map<std::string, std::string> user;
  NoGradGuard no_grad;
  for (int r = 0; r < saved_world; ++r) {
    const std::filesystem::path path = shard_file(folder, r, saved_world);
    const io::SafetensorsFile file = io::load_safetensors(path);
    // A file renamed or copied from another rank's (or another checkpoint's) would load as this
    // rank's pieces; its own record of who wrote it says which it is.
    const auto said = [&](const char* key) {
      const auto it = file.metadata.find(key);
      return it == file.metadata.end() ? std::string("none") : it->second;
    };
    WEFT_CHECK(said("__world_size__") == std::to_string(saved_world), op, " ", path, " was written by a run of ",
               said("__world_size__"), " ranks, but ", folder, "'s COMPLETE marker says ", saved_world,
               ": the folder mixes files of different checkpoints");
    WEFT_CHECK(said("__rank__") == std::to_string(r), op, " ", path, " holds rank ", said("__rank__"),
               "'s shard, not rank ", r, "'s: the shard files were renamed or swapped (rank r's shard must be in "
               "shard-r-of-", saved_world, ".safetensors)");
    for (const auto& [key, value] : file.metadata) {
      if (key.rfind("__shape__.", 0) == 0) {
        shapes[key.substr(10)] = parse_shape(value, key, path);
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
        WEFT_CHECK(name.rfind(kOptimizerPrefix, 0) == 0, op, " '", name, "' in ", path, " has no __start__ entry "
                   "(where its piece begins)");
        optim_state.tensors.insert(name.substr(std::string(kOptimizerPrefix).size()), t);
        continue;
      }
      const auto recorded = shapes.find(name);
      WEFT_CHECK(recorded != shapes.end(), op, " '", name, "' has no recorded shape in ", path);
      const bool optimizer_entry = name.rfind(kOptimizerPrefix, 0) == 0;
      const std::string fqn = optimizer_entry ? parameter_of(name) : name;
      const auto model_shape = model_shapes.find(fqn);
      if (model_shape == model_shapes.end() || model_shape->second != recorded->second) {
        (optimizer_entry ? optimizer_problems : model_problems)
            .insert(model_shape == model_shapes.end()
                        ? "unexpected '" + name + "'"
                        : weft::detail::cat("'", name, "' has shape ", recorded->second, ", the model ",
                                            model_shape->second));
        continue;
      }
      WEFT_CHECK(t.dim() == 1, op, " '", name, "' in ", path, " is a piece of ", t.dim(), " dimensions; expected 1");
      // A 4-bit layer's tensor comes in bytes of the dtype the model holds.
      const auto as_bytes = byte_dtypes.find(name);
      const auto said_bytes = file.metadata.find("__bytes__." + name);
      WEFT_CHECK((as_bytes != byte_dtypes.end()) == (said_bytes != file.metadata.end()) &&
                     (as_bytes == byte_dtypes.end() ||
                      (said_bytes->second == dtype_name(as_bytes->second) && t.dtype() == kUInt8)),
                 op, " '", name, "' in ", path, " is ", said_bytes == file.metadata.end() ? "not " : "",
                 "cut by bytes", said_bytes == file.metadata.end() ? "" : " of " + said_bytes->second,
                 "; the model holds it ", as_bytes == byte_dtypes.end() ? "as elements" : "as 4-bit layer bytes of ",
                 as_bytes == byte_dtypes.end() ? "" : dtype_name(as_bytes->second));
      const int64_t item = as_bytes == byte_dtypes.end() ? 1 : static_cast<int64_t>(itemsize(as_bytes->second));
      Tensor& w = whole[name];
      if (!w.defined()) w = zeros({weft::detail::shape_numel(recorded->second) * item}, TensorOptions(t.dtype()));
      const int64_t at = parse_count(start->second, "__start__." + name, path);
      WEFT_CHECK(at + t.numel() <= w.numel(), op, " '", name, "' has a piece past its end in rank ", r, "'s file");
      w.narrow(0, at, t.numel()).copy_(t);
      covered[name] += t.numel();
    }
  }
  for (const auto& [fqn, shape] : model_shapes)
    if (!shapes.count(fqn)) model_problems.insert("missing '" + fqn + "'");
  // A model of other shapes also gives its optimizer state other shapes: the parameters say why.
  const std::set<std::string>& problems = model_problems.empty() ? optimizer_problems : model_problems;
  WEFT_CHECK(problems.empty(), op, " ", folder, " does not fit the model: ", joined(problems));
  for (const auto& [name, w] : whole)
    WEFT_CHECK(covered[name] == w.numel(), op, " '", name, "' is incomplete: ", covered[name], " of ", w.numel(),
               " elements found in ", folder);

  nn::TensorDict model_state;
  for (const auto& [name, w] : whole) {
    if (name.rfind(kOptimizerPrefix, 0) == 0) optim_state.tensors.insert(name.substr(std::string(kOptimizerPrefix).size()), w.view(shapes[name]));
    else if (byte_dtypes.count(name)) model_state.insert(name, w.view(byte_dtypes[name]).view(shapes[name]));
    else model_state.insert(name, w.view(shapes[name]));
  }
  for (const auto& [name, b] : buffers) model_state.insert(name, b);
  // The model's part is checked first, by parameter names and shapes: a checkpoint of another
  // model would otherwise fail in the optimizer's state, whose shapes follow from the model, and
  // blame the optimizer. Then the optimizer loads (it changes nothing when it refuses), then the
  // model; if the model refuses after all, the optimizer gets its previous state back.
  try {
    check_full_state_dict(model_state);
  } catch (const Error& e) {
    WEFT_FAIL(op, " ", folder, " does not fit the model: ", e.what());
  }
  if (optimizer != nullptr) {
    WEFT_CHECK(!optim_state.tensors.empty() || !optim_state.scalars.empty(), op, " ", folder,
               " holds no optimizer state; it was saved without an optimizer");
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
