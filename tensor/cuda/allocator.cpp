// The CUDA devices' allocator (Backend::allocator of the CUDA backend) and pinned host memory.
//
// Each device gets a stream-ordered memory pool (cudaMallocAsync / cudaFreeAsync on the device's
// default pool) whose release threshold is set to "never", so freed memory stays in the pool and
// the next allocation of a similar size reuses it without a driver call: the pool does the size
// classes, splitting and merging. weft adds the stream bookkeeping of Note [Streams]
// (tensor/cuda.h): a block is freed in the order of the stream that allocated it, after an event
// wait for every other stream record_stream() named, and the counters of cuda::MemoryStats.
// Sizes are rounded up to 512 bytes, so every block is 256-byte aligned for cuBLASLt and vector
// loads. When the pool cannot grow, the cache is emptied once and the allocation retried.
// During a graph capture the blocks of the capturing thread follow Note [Graph memory]
// (tensor/cuda/capture.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::cuda {
namespace detail {

struct DeviceBlock {
  size_t size;  // rounded
  size_t requested;
  cudaStream_t stream;
  std::vector<cudaStream_t> used_on;  // other streams, from record_stream
  std::shared_ptr<GraphMemory> graph;  // the graph whose capture allocated it; null outside captures
};

// Guarded by the mutex of the device's allocator.
struct GraphMemory {
  int device;
  bool launched = false;                       // its allocations exist once a launch is queued
  cudaStream_t last_launch = nullptr;          // and live in the order of the latest launch's stream
  std::vector<std::pair<void*, DeviceBlock>> kept;  // blocks from before the capture, freed during it
};

namespace {

constexpr size_t kUnit = 512;

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = (nbytes + kUnit - 1) / kUnit * kUnit;
    DeviceGuard guard(device_);
    init_pool();
    cudaStream_t stream = stream_of(device_);
    const ActiveCapture* capture = active_capture();
    const bool captured = capture != nullptr && capture->device == device_ && capture->stream == stream;
    void* ptr = nullptr;
    cudaError_t rc = cudaMallocAsync(&ptr, size, stream);
    if (rc == cudaErrorMemoryAllocation && !captured) {  // emptying the cache synchronises
      cudaGetLastError();
      {
        std::lock_guard lock(mutex_);
        ++stats_.cache_flushes;
      }
      trim();
      rc = cudaMallocAsync(&ptr, size, stream);
    }
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      std::lock_guard lock(mutex_);
      ++stats_.ooms;
      WEFT_FAIL("[allocator] out of memory allocating ", nbytes, " bytes on cuda:", device_, " (", stats_.allocated,
                " bytes held by tensors, ", reserved(), " reserved by weft)");
    }
    check(rc, "cudaMallocAsync");
    std::lock_guard lock(mutex_);
    blocks_[ptr] = DeviceBlock{size, nbytes, stream, {}, captured ? capture->memory : nullptr};
    stats_.allocated += static_cast<int64_t>(size);
    stats_.requested += static_cast<int64_t>(nbytes);
    stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
    ++stats_.allocations;
    return ptr;
  }

  void deallocate(void* ptr, size_t) override {
    if (ptr == nullptr) return;
    DeviceBlock block;
    bool launched = false;
    cudaStream_t launch_stream = nullptr;
    {
      std::lock_guard lock(mutex_);
      auto it = blocks_.find(ptr);
      if (it == blocks_.end()) return;
      block = std::move(it->second);
      blocks_.erase(it);
      stats_.allocated -= static_cast<int64_t>(block.size);
      stats_.requested -= static_cast<int64_t>(block.requested);
      ++stats_.frees;
      const ActiveCapture* capture = active_capture();
      if (capture != nullptr && capture->device == device_ && block.graph != capture->memory) {
        capture->memory->kept.emplace_back(ptr, std::move(block));
        return;
      }
      if (block.graph) {
        launched = block.graph->launched;
        launch_stream = block.graph->last_launch;
      }
    }
    release(ptr, block, launched, launch_stream);
  }

  // Frees a block that no tensor uses any more. A graph's block outside its capture is freed
  // after the graph's last launch, or not at all if it never ran (Note [Graph memory]).
  void release(void* ptr, const DeviceBlock& block, bool launched, cudaStream_t launch_stream) {
    const ActiveCapture* capture = active_capture();
    const bool in_its_capture = block.graph && capture != nullptr && block.graph == capture->memory;
    if (block.graph && !in_its_capture && !launched) return;
    // Destructors must not throw: a failure here means the device is already broken (the next
    // checked call reports it) or a failed capture refused the call (nothing to report).
    const cudaStream_t order = block.graph && !in_its_capture ? launch_stream : block.stream;
    DeviceGuard guard(device_);
    for (cudaStream_t other : block.used_on) {
      if (other == order) continue;
      cudaEvent_t done = nullptr;
      if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) continue;
      cudaEventRecord(done, other);
      cudaStreamWaitEvent(order, done, 0);
      cudaEventDestroy(done);  // destroyed once recorded work completes
    }
    if (cudaFreeAsync(ptr, order) != cudaSuccess) cudaGetLastError();
  }

  std::shared_ptr<GraphMemory> new_graph_memory() {
    auto memory = std::make_shared<GraphMemory>();
    memory->device = device_;
    return memory;
  }

  void graph_launched(GraphMemory& memory, cudaStream_t stream) {
    std::lock_guard lock(mutex_);
    memory.launched = true;
    memory.last_launch = stream;
  }

  // The blocks a graph kept are freed once its last launch (which may read them) has run.
  void release_kept(GraphMemory& memory) {
    std::vector<std::pair<void*, DeviceBlock>> kept;
    bool launched = false;
    cudaStream_t last_launch = nullptr;
    {
      std::lock_guard lock(mutex_);
      kept.swap(memory.kept);
      launched = memory.launched;
      last_launch = memory.last_launch;
    }
    for (auto& [ptr, block] : kept) {
      if (launched) block.used_on.push_back(last_launch);
      bool its_graph_launched = false;
      cudaStream_t its_graph_stream = nullptr;
      if (block.graph) {  // a block of an earlier graph, which the capture of this one freed
        std::lock_guard lock(mutex_);
        its_graph_launched = block.graph->launched;
        its_graph_stream = block.graph->last_launch;
      }
      release(ptr, block, its_graph_launched, its_graph_stream);
    }
  }

  void record_stream(void* base, cudaStream_t stream) {
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(base);
    WEFT_CHECK(it != blocks_.end(), "[record_stream] the tensor's memory was not allocated by weft on cuda:", device_);
    if (stream != it->second.stream) it->second.used_on.push_back(stream);
  }

  MemoryStats stats() {
    MemoryStats s;
    {
      std::lock_guard lock(mutex_);
      s = stats_;
    }
    if (pool_ != nullptr) {
      s.reserved = reserved();
      uint64_t high = 0;
      WEFT_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &high));
      s.reserved_peak = static_cast<int64_t>(high);
    }
    return s;
  }

  void reset_peak() {
    {
      std::lock_guard lock(mutex_);
      stats_.allocated_peak = stats_.allocated;
    }
    if (pool_ != nullptr) {
      uint64_t zero = 0;
      WEFT_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
    }
  }

  // Returns the pool's unused memory, and what destroyed graphs held, to CUDA once all queued
  // frees have happened.
  void trim() {
    if (pool_ == nullptr) return;
    DeviceGuard guard(device_);
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    WEFT_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    WEFT_CUDA_CHECK(cudaDeviceGraphMemTrim(device_));
  }

 private:
  void init_pool() {
    std::call_once(pool_once_, [&] {
      WEFT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device_));
      uint64_t keep_everything = UINT64_MAX;
      WEFT_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    });
  }

  int64_t reserved() const {
    uint64_t current = 0;
    if (pool_ != nullptr) cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &current);
    return static_cast<int64_t>(current);
  }

  int device_;
  std::once_flag pool_once_;
  cudaMemPool_t pool_ = nullptr;
  std::mutex mutex_;
  std::unordered_map<void*, DeviceBlock> blocks_;
  MemoryStats stats_;
};

