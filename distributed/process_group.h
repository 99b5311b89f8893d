// ProcessGroup: the collectives data parallelism is built from, independent of the engine that
// moves the bytes (Gloo on the CPU, NCCL on GPUs).
//
//   pg.all_reduce(grads, ReduceOp::Avg)->wait();          // every rank ends with the mean
//   auto work = pg.all_gather(full, shard);                // async: returns at once
//   ...compute...; work->wait();                           // throws if it failed or timed out
//
// Every call is asynchronous and returns a Work; collectives run in the order they were issued,
// which must be the same on every rank (as in every collective library). Tensors must be
// contiguous, on the group's device, and stay alive and untouched until the Work completes (the
// Work holds a reference, so they cannot be freed early).
//
// Note [Collective failures]: a collective fails with a weft::Error whose message names the op,
// its sequence number, this rank, and the peer that caused it when it can be told: a rank that
// exited (the launcher records how), stopped answering (no heartbeat), or has not reached this
// collective (its heartbeat reports an older sequence number). Waits have deadlines: a Work that
// has not completed within the group's timeout (plus a grace for the diagnosis) fails even if the
// engine itself never reports anything. After a failure the group is broken: every later call
// fails at once with the first error, since the peers' state is unknown.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "tensor/tensor.h"

namespace weft::distributed {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, Broadcast, Barrier };
const char* collective_name(CollectiveKind kind);

// One collective as issued: what backends execute and what the group records.
struct Collective {
  CollectiveKind kind = CollectiveKind::Barrier;
  ReduceOp op = ReduceOp::Sum;
  Tensor output;  // all_reduce and broadcast work in place on output
  Tensor input;   // all_gather / reduce_scatter only
  int root = 0;
  uint64_t seq = 0;
  // "all_reduce #12 (sum, float32, 1024 elements)"
  std::string describe() const;
};

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective completed; throws its error (Note [Collective failures]).
  virtual void wait() = 0;
  virtual bool is_completed() const = 0;
};

// What this rank issued, for benchmarks and for tests that check which collectives ran.
struct CommRecord {
  CollectiveKind kind;
  DType dtype;
  int64_t numel;       // elements of the per-rank buffer (the input for all_gather, output for reduce_scatter)
  int64_t bytes_sent;  // bytes this rank sends for it (see bytes_sent_by_rank in process_group.cpp)
};
struct CommStats {
  int64_t collectives = 0;
  int64_t bytes_sent = 0;
  std::map<CollectiveKind, int64_t> bytes_by_kind;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Milliseconds timeout() const { return timeout_; }
  virtual std::string backend_name() const = 0;
  virtual Device device() const { return kCPU; }

  // In place; `tensor` has the same shape and dtype on every rank. Avg divides the sum by size().
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // output: size()·n elements, input: n. Rank r's input lands at [r·n, (r+1)·n).
  std::shared_ptr<Work> all_gather(const Tensor& output, const Tensor& input);
  // input: size()·n elements, output: n. Rank r receives op over all ranks of input[r·n, (r+1)·n).
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum);
  // Every rank's `tensor` becomes root's.
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0);
  std::shared_ptr<Work> barrier();

  // The store the group rendezvoused through (NCCL ids, sharded checkpoints' coordination).
  const std::shared_ptr<Store>& store() const { return store_; }

  CommStats stats() const;
  void reset_stats();
  // While recording, every issued collective is appended to records() (tests of which dtypes
  // and sizes the strategies communicate in).
  void set_recording(bool on);
  std::vector<CommRecord> records() const;

  // The first failure, once the group is broken (Note [Collective failures]); empty before.
  std::string failure() const;

 protected:
  ProcessGroup(int rank, int size, Milliseconds timeout, std::shared_ptr<Store> store);
  // Starts the collective (validated, numbered) and returns its Work.
  virtual std::shared_ptr<Work> launch(Collective collective) = 0;
  // Marks the group broken with `message` (the first one wins) and returns the message kept.
  std::string mark_broken(const std::string& message);
  // The sequence number of the last collective issued on this rank.
  uint64_t issued() const { return seq_.load(); }

 private:
  std::shared_ptr<Work> issue(Collective collective);

  int rank_;
  int size_;
  Milliseconds timeout_;
  std::shared_ptr<Store> store_;
  std::atomic<uint64_t> seq_{0};

  mutable std::mutex mutex_;  // guards what follows
  CommStats stats_;
  bool recording_ = false;
  std::vector<CommRecord> records_;
  std::string failure_;
};

// The bytes one rank sends for a collective under the algorithm the backends use: a ring for
// all_reduce (2(N-1)/N·b) and all_gather ((N-1)·b of its input), pairwise exchange for
// reduce_scatter ((N-1)/N·b of its input), and a flat tree for broadcast ((N-1)·b from the root).
int64_t bytes_sent_by_rank(const Collective& c, int rank, int size);

}  // namespace weft::distributed
