// The Gloo backend (see gloo_process_group.h).
#include "distributed/gloo_process_group.h"

#include <sched.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "distributed/comm_thread.h"
#include "distributed/health.h"
#include "distributed/reduce_kernels.h"
#include "tensor/error.h"

namespace weft::distributed {
namespace detail {

void rendezvous_barrier(Store& store, int rank, int size, Milliseconds timeout, const char* who) {
  store.set("joined/" + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("joined/" + std::to_string(r));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (int r = 0; r < size; ++r)
        if (!store.check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      WEFT_FAIL("[", who, "] rank(s) ", missing, " of ", size, " did not join the rendezvous within ", timeout.count(),
                " ms (", store.describe(), "); rank ", rank, " gives up");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace detail

namespace {

// The ids of this process's threads.
std::set<pid_t> thread_ids() {
  std::set<pid_t> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error))
    ids.insert(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  return ids;
}

// Note [Gloo's event loop never preempts]
// Gloo's TCP device runs one event-loop thread. When a socket has data and the pair's mutex is
// held by another thread (ours, posting a send or a receive), the loop skips the event and calls
// epoll_wait again, which reports the same event at once: it spins until the holder releases the
// mutex. When the loop shares a CPU with the holder (ranks bound to one CPU each, or a busy
// machine), the loop, woken by the data, preempts the holder and spins through its whole time
// slice: an FSDP step of the example MLP took 20 ms bound against 10 ms unbound. Under
// SCHED_BATCH a thread keeps its fair share of the CPU but never preempts another on waking, so
// the holder finishes first (the same step: 3.4 ms bound, 4.8 ms unbound). The thread is also
// named, as ours are, for top, perf and gdb. It is found as the one thread that creating the
// device added to the process; should another thread of the program start meanwhile, neither is
// touched (the loop only keeps its default policy).
void settle_loop_thread(const std::set<pid_t>& before) {
  std::set<pid_t> added;
  std::ranges::set_difference(thread_ids(), before, std::inserter(added, added.end()));
  if (added.size() != 1) return;
  const pid_t loop = *added.begin();
  const sched_param param{};
  sched_setscheduler(loop, SCHED_BATCH, &param);
  std::ofstream("/proc/self/task/" + std::to_string(loop) + "/comm") << "gloo-loop";
}

// Gloo's rendezvous talks to our store through this.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(distributed::Store& store, Milliseconds timeout) : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get(key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

 private:
  distributed::Store& store_;
  Milliseconds timeout_;
};

// Calls f with a pointer of the C++ type Gloo should see for `dtype` (narrow floats as uint16_t).
template <class F>
void with_element_type(DType dtype, void* data, F&& f) {
  switch (dtype) {
    case DType::Float64: return f(static_cast<double*>(data));
    case DType::Float32: return f(static_cast<float*>(data));
    case DType::Float16:
    case DType::BFloat16: return f(static_cast<uint16_t*>(data));
    case DType::Int32: return f(static_cast<int32_t*>(data));
    case DType::Int64: return f(static_cast<int64_t*>(data));
    case DType::Int8: return f(static_cast<int8_t*>(data));
    case DType::UInt8: return f(static_cast<uint8_t*>(data));
    default: WEFT_FAIL("[all_reduce] cannot reduce ", dtype, " buffers");
  }
}

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

}  // namespace

struct GlooProcessGroup::State {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::unique_ptr<detail::HealthMonitor> health;
  std::unique_ptr<detail::CommThread> comm;
  int size = 1;
  std::vector<uint8_t> scratch;  // the peer's copy in an all-reduce of a pair; only grows

  // Slots of a pair's all-reduce: a prefix none of Gloo's collectives uses (they take 0x01–0x08).
  static constexpr uint8_t kPairAllReduceSlotPrefix = 0x40;
  // Segments large enough that the per-message cost (a ready message, wake-ups) stays small, so
  // that combining one can still overlap receiving the next in a large buffer. 1 MiB measured
  // ~15 % faster than 256 KiB on the MLP's 2.68 MB.
  static constexpr size_t kPairSegmentBytes = size_t{1} << 20;
  static constexpr size_t kPairMaxSegments = 16;

  // Runs one collective on the communication thread. A group of one only copies.
  void run(const Collective& c) {
    switch (c.kind) {
      case CollectiveKind::AllReduce: return all_reduce(c);
      case CollectiveKind::AllGather: return all_gather(c);
      case CollectiveKind::ReduceScatter: return reduce_scatter(c);
      case CollectiveKind::Broadcast: return broadcast(c);
      case CollectiveKind::Barrier: return barrier(c);
    }
  }

  void all_reduce(const Collective& c) {
    const auto count = static_cast<size_t>(c.output.numel());
    if (size == 1 || count == 0) return;
    if (size == 2) return all_reduce_pair(c);
    const DType dtype = c.output.dtype();
    const ReduceOp op = c.op;
    with_element_type(dtype, c.output.data_ptr(), [&](auto* ptr) {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(ptr, count);
      opts.setReduceFunction([dtype, op](void* out, const void* a, const void* b, size_t n) {
        detail::combine(dtype, op, out, a, b, n);
      });
      opts.setTag(static_cast<uint32_t>(c.seq));
      gloo::allreduce(opts);
    });
    if (op == ReduceOp::Avg) detail::divide(dtype, c.output.data_ptr(), count, size);
  }

  // Note [All-reduce of a pair]: Gloo's ring sends each rank's data in two dependent rounds, a
  // reduce-scatter of the halves and then an all-gather of the reduced halves, each round's
  // segments waiting for the receiver's ready message. Between two ranks the same bytes go in one
  // round: each rank sends its whole buffer and combines the peer's copy, segment by segment as it
  // arrives. On loopback TCP, for the example MLP's 2.68 MB of gradients on a 2-core EPYC: median
  // 3.7 ms against 5.3 ms for the ring (six runs each), and its DDP step 11.2 against 12.6 ms; the
  // rest is the kernel copying through sockets. Both ranks compute own ⊕ peer's; + is commutative,
  // and max and min are written to be (Note [Max and min of floats on every rank]), so both get
  // the same bits. A segment is combined in place only
  // after its send has left, so the peer never reads a half-combined buffer.
  void all_reduce_pair(const Collective& c) {
    const DType dtype = c.output.dtype();
    const size_t item = itemsize(dtype), count = static_cast<size_t>(c.output.numel()), nbytes = count * item;
    if (scratch.size() < nbytes) scratch.resize(nbytes);
    const int peer = 1 - context->rank;
    const uint64_t slot = gloo::Slot::build(kPairAllReduceSlotPrefix, static_cast<uint32_t>(c.seq));
    auto own = context->createUnboundBuffer(c.output.data_ptr(), nbytes);
    auto theirs = context->createUnboundBuffer(scratch.data(), nbytes);
    const size_t segments = std::clamp<size_t>(nbytes / kPairSegmentBytes, 1, kPairMaxSegments);
    const size_t per_segment = (count + segments - 1) / segments;
    auto range = [&](size_t s) {
      const size_t begin = std::min(count, s * per_segment), end = std::min(count, begin + per_segment);
      return std::pair<size_t, size_t>{begin, end - begin};
    };
    for (size_t s = 0; s < segments; ++s)
      if (range(s).second > 0) theirs->recv(peer, slot, range(s).first * item, range(s).second * item);
    for (size_t s = 0; s < segments; ++s)
      if (range(s).second > 0) own->send(peer, slot, range(s).first * item, range(s).second * item);
    const auto timeout = context->getTimeout();
    for (size_t s = 0; s < segments; ++s) {
      const auto [begin, length] = range(s);
      if (length == 0) continue;
      theirs->waitRecv(timeout);
      own->waitSend(timeout);
      uint8_t* mine = bytes_of(c.output) + begin * item;
      const uint8_t* peers = scratch.data() + begin * item;
      if (c.op == ReduceOp::Avg) detail::sum_and_divide(dtype, mine, mine, peers, length, size);
      else detail::combine(dtype, c.op, mine, mine, peers, length);
    }
  }

  void all_gather(const Collective& c) {
    const size_t nbytes = c.input.nbytes();
    if (size == 1) {
      if (nbytes > 0) std::memcpy(c.output.data_ptr(), c.input.data_ptr(), nbytes);
      return;
    }
    if (nbytes == 0) return;
    gloo::AllgatherOptions opts(context);
    opts.setInput(bytes_of(c.input), nbytes);
    opts.setOutput(bytes_of(c.output), nbytes * size);
    opts.setTag(static_cast<uint32_t>(c.seq));
    gloo::allgather(opts);
  }

  // Block r of every rank's input goes to rank r (an all-to-all); each rank then reduces the
  // blocks it received, in rank order.
  void reduce_scatter(const Collective& c) {
    const auto block = static_cast<size_t>(c.output.numel());
    if (block == 0) return;
    if (size == 1) {
      detail::reduce_blocks(c.output.dtype(), c.op, c.output.data_ptr(), c.input.data_ptr(), 1, block);
      return;
    }
    std::vector<uint8_t> received(c.input.nbytes());
    gloo::AlltoallOptions opts(context);
    opts.setInput(bytes_of(c.input), c.input.nbytes());
    opts.setOutput(received.data(), received.size());
    opts.setTag(static_cast<uint32_t>(c.seq));
    gloo::alltoall(opts);
    detail::reduce_blocks(c.output.dtype(), c.op, c.output.data_ptr(), received.data(), size, block);
  }

  void broadcast(const Collective& c) {
    if (size == 1 || c.output.nbytes() == 0) return;
    gloo::BroadcastOptions opts(context);
    opts.setOutput(bytes_of(c.output), c.output.nbytes());
    opts.setRoot(c.root);
    opts.setTag(static_cast<uint32_t>(c.seq));
    gloo::broadcast(opts);
  }

  void barrier(const Collective& c) {
    if (size == 1) return;
    gloo::BarrierOptions opts(context);
    opts.setTag(static_cast<uint32_t>(c.seq));
    gloo::barrier(opts);
  }
};

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<Store> store, std::shared_ptr<Store> job_store, int rank, int size,
                                   GlooOptions options)
    : ProcessGroup(rank, size, options.timeout, std::move(store)), state_(std::make_unique<State>()) {
  std::signal(SIGPIPE, SIG_IGN);
  state_->size = size;
  if (size > 1) {
    detail::rendezvous_barrier(*this->store(), rank, size, options.timeout, "init_process_group");
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address.empty() ? "127.0.0.1" : options.address;
    try {
      const std::set<pid_t> before = thread_ids();
      state_->device = gloo::transport::tcp::CreateDevice(attr);
      settle_loop_thread(before);
      state_->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      state_->context->setTimeout(options.timeout);
      GlooStore adapter(*this->store(), options.timeout);
      state_->context->connectFullMesh(adapter, state_->device);
    } catch (const std::exception& e) {
      WEFT_FAIL("[init_process_group] rank ", rank, " could not connect to the other ", size - 1, " rank(s) from ",
                attr.hostname, ": ", e.what());
    }
    state_->health = std::make_unique<detail::HealthMonitor>(job_store, rank, size, options.timeout,
                                                             [this] { return issued(); });
  }
  // The diagnosis after a failure takes up to ~3 heartbeat intervals; the grace covers it.
  const auto interval = state_->health ? state_->health->interval() : Milliseconds(0);
  const Milliseconds budget = options.timeout + interval * 4 + Milliseconds(2000);
  state_->comm = std::make_unique<detail::CommThread>(
      [this](const Collective& c) { state_->run(c); },
      [this](const Collective& c, const std::string& what) {
        const std::string cause = state_->health ? state_->health->diagnose(c.seq) : std::string();
        return mark_broken(weft::detail::cat("[", collective_name(c.kind), "] ", c.describe(), " failed on rank ",
                                             this->rank(), " of ", this->size(), ": ",
                                             cause.empty() ? "no peer is known to have failed" : cause,
                                             " (gloo: ", what, ")"));
      },
      budget);
}

GlooProcessGroup::~GlooProcessGroup() {
  state_->comm.reset();
  state_->health.reset();
  state_->context.reset();
  state_->device.reset();
}

std::shared_ptr<Work> GlooProcessGroup::launch(Collective collective) {
  return state_->comm->enqueue(std::move(collective));
}

}  // namespace weft::distributed
