// weft::cuda: the CUDA devices as a program sees them — availability, streams, events, memory
// statistics, pinned host memory, the matmul precision flag and CUDA graphs.
//
// This header includes no CUDA header and every build has it. In a build without CUDA
// (tensor/cuda_stub.cpp) is_available() is false, device_count() is 0 and every other call throws
// "[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)". In a CUDA build on a
// machine without a driver or GPU, is_available() is false and calls that need a device throw
// naming the CUDA error.
//
// Note [Streams]: every device has a current stream per thread, initially the device's default
// stream, which weft creates non-blocking (weft never queues work on CUDA's legacy stream 0, so
// nothing synchronises behind its back). Kernels,
// copies and cuBLAS calls on a device are queued on its current stream; StreamGuard switches it
// for a scope. Work on two streams is ordered only by events (Event::record, then Event::wait on
// the other stream). A tensor's memory is returned to the caching allocator when its last view
// dies, in the order of the stream that allocated it; a tensor used on another stream must be
// marked with record_stream() so that its block waits for that stream too.
//
// Note [Deferred device errors]: input checks that need the values of a device tensor (an index
// out of range in index_select or embedding, a class out of range in cross_entropy) run inside
// the kernels, which skip the offending element and record the error instead of reading or
// writing out of bounds. The error is raised, naming the op and the value, at the device's next
// synchronisation: synchronize(), a copy to the CPU (item(), to_vector(), to(kCPU)), or
// Stream::synchronize. Faults of the device itself (an illegal address) are sticky in CUDA: weft
// throws with the CUDA error and the device cannot be used again by this process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace weft::cuda {

// True in a build with -DWEFT_CUDA=ON, whether or not this machine has a GPU.
bool is_built();
// True in a CUDA build with a working driver and at least one GPU.
bool is_available();
// Why a program asked to run on a GPU cannot, for its --device error: "" where is_available(), else
// which of the build and the machine lacks it.
inline std::string unavailable_reason() {
  if (!is_built()) return "this build of weft has no CUDA backend (configure with -DWEFT_CUDA=ON)";
  if (!is_available()) return "expected a CUDA GPU, got none (no driver or no device visible)";
  return "";
}
int device_count();  // 0 when not available
// The device of the calling thread ("cuda" without an index means this one); initially 0.
int current_device();
void set_device(int device);
// Waits for all work queued on the device (-1: the current device); raises deferred errors.
void synchronize(int device = -1);
// The GPU's name and compute capability, e.g. {"NVIDIA H100 80GB HBM3", 9, 0}.
struct DeviceProperties {
  std::string name;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  int64_t total_memory = 0;
};
DeviceProperties get_device_properties(int device = -1);

// A queue of work on one device (a handle; copying it copies the handle).
class Stream {
 public:
  Stream() = default;
  Stream(void* native, int device) : native_(native), device_(device) {}
  void* native() const { return native_; }  // the cudaStream_t
  int device() const { return device_; }
  // Waits for the work queued so far; raises deferred errors.
  void synchronize() const;
  // True when the work queued so far has finished.
  bool query() const;
  friend bool operator==(const Stream&, const Stream&) = default;

 private:
  void* native_ = nullptr;
  int device_ = 0;
};

// The calling thread's current stream on a device (-1: the current device).
Stream current_stream(int device = -1);
// The device's default stream (non-blocking, created by weft).
Stream default_stream(int device = -1);
// A new non-blocking stream. Streams are pooled and live as long as the process.
Stream new_stream(int device = -1);

// Makes `stream` the current stream of its device on this thread for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A marker in a stream. Without timing (the default) events are cheaper and are what ordering
// between streams needs; with timing, elapsed_ms() measures between two of them.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the point reached by the work queued so far on `stream` (default: the current one).
  void record(const Stream& stream);
  void record();
  // Makes `stream` wait, on the device, until the recorded point is reached; the host goes on.
  void wait(const Stream& stream) const;
  void synchronize() const;  // the host waits
  bool query() const;        // reached?
  // Milliseconds from this event to `later`; both recorded, both with timing.
  float elapsed_ms(const Event& later) const;

 private:
  // Unused by the build without CUDA (tensor/cuda_stub.cpp), whose events only refuse.
  [[maybe_unused]] void* native_ = nullptr;
  [[maybe_unused]] int device_ = 0;
  [[maybe_unused]] bool timing_ = false;
};

// Keeps t's memory from being reused until the work queued on `stream` so far has run
// (Note [Streams]); needed only for streams other than the one t was allocated on.
void record_stream(const Tensor& t, const Stream& stream);

