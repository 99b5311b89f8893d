// libFuzzer target for a sharded FSDP checkpoint's metadata (Note [Sharded checkpoint layout] in
// distributed/fsdp_sharded_checkpoint.cpp): the COMPLETE marker and the layout entries of a shard
// file ("__shape__.<name>", "__start__.<name>", "__buffer__.<name>", "__rank__",
// "__world_size__", "__optimizer__.<key>"). The input edits a valid one-rank checkpoint of a
// Linear(4, 3) with its AdamW state:
//   first line   the COMPLETE marker's text ("1" in the valid one)
//   key=value    sets the shard file's metadata entry `key` ("__shape__.weight=1000000,1000000")
//   key          removes it
// Invariants: load_sharded loads or throws weft::Error (another exception, a crash, or an
// allocation sized by the file instead of the model is a finding); a refused load changes neither
// the model nor the optimizer.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "weft.h"

namespace {

using namespace weft;

// A group of one in this process (its store is never read again).
std::shared_ptr<distributed::ProcessGroup> solo_group() {
  static const std::shared_ptr<distributed::ProcessGroup> group = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("weft_fuzz_store_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    distributed::InitOptions o;
    o.init_method = "file://" + dir.string();
    o.rank = 0;
    o.world_size = 1;
    auto pg = distributed::init_process_group(o);
    std::filesystem::remove_all(dir);
    return pg;
  }();
  return group;
}

struct Wrapped {
  nn::Linear model{4, 3};
  distributed::FullyShardedDataParallel fsdp{model, solo_group()};
  optim::AdamW adam{fsdp->parameters(), {.lr = 0.1}};
  Wrapped() {
    sum(fsdp(ones({2, 4}))).backward();
    adam.step();
  }
};

// The valid checkpoint's shard file, read once.
const io::SafetensorsFile& baseline() {
  static const io::SafetensorsFile file = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("weft_fuzz_sharded_" + std::to_string(::getpid()));
    manual_seed(0);
    Wrapped source;
    source.fsdp->save_sharded(dir, &source.adam);
    io::SafetensorsFile f = io::load_safetensors(dir / "shard-0-of-1.safetensors");
    nn::TensorDict owned;  // the file goes; keep copies
    for (const auto& [name, t] : f.tensors) owned.insert(name, t.clone());
    f.tensors = owned;
    std::filesystem::remove_all(dir);
    return f;
  }();
  return file;
}

// The folder every input is written to, one per process.
std::filesystem::path work_folder() {
  static const auto dir = std::filesystem::temp_directory_path() / ("weft_fuzz_input_" + std::to_string(::getpid()));
  return dir;
}

void write_checkpoint(std::string_view input) {
  const size_t first = std::min(input.find('\n'), input.size());
  const std::string complete(input.substr(0, first));
  input.remove_prefix(std::min(first + 1, input.size()));
  io::SafetensorsMetadata metadata = baseline().metadata;
  while (!input.empty()) {
    const size_t end = std::min(input.find('\n'), input.size());
    const std::string_view line = input.substr(0, end);
    input.remove_prefix(std::min(end + 1, input.size()));
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) metadata.erase(std::string(line));
    else metadata[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  const auto folder = work_folder();
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "COMPLETE") << complete;
  io::save_safetensors(folder / "shard-0-of-1.safetensors", baseline().tensors, metadata);
}

bool same(const nn::TensorDict& a, const nn::TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const Tensor* other = b.find(name);
    if (other == nullptr || !equal(t, *other)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    write_checkpoint(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    return 0;  // metadata the writer itself refuses (a reserved or malformed entry)
  }
  manual_seed(1);
  Wrapped target;
  const nn::TensorDict model_before = target.fsdp->full_state_dict();
  const optim::OptimizerState optimizer_before = target.adam.state_dict();
  try {
    target.fsdp->load_sharded(work_folder(), &target.adam);
  } catch (const Error&) {
    const optim::OptimizerState optimizer_after = target.adam.state_dict();
    if (!same(target.fsdp->full_state_dict(), model_before) || optimizer_after.scalars != optimizer_before.scalars ||
        !same(optimizer_after.tensors, optimizer_before.tensors))
      __builtin_trap();  // a refused load changed something
  }
  return 0;
}