// One per visible device, indexed without checks: for a device index already resolved.
CudaAllocator& allocator_at(int device) {
  static std::vector<std::unique_ptr<CudaAllocator>> allocators = [] {
    std::vector<std::unique_ptr<CudaAllocator>> v;
    for (int d = 0; d < cuda::device_count(); ++d) v.push_back(std::make_unique<CudaAllocator>(d));
    return v;
  }();
  return *allocators[static_cast<size_t>(device)];
}

CudaAllocator& allocator_of(int device) { return allocator_at(resolve_device(device)); }

}  // namespace

Allocator& device_allocator(int device) { return allocator_of(device); }

std::shared_ptr<GraphMemory> new_graph_memory(int device) { return allocator_of(device).new_graph_memory(); }
void graph_launched(GraphMemory& memory, cudaStream_t stream) {
  allocator_at(memory.device).graph_launched(memory, stream);
}
// No device check: it runs in destructors, also after the device had a fault.
void release_graph_memory(GraphMemory& memory) { allocator_at(memory.device).release_kept(memory); }

}  // namespace detail

void record_stream(const Tensor& t, const Stream& stream) {
  WEFT_CHECK(t.device().is_cuda() && t.device().index == stream.device(), "[record_stream] expected a tensor on cuda:",
             stream.device(), ", got one on ", t.device());
  detail::allocator_of(stream.device()).record_stream(t.storage()->data(), static_cast<cudaStream_t>(stream.native()));
}

MemoryStats memory_stats(int device) { return detail::allocator_of(device).stats(); }
void reset_peak_memory_stats(int device) { detail::allocator_of(device).reset_peak(); }

void empty_cache() {
  detail::refuse_during_capture("empty_cache()", "returning memory to CUDA synchronises the device");
  for (int d = 0; d < device_count(); ++d) detail::allocator_of(d).trim();
}

Tensor pin_memory(const Tensor& t) {
  WEFT_CHECK(t.device().is_cpu(), "[pin_memory] expected a CPU tensor, got one on ", t.device());
  WEFT_CHECK(is_available(), "[pin_memory] needs a CUDA device; none is visible");
  detail::refuse_during_capture("pin_memory()", "allocating page-locked memory synchronises the device");
  const Tensor src = t.contiguous();
  const size_t nbytes = src.nbytes();
  void* data = nullptr;
  if (nbytes > 0) WEFT_CUDA_CHECK(cudaHostAlloc(&data, nbytes, cudaHostAllocDefault));
  if (nbytes > 0) std::memcpy(data, src.data_ptr(), nbytes);
  auto impl = std::make_shared<weft::detail::TensorImpl>();
  impl->storage = Storage::borrow(data, nbytes, kCPU, [data] { cudaFreeHost(data); });
  impl->shape = src.shape();
  impl->strides = weft::detail::contiguous_strides(src.shape());
  impl->dtype = src.dtype();
  return Tensor(std::move(impl));
}

bool is_pinned(const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.storage()->data() == nullptr || !is_available()) return false;
  cudaPointerAttributes attributes{};
  const cudaError_t rc = cudaPointerGetAttributes(&attributes, t.storage()->data());
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace weft::cuda
