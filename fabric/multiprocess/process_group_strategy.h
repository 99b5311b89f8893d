// ProcessGroupStrategy: what ddp and fsdp share, a strategy whose ranks are processes joined by a
// distributed::ProcessGroup (Gloo). Part of the weft_distributed library (Note [Strategy table] in
// fabric/strategy.h): connect() joins the group the launcher's environment describes (or a group
// of one when no launcher started this process), the collectives run on it, and run_ranks()
// starts this node's ranks as copies of the program.
#pragma once

#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "fabric/strategy.h"
#include "precision/cross_rank.h"

namespace weft::fabric {

class ProcessGroupStrategy : public Strategy {
 public:
  void connect() override;
  bool connected() const override { return pg_ != nullptr; }
  int global_rank() const override { return pg_ ? pg_->rank() : 0; }
  int world_size() const override { return pg_ ? pg_->size() : 1; }
  int local_rank() const override { return env_.local_rank; }
  int node_rank() const override {
    return env_.local_world_size > 0 ? global_rank() / env_.local_world_size : 0;
  }
  [[noreturn]] void run_ranks(int nproc_per_node) override;

  void all_reduce(const Tensor& tensor, distributed::ReduceOp op) override;
  void all_gather(const Tensor& out, const Tensor& input) override;
  void broadcast(const Tensor& tensor, int src) override;
  void barrier() override;

 protected:
  explicit ProcessGroupStrategy(StrategyOptions options) : Strategy(std::move(options)) {}

  distributed::DistEnv env_;
  std::shared_ptr<distributed::ProcessGroup> pg_;
  std::unique_ptr<precision::CrossRankReductionGuard> cross_rank_;
};

std::unique_ptr<Strategy> make_ddp_strategy(StrategyOptions options, const std::string& precision);
std::unique_ptr<Strategy> make_fsdp_strategy(StrategyOptions options, const std::string& precision);

}  // namespace weft::fabric
