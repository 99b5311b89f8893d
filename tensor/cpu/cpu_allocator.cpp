// The CPU backend's allocator: the caching allocator of tensor/cpu/caching_allocator.h, for the
// CPU's one device index.
#include "tensor/cpu/caching_allocator.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/error.h"

namespace weft::detail {

Allocator& CpuBackend::allocator(int index) {
  WEFT_CHECK(index == 0, "[device] the cpu has device index 0 only, got ", index);
  return default_cpu_allocator();
}

}  // namespace weft::detail
