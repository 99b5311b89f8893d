// Fabric across processes: launch, the collectives, rank-aware printing, the distributed sampler
// and no_backward_sync (the single-process parts are in fabric.cpp).
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "distributed/launcher.h"
#include "distributed/rendezvous.h"
#include "fabric/fabric.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

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

void Fabric::launch() {
  if (launched_) return;
  if (distributed::launched_by_launcher()) {
    const distributed::DistEnv env = distributed::read_dist_env(true);
    WEFT_CHECK(env.world_size == processes_ && env.local_world_size == devices_, "[Fabric.launch] the launcher "
               "started ", env.world_size, " ranks, ", env.local_world_size, " per node, but Fabric was configured "
               "for devices=", devices_, " and num_nodes=", processes_ / devices_);
    strategy_->connect();
  } else if (processes_ > 1) {
    WEFT_CHECK(processes_ == devices_, "[Fabric.launch] with several nodes, start this program on each node with "
               "`weft-run -n ", devices_, " --nnodes ", processes_ / devices_, " --node-rank R --master ADDR:PORT` "
               "(or torchrun)");
    distributed::LaunchOptions o;
    o.nproc_per_node = static_cast<int>(devices_);
    o.command = own_command_line();
    std::exit(distributed::launch(o).exit_code);
  } else if (strategy_->name() != "single_device") {
    strategy_->connect();  // ddp or fsdp in a group of one
  }
  launched_ = true;
}

Tensor Fabric::all_reduce(const Tensor& tensor, distributed::ReduceOp op) const {
  Tensor out = tensor.detach().contiguous().clone();
  if (strategy_->connected()) strategy_->process_group()->all_reduce(out, op)->wait();
  return out;
}

Tensor Fabric::all_gather(const Tensor& tensor) const {
  const Tensor mine = tensor.detach().contiguous();
  Shape shape{world_size()};
  shape.insert(shape.end(), mine.shape().begin(), mine.shape().end());
  if (!strategy_->connected()) return mine.clone().view(shape);
  Tensor out = empty({world_size() * mine.numel()}, TensorOptions(mine.dtype()));
  strategy_->process_group()->all_gather(out, mine.reshape({-1}))->wait();
  return out.view(shape);
}

Tensor Fabric::broadcast(const Tensor& tensor, int src) const {
  Tensor out = tensor.detach().contiguous().clone();
  if (strategy_->connected()) strategy_->process_group()->broadcast(out, src)->wait();
  return out;
}

void Fabric::barrier() const {
  if (strategy_->connected()) strategy_->process_group()->barrier()->wait();
}

void Fabric::print(const std::string& message) const {
  if (is_global_zero()) std::cout << message << std::endl;
}

distributed::DistributedSampler Fabric::distributed_sampler(int64_t size, distributed::SamplerOptions options) const {
  return distributed::DistributedSampler(size, world_size(), global_rank(), options);
}

std::shared_ptr<void> Fabric::no_backward_sync(const FabricModule& model, bool enabled) const {
  if (!enabled || !strategy_->connected()) return nullptr;
  return strategy_->no_backward_sync(*model.wrapped());
}

}  // namespace weft::fabric
