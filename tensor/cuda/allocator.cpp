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
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::cuda {
namespace detail {
namespace {

constexpr size_t kUnit = 512;

struct Block {
  size_t size;  // rounded
  size_t requested;
  cudaStream_t stream;
  std::vector<cudaStream_t> used_on;  // other streams, from record_stream
};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = (nbytes + kUnit - 1) / kUnit * kUnit;
    DeviceGuard guard(device_);
    init_pool();
    cudaStream_t stream = stream_of(device_);
    void* ptr = nullptr;
    cudaError_t rc = cudaMallocAsync(&ptr, size, stream);
    if (rc == cudaErrorMemoryAllocation) {
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
    blocks_[ptr] = Block{size, nbytes, stream, {}};
    stats_.allocated += static_cast<int64_t>(size);
    stats_.requested += static_cast<int64_t>(nbytes);
    stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
    ++stats_.allocations;
    return ptr;
  }

  void deallocate(void* ptr, size_t) override {
    if (ptr == nullptr) return;
    Block block;
    {
      std::lock_guard lock(mutex_);
      auto it = blocks_.find(ptr);
      if (it == blocks_.end()) return;
      block = std::move(it->second);
      blocks_.erase(it);
      stats_.allocated -= static_cast<int64_t>(block.size);
      stats_.requested -= static_cast<int64_t>(block.requested);
      ++stats_.frees;
    }
    // Destructors must not throw: a failure here means the device is already broken, and the
    // next checked call reports it.
    DeviceGuard guard(device_);
    for (cudaStream_t other : block.used_on) {
      cudaEvent_t done = nullptr;
      if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) continue;
      cudaEventRecord(done, other);
      cudaStreamWaitEvent(block.stream, done, 0);
      cudaEventDestroy(done);  // destroyed once recorded work completes
    }
    cudaFreeAsync(ptr, block.stream);
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

  // Returns the pool's unused memory to CUDA, once all queued frees have happened.
  void trim() {
    if (pool_ == nullptr) return;
    DeviceGuard guard(device_);
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    WEFT_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
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
  std::unordered_map<void*, Block> blocks_;
  MemoryStats stats_;
};

CudaAllocator& allocator_of(int device) {
  static std::vector<std::unique_ptr<CudaAllocator>> allocators = [] {
    std::vector<std::unique_ptr<CudaAllocator>> v;
    for (int d = 0; d < cuda::device_count(); ++d) v.push_back(std::make_unique<CudaAllocator>(d));
    return v;
  }();
  return *allocators[static_cast<size_t>(resolve_device(device))];
}

}  // namespace

Allocator& device_allocator(int device) { return allocator_of(device); }

}  // namespace detail

void record_stream(const Tensor& t, const Stream& stream) {
  WEFT_CHECK(t.device().is_cuda() && t.device().index == stream.device(), "[record_stream] expected a tensor on cuda:",
             stream.device(), ", got one on ", t.device());
  detail::allocator_of(stream.device()).record_stream(t.storage()->data(), static_cast<cudaStream_t>(stream.native()));
}

MemoryStats memory_stats(int device) { return detail::allocator_of(device).stats(); }
void reset_peak_memory_stats(int device) { detail::allocator_of(device).reset_peak(); }

void empty_cache() {
  for (int d = 0; d < device_count(); ++d) detail::allocator_of(d).trim();
}

Tensor pin_memory(const Tensor& t) {
  WEFT_CHECK(t.device().is_cpu(), "[pin_memory] expected a CPU tensor, got one on ", t.device());
  WEFT_CHECK(is_available(), "[pin_memory] needs a CUDA device; none is visible");
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
