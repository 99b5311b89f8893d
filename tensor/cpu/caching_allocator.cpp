// The caching CPU allocator of caching_allocator.h, and the Allocator that storage.cpp installs
// by default for the CPU.
#include "tensor/cpu/caching_allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/error.h"
#include "tensor/storage.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A cached block is poisoned while it sits on a free list, so AddressSanitizer still reports a
// use after free of a large tensor.
#define WEFT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define WEFT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kSmallAlignment = 64;

// Maps `bytes` (a size class: a multiple of the page size) of fresh memory, 2 MiB aligned and
// advised as huge pages when it is that large.
void* map_block(size_t bytes) {
  const size_t extra = bytes >= kHugePage ? kHugePage : 0;
  void* raw = mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  WEFT_CHECK(raw != MAP_FAILED, "[allocator] out of memory allocating ", bytes, " bytes on cpu");
  if (extra == 0) return raw;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  if (const size_t tail = start + bytes + extra - (aligned + bytes); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + bytes), tail);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(aligned);
}

class CachingCpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    if (nbytes < cpu_allocator::kMinCachedBytes) return allocate_small(nbytes);
    const size_t bytes = cpu_allocator::size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        ++stats_.hits;
        stats_.cached_bytes -= static_cast<int64_t>(bytes);
        stats_.in_use_bytes += static_cast<int64_t>(bytes);
        WEFT_UNPOISON(block, bytes);
        return block;
      }
      ++stats_.misses;
      stats_.in_use_bytes += static_cast<int64_t>(bytes);
      stats_.reserved_bytes += static_cast<int64_t>(bytes);
    }
    try {
      return map_block(bytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.in_use_bytes -= static_cast<int64_t>(bytes);
      stats_.reserved_bytes -= static_cast<int64_t>(bytes);
      throw;
    }
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    if (nbytes < cpu_allocator::kMinCachedBytes) return std::free(static_cast<void**>(ptr)[-1]);
    const size_t bytes = cpu_allocator::size_class(nbytes);
    WEFT_POISON(ptr, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_[bytes].push_back(ptr);
    stats_.in_use_bytes -= static_cast<int64_t>(bytes);
    stats_.cached_bytes += static_cast<int64_t>(bytes);
  }

  CpuAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuAllocatorStats s = stats_;
    s.small_allocations = small_allocations_.load(std::memory_order_relaxed);
    return s;
  }

  void reset_counters() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.hits = stats_.misses = 0;
    small_allocations_.store(0, std::memory_order_relaxed);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, blocks] : free_) {
      for (void* block : blocks) {
        WEFT_UNPOISON(block, bytes);
        munmap(block, bytes);
      }
      stats_.cached_bytes -= static_cast<int64_t>(bytes * blocks.size());
      stats_.reserved_bytes -= static_cast<int64_t>(bytes * blocks.size());
    }
    free_.clear();
  }

 private:
  // Aligns by hand rather than with aligned_alloc: glibc's memalign carves the block out of a
  // larger chunk and frees the pieces around it, which costs several plain mallocs and fragments
  // the heap (it was the largest single cost of an op on a tiny tensor). The pointer malloc gave
  // is kept in the word just below the aligned block, for deallocate.
  void* allocate_small(size_t nbytes) {
    void* raw = std::malloc(nbytes + kSmallAlignment + sizeof(void*));
    WEFT_CHECK(raw != nullptr, "[allocator] out of memory allocating ", nbytes, " bytes on cpu");
    const auto first = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
    void* aligned = reinterpret_cast<void*>((first + kSmallAlignment - 1) / kSmallAlignment * kSmallAlignment);
    static_cast<void**>(aligned)[-1] = raw;
    small_allocations_.fetch_add(1, std::memory_order_relaxed);
    return aligned;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  CpuAllocatorStats stats_;
  std::atomic<int64_t> small_allocations_{0};  // outside the mutex: tiny tensors are the hot path
};

CachingCpuAllocator& caching_allocator() {
  static CachingCpuAllocator* allocator = new CachingCpuAllocator();  // never destroyed: storages may outlive statics
  return *allocator;
}

}  // namespace

namespace cpu_allocator {

size_t size_class(size_t nbytes) {
  if (nbytes < kMinCachedBytes) return nbytes;
  if (nbytes >= (size_t{1} << 20)) return (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  // Four classes per power of two: 2^e · {1, 1.25, 1.5, 1.75}, then whole pages.
  const size_t e = std::bit_width(nbytes - 1) - 1;  // 2^e < nbytes <= 2^(e+1)
  const size_t quarter = size_t{1} << (e - 2);
  const size_t rounded = (nbytes + quarter - 1) / quarter * quarter;
  return (rounded + kPage - 1) / kPage * kPage;
}

CpuAllocatorStats stats() { return caching_allocator().stats(); }
void reset_counters() { caching_allocator().reset_counters(); }
void empty_cache() { caching_allocator().empty_cache(); }

}  // namespace cpu_allocator

namespace detail {
Allocator& default_cpu_allocator() { return caching_allocator(); }
}  // namespace detail

}  // namespace weft
