// What the CUDA code needs to know about a graph capture in progress (cuda::Graph, Note [CUDA
// graphs] in tensor/cuda.h): which capture this thread is recording, a check that refuses an
// operation a capture cannot record, and the caching allocator's side of a graph's memory.
// Compiled only with -DWEFT_CUDA=ON; the capture itself is tensor/cuda/graph.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

namespace weft::cuda::detail {

// The memory a captured graph allocated or kept alive (defined in tensor/cuda/allocator.cpp).
struct GraphMemory;

// The capture this thread is recording: captures run in CUDA's thread-local mode, so only the
// capturing thread's calls are restricted and only its allocations become the graph's.
struct ActiveCapture {
  int device;
  cudaStream_t stream;
  std::shared_ptr<GraphMemory> memory;
};
// Null when this thread is not capturing.
const ActiveCapture* active_capture();

// Throws "[cuda graph] <what> while a graph is being captured on cuda:N: <why>" when this thread
// is capturing; `what` names the operation, `why` says why a graph cannot hold it and what to do.
void refuse_during_capture(const char* what, const char* why);

// Note [Graph memory]: during a capture the stream-ordered allocator's cudaMallocAsync and
// cudaFreeAsync on the capturing stream become allocation and free nodes of the graph, so a
// tensor made and dropped inside the step costs nothing outside it. Two kinds of blocks need the
// allocator's help:
// - a block allocated during the capture that outlives it (an output, a gradient the step
//   assigned) belongs to the graph: it holds data only once the graph has been launched, and each
//   launch frees and reallocates it at the same address (cudaGraphInstantiateFlagAutoFreeOnLaunch).
//   When its tensor dies it is freed in the order of the graph's last launch, and not at all if
//   the graph never ran (there is nothing to free).
// - a block allocated before the capture and freed during it may still be read by every replay
//   (freeing it inside the capture is not even allowed), so the graph keeps it until it dies.
std::shared_ptr<GraphMemory> new_graph_memory(int device);
// A launch of the graph on `stream` was queued: its allocations now exist in that stream's order.
void graph_launched(GraphMemory& memory, cudaStream_t stream);
// The graph is gone (or its capture failed): frees what it kept, after its last launch.
void release_graph_memory(GraphMemory& memory);

}  // namespace weft::cuda::detail