// The caching allocator's counters for a device (-1: current), in bytes where they are sizes.
// Memory comes from a stream-ordered CUDA memory pool (cudaMallocAsync) that keeps what is freed
// for reuse instead of returning it to the driver; `reserved` is what the pool holds.
struct MemoryStats {
  int64_t allocated = 0;       // held by live tensors, rounded to the allocator's 512-byte unit
  int64_t allocated_peak = 0;
  int64_t requested = 0;       // what the tensors asked for
  int64_t reserved = 0;        // held by the pool from CUDA, cached or in use
  int64_t reserved_peak = 0;
  int64_t allocations = 0;     // counts since the start
  int64_t frees = 0;
  int64_t cache_flushes = 0;   // times the cache was emptied to satisfy an allocation
  int64_t ooms = 0;            // allocations that failed even after emptying the cache
};
MemoryStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
// Returns every cached block that no tensor uses to CUDA (on every device).
void empty_cache();

// A copy of a CPU tensor in page-locked host memory, so copies from it to a device can run
// asynchronously. Each call allocates its own pinned block (cudaHostAlloc), freed with the tensor.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);

// Note [CUDA graphs]: a Graph records the device work of one call of a fixed-shape step (a
// training step: forward, backward, optimizer) and replays it with one launch, without the host
// overhead of queuing each kernel. The step runs once on the host while its kernels, copies and
// allocations are recorded instead of executed (CUDA stream capture, thread-local mode, on a side
// stream of the Graph's own); replay() then queues the whole recording on the current stream.
//
//   cuda::Graph graph;
//   for (int i = 0; i < 3; ++i) graph.warm_up(step);  // real steps, eagerly
//   graph.capture(step);                              // records; nothing runs
//   for (each batch) { static_input.copy_(batch); graph.replay(); }
//
// The warm-up rule: run the step eagerly a few times (three, as PyTorch's make_graphed_callables
// does) with warm_up() before capture(). Work that happens once and lazily — creating cuBLAS and
// cuBLASLt handles and their workspaces, choosing cuBLASLt algorithms, creating optimizer state
// (AdamW's moments), growing the allocator's pool — must happen outside the capture; inside it
// weft throws rather than record a half-initialised step. Each warm-up call is a real step (a
// training step trains).
//
// What a replay sees: a graph holds addresses and values, not tensors.
// - Inputs are static: copy each batch into the tensors the captured step read (copy_ on the
//   device, before replay()); a host value read during capture (a learning rate, a scale) is
//   fixed in the graph. AdamW must be built with `capturable = true` (optim/adam.h) so that its
//   step count and bias corrections live on the device; a non-capturable AdamW, a GradScaler and
//   dropout (its random key is drawn on the host) refuse to be captured.
// - Outputs are static too: a tensor the step created and kept (the loss, the gradients it
//   assigned) is overwritten in place by every replay and holds data only after the first one.
// - Replacing a tensor the graph reads (load_state_dict's fresh optimizer state, a parameter
//   assigned anew) is not seen by replays: capture a new Graph.
// - Nothing may wait for the device during capture: item(), to(kCPU), to_vector(), synchronize(),
//   Stream/Event queries and waits, clip_grad_norm_ and copies from the CPU throw "[cuda graph]
//   ... while a graph is being captured". A capture that throws is abandoned cleanly: the stream
//   and the device stay usable, and tensors the failed step created or assigned hold no data
//   (drop them, e.g. with optimizer.zero_grad(), before eager use).
// - Captures do not nest, and one thread records one capture at a time.
class Graph {
 public:
  // A graph for `device` (-1: the current device), with its own capture stream.
  explicit Graph(int device = -1);
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Runs `step` eagerly on the capture stream, after the work queued on the current stream, which
  // then waits for it (the warm-up rule above).
  void warm_up(const std::function<void()>& step);
  // Records the device work `step` queues (on the capture stream, which is current during the
  // call). Throws if this Graph already holds a capture, if this thread is already capturing, or
  // if the step does something a capture cannot hold (the capture is then abandoned).
  void capture(const std::function<void()>& step);
  // Queues the recorded work on the device's current stream. Throws before capture().
  void replay();
  bool is_captured() const;
  // The stream warm_up() and capture() run the step on.
  Stream stream() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True while this thread records a Graph (inside Graph::capture).
bool is_current_stream_capturing();

// float32 matrix products on TensorFloat-32 tensor cores (10-bit mantissa products, float32
// accumulation): off by default, as PyTorch's torch.backends.cuda.matmul.allow_tf32. Process-wide.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace weft::cuda
