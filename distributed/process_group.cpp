// ProcessGroup's backend-neutral half: argument checks, sequence numbers, statistics, and the
// broken state (Note [Collective failures] in process_group.h).
#include "distributed/process_group.h"

#include <sstream>

#include "tensor/enum_check.h"
#include "tensor/error.h"

namespace weft::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Barrier: return "barrier";
  }
  return "?";
}

std::string Collective::describe() const {
  std::ostringstream os;
  os << collective_name(kind) << " #" << seq;
  if (kind == CollectiveKind::Barrier) return os.str();
  os << " (";
  if (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter) os << reduce_op_name(op) << ", ";
  if (kind == CollectiveKind::Broadcast) os << "root " << root << ", ";
  const Tensor& t = kind == CollectiveKind::AllGather ? input : output;
  os << t.dtype() << ", " << t.numel() << " elements)";
  return os.str();
}

int64_t bytes_sent_by_rank(const Collective& c, int rank, int size) {
  const int64_t n = size;
  switch (c.kind) {
    case CollectiveKind::AllReduce: return 2 * (n - 1) * static_cast<int64_t>(c.output.nbytes()) / n;
    case CollectiveKind::AllGather: return (n - 1) * static_cast<int64_t>(c.input.nbytes());
    case CollectiveKind::ReduceScatter: return (n - 1) * static_cast<int64_t>(c.input.nbytes()) / n;
    case CollectiveKind::Broadcast: return rank == c.root ? (n - 1) * static_cast<int64_t>(c.output.nbytes()) : 0;
    case CollectiveKind::Barrier: return 0;
  }
  return 0;
}

ProcessGroup::ProcessGroup(int rank, int size, Milliseconds timeout, std::shared_ptr<Store> store)
    : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)) {
  WEFT_CHECK(size >= 1 && rank >= 0 && rank < size, "[ProcessGroup] expected 0 <= rank < world size, got rank ",
             rank, " of ", size);
  WEFT_CHECK(timeout.count() > 0, "[ProcessGroup] expected a positive timeout, got ", timeout.count(), " ms");
}

namespace {

void check_buffer(const char* op, const char* what, const Tensor& t, Device device) {
  WEFT_CHECK(t.defined(), "[", op, "] expected a tensor for ", what, ", got an undefined one");
  WEFT_CHECK(!t.is_uninitialized(), "[", op, "] ", what, " is an uninitialized (lazy) tensor; materialize it first");
  WEFT_CHECK(t.is_contiguous(), "[", op, "] expected a contiguous ", what, ", got strides ", t.strides());
  WEFT_CHECK(t.device() == device, "[", op, "] expected ", what, " on ", device, ", got ", t.device());
}

void check_reducible(const char* op, DType dtype, ReduceOp reduce) {
  weft::detail::check_enum(reduce, 4, op, "ReduceOp");  // Sum, Avg, Max, Min
  WEFT_CHECK(dtype != DType::Bool && dtype != DType::Float8E4M3FN && dtype != DType::Float8E5M2,
             "[", op, "] cannot reduce ", dtype, " tensors; convert them to a wider type first");
  WEFT_CHECK(reduce != ReduceOp::Avg || is_floating(dtype), "[", op, "] avg needs a floating tensor, got ", dtype);
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_buffer("all_reduce", "the tensor", tensor, device());
  check_reducible("all_reduce", tensor.dtype(), op);
  Collective c;
  c.kind = CollectiveKind::AllReduce;
  c.op = op;
  c.output = tensor;
  return issue(std::move(c));
}

std::shared_ptr<Work> ProcessGroup::all_gather(const Tensor& output, const Tensor& input) {
  check_buffer("all_gather", "the output", output, device());
  check_buffer("all_gather", "the input", input, device());
  WEFT_CHECK(output.dtype() == input.dtype(), "[all_gather] output and input dtypes differ: ", output.dtype(),
             " and ", input.dtype());
  WEFT_CHECK(output.numel() == input.numel() * size_, "[all_gather] expected an output of ", size_, " x ",
             input.numel(), " = ", input.numel() * size_, " elements, got ", output.numel());
  Collective c;
  c.kind = CollectiveKind::AllGather;
  c.output = output;
  c.input = input;
  return issue(std::move(c));
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_buffer("reduce_scatter", "the output", output, device());
  check_buffer("reduce_scatter", "the input", input, device());
  check_reducible("reduce_scatter", input.dtype(), op);
  WEFT_CHECK(output.dtype() == input.dtype(), "[reduce_scatter] output and input dtypes differ: ", output.dtype(),
             " and ", input.dtype());
  WEFT_CHECK(input.numel() == output.numel() * size_, "[reduce_scatter] expected an input of ", size_, " x ",
             output.numel(), " = ", output.numel() * size_, " elements, got ", input.numel());
  Collective c;
  c.kind = CollectiveKind::ReduceScatter;
  c.op = op;
  c.output = output;
  c.input = input;
  return issue(std::move(c));
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_buffer("broadcast", "the tensor", tensor, device());
  WEFT_CHECK(root >= 0 && root < size_, "[broadcast] expected a root rank in [0, ", size_, "), got ", root);
  Collective c;
  c.kind = CollectiveKind::Broadcast;
  c.output = tensor;
  c.root = root;
  return issue(std::move(c));
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  Collective c;
  c.kind = CollectiveKind::Barrier;
  return issue(std::move(c));
}

std::shared_ptr<Work> ProcessGroup::issue(Collective c) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    WEFT_CHECK(failure_.empty(), "[", collective_name(c.kind), "] the process group is broken by an earlier "
               "failure: ", failure_);
  }
  c.seq = ++seq_;
  const int64_t sent = bytes_sent_by_rank(c, rank_, size_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.collectives;
    stats_.bytes_sent += sent;
    stats_.bytes_by_kind[c.kind] += sent;
    if (recording_) {
      const Tensor& t = c.kind == CollectiveKind::ReduceScatter || c.kind == CollectiveKind::AllReduce ||
                                c.kind == CollectiveKind::Broadcast
                            ? c.output
                            : c.input;
      records_.push_back({c.kind, t.defined() ? t.dtype() : DType::UInt8, t.defined() ? t.numel() : 0, sent});
    }
  }
  return launch(std::move(c));
}

CommStats ProcessGroup::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void ProcessGroup::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = CommStats{};
}

void ProcessGroup::set_recording(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  recording_ = on;
  if (on) records_.clear();
}

std::vector<CommRecord> ProcessGroup::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

std::string ProcessGroup::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::string ProcessGroup::mark_broken(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty()) failure_ = message;
  return failure_;
}

}  // namespace weft::distributed
