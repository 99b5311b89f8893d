// The CPU backend's allocator. It aligns by hand rather than with aligned_alloc: glibc's memalign
// carves the block out of a larger chunk and frees the pieces around it, which costs several
// plain mallocs and fragments the heap (it was the largest single cost of an op on a tiny
// tensor). The pointer malloc gave is kept in the word just below the aligned block, for
// deallocate. 64 bytes: vector kernels and Eigen never meet a split cache line.
#include "tensor/cpu/cpu_allocator.h"

#include <cstdint>
#include <cstdlib>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/error.h"

namespace weft::detail {
namespace {

class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* raw = std::malloc(nbytes + kAlignment + sizeof(void*));
    WEFT_CHECK(raw != nullptr, "[allocator] out of memory allocating ", nbytes, " bytes on cpu");
    const auto first = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
    void* aligned = reinterpret_cast<void*>((first + kAlignment - 1) / kAlignment * kAlignment);
    static_cast<void**>(aligned)[-1] = raw;
    return aligned;
  }
  void deallocate(void* ptr, size_t) override {
    if (ptr != nullptr) std::free(static_cast<void**>(ptr)[-1]);
  }
};

}  // namespace

Allocator& default_cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& CpuBackend::allocator(int index) {
  WEFT_CHECK(index == 0, "[device] the cpu has device index 0 only, got ", index);
  return default_cpu_allocator();
}

}  // namespace weft::detail
