// ProcessGroupStrategy (see process_group_strategy.h): joining the ranks, the collectives on their
// process group, and starting this node's ranks as copies of this program.
#include "fabric/multiprocess/process_group_strategy.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "distributed/launcher.h"
#include "tensor/error.h"

namespace weft::fabric {
namespace {

// This program and its arguments, to start copies of it: /proc/self/exe (the very binary, wherever
// it was started from) and the arguments of /proc/self/cmdline.
std::vector<std::string> own_command_line() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  WEFT_CHECK(n > 0, "[Fabric.launch] cannot find this program's binary (/proc/self/exe)");
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> command{std::string(exe, static_cast<size_t>(n))};
  size_t start = all.find('\0');  // skip argv[0]
  while (start != std::string::npos && start + 1 < all.size()) {
    const size_t end = all.find('\0', start + 1);
    command.push_back(all.substr(start + 1, end - start - 1));
    start = end;
  }
  return command;
}

}  // namespace

void ProcessGroupStrategy::connect() {
  distributed::InitOptions init;
  init.timeout = options_.timeout;
  if (distributed::launched_by_launcher()) {
    env_ = distributed::read_dist_env(true);
    pg_ = distributed::init_process_group(init);
  } else {  // one process on its own: a group of one, whose store is never read again
    char folder[] = "/tmp/weft-solo-XXXXXX";
    WEFT_CHECK(::mkdtemp(folder) != nullptr, "[Fabric.launch] cannot create a temporary folder");
    init.init_method = std::string("file://") + folder;
    init.rank = 0;
    init.world_size = 1;
    pg_ = distributed::init_process_group(init);
    std::filesystem::remove_all(folder);
  }
  // Precision code that must agree across ranks (FP8 amax) reduces through this group.
  std::weak_ptr<distributed::ProcessGroup> weak = pg_;
  cross_rank_ = std::make_unique<precision::CrossRankReductionGuard>([weak](const Tensor& values) {
    if (auto pg = weak.lock()) pg->all_reduce(values, distributed::ReduceOp::Max)->wait();
  });
}

void ProcessGroupStrategy::run_ranks(int nproc_per_node) {
  distributed::LaunchOptions o;
  o.nproc_per_node = nproc_per_node;
  o.command = own_command_line();
  std::exit(distributed::launch(o).exit_code);
}

void ProcessGroupStrategy::all_reduce(const Tensor& tensor, distributed::ReduceOp op) {
  if (pg_) pg_->all_reduce(tensor, op)->wait();
}

void ProcessGroupStrategy::all_gather(const Tensor& out, const Tensor& input) {
  if (pg_) pg_->all_gather(out, input.reshape({-1}))->wait();
  else Strategy::all_gather(out, input);
}

void ProcessGroupStrategy::broadcast(const Tensor& tensor, int src) {
  if (pg_) pg_->broadcast(tensor, src)->wait();
}

void ProcessGroupStrategy::barrier() {
  if (pg_) pg_->barrier()->wait();
}

}  // namespace weft::fabric
