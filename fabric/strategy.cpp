// The strategies' shared behaviour, single_device, and the table the multi-process strategies
// register in (Note [Strategy table] in strategy.h; ddp and fsdp are in fabric/multiprocess/).
#include "fabric/strategy.h"

#include <map>
#include <mutex>

#include "distributed/sharded_layout.h"
#include "optim/clip_grad.h"
#include "tensor/error.h"

namespace weft::fabric {
namespace {

class SingleDeviceStrategy final : public Strategy {
 public:
  explicit SingleDeviceStrategy(StrategyOptions options) : Strategy(std::move(options)) {}
};

// The strategies the weft_distributed library provides.
constexpr const char* kMultiProcessStrategies[] = {"ddp", "fsdp"};

struct StrategyTable {
  std::mutex mutex;
  std::map<std::string, StrategyFactory> factories;
};

StrategyTable& strategy_table() {
  static StrategyTable table;
  return table;
}

}  // namespace

void Strategy::run_ranks(int nproc_per_node) {
  WEFT_FAIL("[Fabric.launch] strategy '", name(), "' runs one process, got ", nproc_per_node, " per node");
}

void Strategy::all_gather(const Tensor& out, const Tensor& input) { Tensor(out).copy_(input.reshape({-1})); }

double Strategy::clip_grad_norm(nn::Module&, const std::vector<Tensor>& params, double max_norm, double norm_type,
                                bool error_if_nonfinite) {
  return optim::clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite);
}

void Strategy::clip_grad_value(nn::Module&, const std::vector<Tensor>& params, double clip_value) {
  optim::clip_grad_value_(params, clip_value);
}

std::shared_ptr<void> Strategy::no_backward_sync(nn::Module&) { return nullptr; }

void Strategy::save(const std::filesystem::path& path, const nn::Module& module, nn::Module&,
                    const optim::Optimizer* optimizer, const io::SafetensorsMetadata& metadata) {
  if (global_rank() == 0) io::save_checkpoint(path, module, optimizer, metadata);
  barrier();  // nobody reads the file before it is complete
}

namespace {

// A folder is never a checkpoint file; a sharded one is named as such, with the ways to load it.
void check_not_sharded(const std::filesystem::path& path, const std::string& strategy) {
  if (!distributed::is_sharded_checkpoint(path)) return;
  WEFT_FAIL("[Fabric.load] '", path.string(), "' is a sharded checkpoint (a folder of per-rank shards, as "
            "Fabric({.strategy = \"fsdp\", .state_dict_type = \"sharded\"}) saves it), and the ", strategy,
            " strategy loads single-file checkpoints only: load it with strategy \"fsdp\" (at any number of ranks, "
            "one included), or convert it to one file by loading it there and saving with state_dict_type \"full\"");
}

}  // namespace

io::SafetensorsMetadata Strategy::read_metadata(const std::filesystem::path& path) {
  check_not_sharded(path, options_.name);
  return io::read_checkpoint(path).metadata;
}

void Strategy::load(const std::filesystem::path& path, nn::Module& module, nn::Module&, optim::Optimizer* optimizer) {
  check_not_sharded(path, options_.name);
  io::apply_checkpoint(io::read_checkpoint(path), module, optimizer);
}

void register_strategy(const std::string& name, StrategyFactory factory) {
  StrategyTable& table = strategy_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  WEFT_CHECK(name != "single_device" && name != "auto" && table.factories.count(name) == 0,
             "[register_strategy] strategy '", name, "' is already registered");
  table.factories.emplace(name, std::move(factory));
}

bool strategy_available(const std::string& name) {
  if (name == "single_device") return true;
  StrategyTable& table = strategy_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.factories.count(name) > 0;
}

std::unique_ptr<Strategy> make_strategy(StrategyOptions options, const std::string& precision) {
  if (options.name == "single_device") return std::make_unique<SingleDeviceStrategy>(std::move(options));
  StrategyFactory factory;
  {
    StrategyTable& table = strategy_table();
    std::lock_guard<std::mutex> lock(table.mutex);
    if (const auto it = table.factories.find(options.name); it != table.factories.end()) factory = it->second;
  }
  if (factory) return factory(std::move(options), precision);
  for (const char* multi : kMultiProcessStrategies)
    WEFT_CHECK(options.name != multi, "[Fabric] strategy '", multi, "' needs weft_distributed: link weft::distributed "
               "(CMake: target_link_libraries(... weft::distributed); pkg-config: weft-distributed)");
  WEFT_FAIL("[Fabric] expected strategy 'auto', 'single_device', 'ddp' or 'fsdp', got '", options.name, "'");
}

}  // namespace weft::fabric
