// cuda::Graph (Note [CUDA graphs] in tensor/cuda.h): warm-up on a side stream, stream capture in
// CUDA's thread-local mode on that stream, instantiation, and replay on the current stream; and
// the record of the capture this thread is recording (tensor/cuda/capture.h).
//
// A capture that fails — the step throws, or CUDA invalidated the capture — is always ended
// (cudaStreamEndCapture), its partial graph destroyed and the error CUDA left behind cleared, so
// the stream and the device can be used again. The graph is instantiated with AutoFreeOnLaunch
// because the step's outputs are graph allocations that outlive a launch (Note [Graph memory]).
#include <cuda_runtime_api.h>

#include <utility>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/runtime.h"

namespace weft::cuda {
namespace detail {
namespace {

thread_local const ActiveCapture* t_active = nullptr;

// Makes `waiter` wait, on the device, for the work queued so far on `done`.
void order_after(cudaStream_t waiter, cudaStream_t done) {
  if (waiter == done) return;
  cudaEvent_t event = nullptr;
  WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(event, done);
  const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(waiter, event, 0) : recorded;
  cudaEventDestroy(event);  // released once the recorded work completes
  WEFT_CUDA_CHECK(waited);
}

// Makes `capture` this thread's active capture for a scope, so that the allocator and the checks
// see it, also while the step's exception unwinds.
class ActiveScope {
 public:
  explicit ActiveScope(const ActiveCapture& capture) { t_active = &capture; }
  ~ActiveScope() { t_active = nullptr; }
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;
};

}  // namespace

const ActiveCapture* active_capture() { return t_active; }

void refuse_during_capture(const char* what, const char* why) {
  if (t_active == nullptr) return;
  WEFT_FAIL("[cuda graph] ", what, " while a graph is being captured on cuda:", t_active->device, ": ", why);
}

}  // namespace detail

struct Graph::Impl {
  int device = 0;
  Stream stream;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<detail::GraphMemory> memory;

  ~Impl() {
    // An in-flight launch finishes normally; destruction only releases the handles.
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (memory) detail::release_graph_memory(*memory);
  }
};

Graph::Graph(int device) : impl_(std::make_unique<Impl>()) {
  detail::refuse_during_capture("creating a cuda::Graph", "a stream cannot be created inside a capture");
  impl_->device = detail::resolve_device(device);
  default_stream(impl_->device);  // the device's own state, created outside any capture
  impl_->stream = new_stream(impl_->device);
}

Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

bool Graph::is_captured() const { return impl_ && impl_->exec != nullptr; }

Stream Graph::stream() const {
  WEFT_CHECK(impl_, "[cuda graph] this Graph was moved from");
  return impl_->stream;
}

void Graph::warm_up(const std::function<void()>& step) {
  WEFT_CHECK(impl_, "[cuda graph] warm_up() on a Graph that was moved from");
  detail::refuse_during_capture("warm_up()", "a warm-up runs eagerly, so it must come before capture()");
  const int device = impl_->device;
  detail::DeviceGuard guard(device);
  const auto side = static_cast<cudaStream_t>(impl_->stream.native());
  const cudaStream_t caller = detail::stream_of(device);
  detail::order_after(side, caller);
  {
    StreamGuard on_side(impl_->stream);
    step();
  }
  detail::order_after(caller, side);
}

void Graph::capture(const std::function<void()>& step) {
  WEFT_CHECK(impl_, "[cuda graph] capture() on a Graph that was moved from");
  WEFT_CHECK(impl_->exec == nullptr, "[cuda graph] capture() on a Graph that already holds a capture; a new shape "
             "or step needs a new Graph");
  if (const detail::ActiveCapture* other = detail::active_capture())
    WEFT_FAIL("[cuda graph] capture() while this thread is already capturing a graph on cuda:", other->device,
              "; captures do not nest");
  const int device = impl_->device;
  detail::DeviceGuard guard(device);
  const auto side = static_cast<cudaStream_t>(impl_->stream.native());
  const detail::ActiveCapture active{device, side, detail::new_graph_memory(device)};

  cudaGraph_t graph = nullptr;
  WEFT_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
  try {
    const detail::ActiveScope scope(active);
    StreamGuard on_side(impl_->stream);
    step();
  } catch (...) {
    // Abandon: end the capture whatever state it is in, drop what it recorded and the error it
    // may have left, and free what the failed capture kept alive.
    if (cudaStreamEndCapture(side, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    detail::release_graph_memory(*active.memory);
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(side, &graph);
  if (ended != cudaSuccess || graph == nullptr) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    detail::release_graph_memory(*active.memory);
    WEFT_FAIL("[cuda graph] the capture on cuda:", device, " failed when it ended: ", cudaGetErrorName(ended), " (",
              static_cast<int>(ended), "): ", cudaGetErrorString(ended),
              "; an operation of the step was not allowed in a capture (a synchronisation, a query, or work on "
              "another stream that was not joined back), and the capture was abandoned");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated =
      cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  if (instantiated != cudaSuccess) {
    cudaGetLastError();
    cudaGraphDestroy(graph);
    detail::release_graph_memory(*active.memory);
    detail::check(instantiated, "cudaGraphInstantiateWithFlags");
  }
  impl_->graph = graph;
  impl_->exec = exec;
  impl_->memory = active.memory;
}

void Graph::replay() {
  WEFT_CHECK(impl_, "[cuda graph] replay() on a Graph that was moved from");
  WEFT_CHECK(impl_->exec != nullptr, "[cuda graph] replay() before capture(): this Graph has recorded nothing yet");
  detail::refuse_during_capture("replay()", "launch the graph after the capture has ended");
  const int device = impl_->device;
  detail::DeviceGuard guard(device);
  const cudaStream_t stream = detail::stream_of(device);
  WEFT_CUDA_CHECK(cudaGraphLaunch(impl_->exec, stream));
  detail::graph_launched(*impl_->memory, stream);
}

bool is_current_stream_capturing() { return detail::active_capture() != nullptr; }

}  // namespace weft::cuda
