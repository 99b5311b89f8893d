// The caching CPU allocator (tensor/cpu/caching_allocator.h): size classes (an exact table),
// reuse of a freed block by the next request of its class, the counters, alignment, empty_cache,
// and consistency under concurrent use; and the cache-line aligned vectors kernels pack into. Other tests share the process-wide allocator, so each
// check is on differences of the counters around its own allocations.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/aligned_vector.h"

using namespace weft;

namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

Tensor bytes_tensor(size_t nbytes) { return empty({static_cast<int64_t>(nbytes)}, kUInt8); }

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

}  // namespace

TEST_CASE("size classes: four per power of two below 1 MiB, 2 MiB multiples above, pages throughout") {
  using cpu_allocator::size_class;
  CHECK(size_class(1000) == 1000);                  // below the threshold: malloc's business
  CHECK(size_class(64 * kKiB - 1) == 64 * kKiB - 1);
  CHECK(size_class(64 * kKiB) == 64 * kKiB);
  CHECK(size_class(64 * kKiB + 1) == 80 * kKiB);    // 64 KiB · 1.25
  CHECK(size_class(96 * kKiB) == 96 * kKiB);        // 64 KiB · 1.5
  CHECK(size_class(100 * kKiB) == 112 * kKiB);      // 64 KiB · 1.75
  CHECK(size_class(256 * kKiB) == 256 * kKiB);      // the MLP's 128×512 float32 activations
  CHECK(size_class(300000) == 320 * kKiB);
  CHECK(size_class(kMiB - 1) == kMiB);
  CHECK(size_class(kMiB) == 2 * kMiB);
  CHECK(size_class(784 * 512 * 4) == 2 * kMiB);     // the MLP's first weight
  CHECK(size_class(3 * kMiB + 1) == 4 * kMiB);
}

TEST_CASE("a freed large block is reused by the next request of its class, and counted") {
  cpu_allocator::empty_cache();
  const CpuAllocatorStats before = cpu_allocator::stats();
  uintptr_t first = 0;
  {
    const Tensor t = bytes_tensor(300000);
    first = address(t);
    const CpuAllocatorStats s = cpu_allocator::stats();
    CHECK(s.misses == before.misses + 1);
    CHECK(s.in_use_bytes == before.in_use_bytes + static_cast<int64_t>(320 * kKiB));
  }
  CpuAllocatorStats s = cpu_allocator::stats();
  CHECK(s.cached_bytes == before.cached_bytes + static_cast<int64_t>(320 * kKiB));
  CHECK(s.in_use_bytes == before.in_use_bytes);
  {
    const Tensor again = bytes_tensor(310000);  // another size, same class
    CHECK(address(again) == first);
    s = cpu_allocator::stats();
    CHECK(s.hits == before.hits + 1);
    CHECK(s.misses == before.misses + 1);
    CHECK(s.cached_bytes == before.cached_bytes);
    const Tensor other = bytes_tensor(300000);  // the only cached block is taken: a new one
    CHECK(address(other) != first);
    CHECK(cpu_allocator::stats().misses == before.misses + 2);
  }
  s = cpu_allocator::stats();
  CHECK(s.reserved_bytes == s.cached_bytes + s.in_use_bytes);
  CHECK(s.reserved_bytes == before.reserved_bytes + static_cast<int64_t>(2 * 320 * kKiB));
}

TEST_CASE("small requests go to malloc and are counted as such") {
  const CpuAllocatorStats before = cpu_allocator::stats();
  const Tensor t = bytes_tensor(1000);
  const CpuAllocatorStats s = cpu_allocator::stats();
  CHECK(s.small_allocations == before.small_allocations + 1);
  CHECK(s.hits + s.misses == before.hits + before.misses);
  CHECK(address(t) % 64 == 0);
}

TEST_CASE("blocks are 64-byte aligned, and 2 MiB aligned from 2 MiB on") {
  for (size_t n : {size_t{65}, size_t{4097}, 70 * kKiB, 500 * kKiB, kMiB + 1}) {
    CAPTURE(n);
    CHECK(address(bytes_tensor(n)) % 64 == 0);
  }
  for (size_t n : {2 * kMiB, 5 * kMiB + 3}) {
    CAPTURE(n);
    CHECK(address(bytes_tensor(n)) % (2 * kMiB) == 0);
  }
}

TEST_CASE("packing buffers (AlignedVector) start on a cache line, through growth and copies") {
  // Sizes on both sides of malloc's mmap threshold (128 KiB by default), where a plain vector's
  // data sits 16 bytes past a page start.
  for (size_t n : {size_t{1}, size_t{100}, 4097 * size_t{1}, 200 * kKiB, kMiB + 5}) {
    CAPTURE(n);
    detail::AlignedVector<int8_t> bytes(n, 1);
    CHECK(reinterpret_cast<uintptr_t>(bytes.data()) % 64 == 0);
    bytes.resize(3 * n + 1);  // reallocates: the new block is aligned too, the contents kept
    CHECK(reinterpret_cast<uintptr_t>(bytes.data()) % 64 == 0);
    CHECK(bytes[n - 1] == 1);
    const detail::AlignedVector<int8_t> copy = bytes;
    CHECK(reinterpret_cast<uintptr_t>(copy.data()) % 64 == 0);
    detail::AlignedVector<float> floats(n);
    CHECK(reinterpret_cast<uintptr_t>(floats.data()) % 64 == 0);
  }
}

TEST_CASE("empty_cache returns free blocks to the OS and leaves blocks in use alone") {
  Tensor kept = full({300000}, 7.0, kFloat32);  // 1.2 MB, in use throughout
  { const Tensor dropped = bytes_tensor(3 * kMiB); }
  CHECK(cpu_allocator::stats().cached_bytes >= static_cast<int64_t>(4 * kMiB));
  const CpuAllocatorStats before = cpu_allocator::stats();
  cpu_allocator::empty_cache();
  const CpuAllocatorStats s = cpu_allocator::stats();
  CHECK(s.cached_bytes == 0);
  CHECK(s.in_use_bytes == before.in_use_bytes);
  CHECK(s.reserved_bytes == before.reserved_bytes - before.cached_bytes);
  CHECK(kept.max().item() == 7.0);
  CHECK(kept.min().item() == 7.0);
}

TEST_CASE("concurrent allocation and release keep the counters consistent and blocks disjoint") {
  cpu_allocator::empty_cache();
  const CpuAllocatorStats before = cpu_allocator::stats();
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &failures] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t n = (size_t{64} + static_cast<size_t>((t * 7 + r * 13) % 5) * 100) * kKiB;
        Tensor block = bytes_tensor(n);
        // Each thread writes its own pattern and reads it back: blocks never shared.
        std::memset(block.data_ptr(), t + 1, n);
        const auto* bytes = static_cast<const uint8_t*>(block.data_ptr());
        if (bytes[0] != t + 1 || bytes[n - 1] != t + 1) ++failures[static_cast<size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int f : failures) CHECK(f == 0);
  const CpuAllocatorStats s = cpu_allocator::stats();
  CHECK(s.hits + s.misses == before.hits + before.misses + kThreads * kRounds);
  CHECK(s.in_use_bytes == before.in_use_bytes);
  CHECK(s.reserved_bytes == s.cached_bytes + s.in_use_bytes);
  CHECK(s.misses - before.misses <= kThreads * 5);  // at most one block per thread and class
}
