// std::vector whose storage starts on a cache-line boundary, for the packed operands and scratch
// buffers that SIMD and AMX kernels read a whole line at a time.
//
// A plain std::vector of a megabyte comes from mmap through malloc, 16 bytes past a page start, so
// every 64-byte load or tile row of it spans two cache lines: the AMX int8 product ran at half
// speed on such buffers (1024³, two threads: 806 against 405 µs for the kernels alone).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace weft::detail {

inline constexpr std::size_t kCacheLineBytes = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): rebinding

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLineBytes}); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace weft::detail
