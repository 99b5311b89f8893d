// The CPU allocator tensors get by default: large blocks are cached and reused, never handed
// back to the kernel until empty_cache().
//
// glibc serves large blocks with their own mmap and unmaps them on free, so a training step that
// frees and reallocates its activations and gradients page-faults every page back in, zero-filled
// by the kernel (a 48 MiB block: 12,289 faults and 22 ms per malloc+memset+free, against 1.3 ms
// reused; ../shared/reference/cpu-kernels.md §9). Here a block of at least kMinCachedBytes is
// rounded up to a size class — 4 classes per power of two below 1 MiB, multiples of 2 MiB from
// there — and a freed block goes on its class's free list for the next request of that class.
// Blocks of 2 MiB and more are 2 MiB aligned and advised as huge pages (fewer TLB misses);
// all are at least 64-byte aligned. Smaller blocks come from malloc, which already keeps them.
// One mutex guards the lists; the counters let a test or a benchmark see reuse happen.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

struct CpuAllocatorStats {
  int64_t hits = 0;             // cached-size requests served from a free list
  int64_t misses = 0;           // cached-size requests that mapped new memory
  int64_t cached_bytes = 0;     // bytes sitting on free lists, ready for reuse
  int64_t in_use_bytes = 0;     // bytes of cached-size blocks handed out and not yet freed
  int64_t reserved_bytes = 0;   // cached_bytes + in_use_bytes: what the cache holds from the OS
  int64_t small_allocations = 0;  // requests below kMinCachedBytes (passed to malloc)
};

namespace cpu_allocator {

// Requests of at least this many bytes are cached.
inline constexpr size_t kMinCachedBytes = size_t{64} << 10;

// The bytes a request of `nbytes` occupies (its size class); nbytes itself below kMinCachedBytes.
size_t size_class(size_t nbytes);

CpuAllocatorStats stats();
// Zeroes the hit and miss counters (the byte counts describe the present and stay).
void reset_counters();
// Returns every cached free block to the OS. Blocks in use are untouched.
void empty_cache();

}  // namespace cpu_allocator

class Allocator;
namespace detail {
// The caching allocator as an Allocator (tensor/storage.h): the CPU's default.
Allocator& default_cpu_allocator();
}  // namespace detail

}  // namespace weft
