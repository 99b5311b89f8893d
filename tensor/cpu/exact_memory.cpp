// exact_empty, exact_clone and zero_pages: storages borrowed from malloc or mmap, freed by their
// deleters, so the caching allocator never sees them.
#include "tensor/cpu/exact_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace weft {
namespace {

Tensor wrap(void* data, size_t nbytes, const Shape& shape, DType dtype, std::function<void()> release) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = Storage::borrow(data, nbytes, kCPU, std::move(release));
  impl->shape = shape;
  impl->strides = detail::contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = kCPU;
  return Tensor(std::move(impl));
}

size_t bytes_of(const Shape& shape, DType dtype, const char* op) {
  const int64_t numel = detail::shape_numel(shape);
  WEFT_CHECK(numel >= 0, "[", op, "] expected a shape without negative sizes, got ", shape);
  return static_cast<size_t>(numel) * itemsize(dtype);
}

}  // namespace

Tensor exact_empty(const Shape& shape, DType dtype) {
  const size_t nbytes = bytes_of(shape, dtype, "exact_empty");
  void* data = std::aligned_alloc(64, std::max<size_t>(64, (nbytes + 63) / 64 * 64));
  WEFT_CHECK(data != nullptr, "[exact_empty] cannot allocate ", nbytes, " bytes for a tensor of shape ", shape);
  return wrap(data, nbytes, shape, dtype, [data] { std::free(data); });
}

Tensor exact_clone(const Tensor& t) {
  WEFT_CHECK(t.defined(), "[exact_clone] expected a tensor, got none");
  if (!t.device().is_cpu()) return t.contiguous().clone();
  Tensor out = exact_empty(t.shape(), t.dtype());
  out.copy_(t);
  return out;
}

Tensor zero_pages(const Shape& shape, DType dtype) {
  const size_t nbytes = bytes_of(shape, dtype, "zero_pages");
  if (nbytes == 0) return exact_empty(shape, dtype);
  void* data = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  WEFT_CHECK(data != MAP_FAILED, "[zero_pages] cannot map ", nbytes, " bytes for a tensor of shape ", shape);
  return wrap(data, nbytes, shape, dtype, [data, nbytes] { ::munmap(data, nbytes); });
}

}  // namespace weft
