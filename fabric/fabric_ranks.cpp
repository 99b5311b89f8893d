// Fabric across processes: launch, the collectives, rank-aware printing, the distributed sampler
// and no_backward_sync (the single-process parts are in fabric.cpp). The ranks themselves and
// what moves between them are the strategy's (fabric/strategy.h): with single_device every
// collective has one rank and nothing to exchange.
#include <iostream>

#include "distributed/dist_env.h"
#include "fabric/fabric.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::fabric {

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
    strategy_->run_ranks(static_cast<int>(devices_));
  } else {
    strategy_->connect();  // ddp or fsdp in a group of one; nothing for single_device
  }
  launched_ = true;
}

Tensor Fabric::all_reduce(const Tensor& tensor, distributed::ReduceOp op) const {
  Tensor out = tensor.detach().contiguous().clone();
  strategy_->all_reduce(out, op);
  return out;
}

Tensor Fabric::all_gather(const Tensor& tensor) const {
  const Tensor mine = tensor.detach().contiguous();
  Shape shape{world_size()};
  shape.insert(shape.end(), mine.shape().begin(), mine.shape().end());
  Tensor out = empty({world_size() * mine.numel()}, TensorOptions(mine.dtype()));
  strategy_->all_gather(out, mine);
  return out.view(shape);
}

Tensor Fabric::broadcast(const Tensor& tensor, int src) const {
  Tensor out = tensor.detach().contiguous().clone();
  strategy_->broadcast(out, src);
  return out;
}

void Fabric::barrier() const { strategy_->barrier(); }

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
