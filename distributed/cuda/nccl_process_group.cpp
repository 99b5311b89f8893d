// The NCCL backend (see nccl_process_group.h).
#include "distributed/cuda/nccl_process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "distributed/health.h"
#include "tensor/error.h"

namespace weft::distributed {
namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t err, const char* what) {
  WEFT_CHECK(err == cudaSuccess, "[nccl] ", what, " failed: ", cudaGetErrorString(err));
}

void check_nccl(ncclResult_t r, const char* what) {
  WEFT_CHECK(r == ncclSuccess || r == ncclInProgress, "[nccl] ", what, " failed: ", ncclGetErrorString(r));
}

ncclDataType_t nccl_dtype(DType d) {
  switch (d) {
    case DType::Float64: return ncclFloat64;
    case DType::Float32: return ncclFloat32;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    default: WEFT_FAIL("[nccl] cannot communicate ", d, " tensors");
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

}  // namespace

struct NcclProcessGroup::State {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* barrier_buffer = nullptr;  // one float on the device, for barrier()
  Milliseconds timeout{};
  std::unique_ptr<detail::HealthMonitor> health;
  std::function<std::string(const std::string&)> mark_broken;
  bool aborted = false;

  // Polls the communicator until it leaves ncclInProgress or the deadline passes, and returns its
  // state then (still ncclInProgress past the deadline), or the error of the poll itself.
  ncclResult_t poll_until(Clock::time_point deadline) const {
    while (true) {
      ncclResult_t state = ncclInProgress;
      const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
      if (asked != ncclSuccess && asked != ncclInProgress) return asked;
      if (state != ncclInProgress || Clock::now() > deadline) return state;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Waits for the communicator to be ready; aborts it on an error or past the deadline (`context`
  // says what the caller was waiting for).
  void await_ready(Clock::time_point deadline, const char* what, const std::string& context) {
    const ncclResult_t state = poll_until(deadline);
    if (state == ncclInProgress)
      abort_and_fail(what, weft::detail::cat(" did not finish within ", timeout.count(), " ms (", context, ")"));
    if (state != ncclSuccess)
      abort_and_fail(what, weft::detail::cat(" failed: ", ncclGetErrorString(state), " (", context, ")"));
  }

  [[noreturn]] void abort_and_fail(const char* what, const std::string& why) {
    ncclCommAbort(comm);
    aborted = true;
    WEFT_FAIL("[nccl] ", what, why);
  }
};

namespace {

// A collective enqueued on the communication stream; wait() polls its event with a deadline.
struct NcclWork final : Work {
  Collective collective;  // keeps the buffers alive until the collective completed
  std::shared_ptr<NcclProcessGroup::State> state;
  cudaEvent_t done = nullptr;
  Clock::time_point started = Clock::now();
  bool completed = false;

  ~NcclWork() override {
    if (done != nullptr) cudaEventDestroy(done);
  }

  void wait() override {
    if (completed) return;
    while (true) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) fail(cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(state->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) fail(ncclGetErrorString(async));
      if (Clock::now() > started + state->timeout) fail("timed out");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    // Whatever the current stream runs next sees the collective's results.
    check_cuda(cudaStreamWaitEvent(cudaStreamPerThread, done, 0), "cudaStreamWaitEvent");
    completed = true;
    collective = Collective{};
  }

  bool is_completed() const override { return completed || cudaEventQuery(done) == cudaSuccess; }

  [[noreturn]] void fail(const std::string& what) {
    if (!state->aborted) {
      ncclCommAbort(state->comm);
      state->aborted = true;
    }
    const std::string cause = state->health ? state->health->diagnose(collective.seq) : std::string();
    WEFT_FAIL(state->mark_broken(weft::detail::cat("[", collective_name(collective.kind), "] ", collective.describe(),
                                                   " failed: ", cause.empty() ? "no peer is known to have failed" : cause,
                                                   " (nccl: ", what, ")")));
  }
};

}  // namespace

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<Store> store, std::shared_ptr<Store> job_store, int rank, int size,
                                   Milliseconds timeout, int device)
    : ProcessGroup(rank, size, timeout, std::move(store)), state_(std::make_shared<State>()) {
  State& s = *state_;
  s.device = device;
  s.timeout = timeout;
  s.mark_broken = [this](const std::string& message) { return mark_broken(message); };
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  WEFT_CHECK(found == cudaSuccess && count > device, "[init_process_group] backend 'nccl' needs GPU ", device,
             " on this machine: ", found == cudaSuccess ? std::to_string(count) + " GPU(s) visible"
                                                       : std::string(cudaGetErrorString(found)));
  check_cuda(cudaSetDevice(device), "cudaSetDevice");

  // Rank 0 mints the communicator's id; the others read it from the store.
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    this->store()->set("nccl_id", std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  } else {
    const std::string bytes = this->store()->get("nccl_id", timeout);
    WEFT_CHECK(bytes.size() == sizeof(id), "[init_process_group] the store's nccl_id has ", bytes.size(),
               " bytes, expected ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  check_nccl(ncclCommInitRankConfig(&s.comm, size, id, rank, &config), "ncclCommInitRankConfig");
  s.await_ready(Clock::now() + timeout, "ncclCommInitRankConfig",
                weft::detail::cat("rank ", rank, " of ", size, ": every rank must join, each on its own GPU"));
  check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc(&s.barrier_buffer, sizeof(float)), "cudaMalloc");
  if (size > 1) s.health = std::make_unique<detail::HealthMonitor>(job_store, rank, size, timeout, [this] { return issued(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  State& s = *state_;
  s.health.reset();
  // An aborted communicator is already freed (ncclCommAbort). A live one is non-blocking: its
  // finalize flushes the queued work in the background and must have completed before destroy
  // (NCCL refuses, and leaks it, otherwise); past the timeout it is aborted instead.
  if (s.comm != nullptr && !s.aborted) {
    ncclResult_t state = ncclCommFinalize(s.comm);
    if (state == ncclInProgress) state = s.poll_until(Clock::now() + s.timeout);
    if (state == ncclSuccess) {
      ncclCommDestroy(s.comm);
    } else {
      ncclCommAbort(s.comm);
    }
  }
  if (s.barrier_buffer != nullptr) cudaFree(s.barrier_buffer);
  if (s.stream != nullptr) cudaStreamDestroy(s.stream);
}

Device NcclProcessGroup::device() const { return Device(DeviceType::CUDA, state_->device); }

std::shared_ptr<Work> NcclProcessGroup::launch(Collective c) {
  State& s = *state_;
  WEFT_CHECK(!s.aborted, "[", collective_name(c.kind), "] the NCCL communicator was aborted by an earlier failure");
  auto work = std::make_shared<NcclWork>();
  work->state = state_;
  // The inputs are ready once what the current stream queued so far has run.
  cudaEvent_t inputs_ready;
  check_cuda(cudaEventCreateWithFlags(&inputs_ready, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventRecord(inputs_ready, cudaStreamPerThread), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(s.stream, inputs_ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(inputs_ready);
  // Elements per rank; a barrier has no tensors.
  const auto n = static_cast<size_t>(c.kind == CollectiveKind::Barrier     ? 0
                                     : c.kind == CollectiveKind::AllGather ? c.input.numel()
                                                                           : c.output.numel());
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      check_nccl(ncclAllReduce(c.output.data_ptr(), c.output.data_ptr(), n, nccl_dtype(c.output.dtype()), nccl_op(c.op),
                               s.comm, s.stream), "ncclAllReduce");
      break;
    case CollectiveKind::AllGather:
      check_nccl(ncclAllGather(c.input.data_ptr(), c.output.data_ptr(), n, nccl_dtype(c.input.dtype()), s.comm, s.stream),
                 "ncclAllGather");
      break;
    case CollectiveKind::ReduceScatter:
      check_nccl(ncclReduceScatter(c.input.data_ptr(), c.output.data_ptr(), n, nccl_dtype(c.output.dtype()),
                                   nccl_op(c.op), s.comm, s.stream), "ncclReduceScatter");
      break;
    case CollectiveKind::Broadcast:
      check_nccl(ncclBroadcast(c.output.data_ptr(), c.output.data_ptr(), n, nccl_dtype(c.output.dtype()), c.root, s.comm,
                               s.stream), "ncclBroadcast");
      break;
    case CollectiveKind::Barrier:
      check_nccl(ncclAllReduce(s.barrier_buffer, s.barrier_buffer, 1, ncclFloat32, ncclSum, s.comm, s.stream),
                 "ncclAllReduce (barrier)");
      break;
  }
  check_cuda(cudaEventCreateWithFlags(&work->done, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventRecord(work->done, s.stream), "cudaEventRecord");
  work->collective = std::move(c);
  return work;
}

}  // namespace weft::distributed
