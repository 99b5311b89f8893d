// Kernel scratch for the CPU products (tensor/cpu/cpu_backend.h): tensors over memory taken from
// the CPU allocator directly and filled by the CPU copy kernel, so a kernel that hands a GEMM
// library float32 or dense operands never goes back through the op front end.
#include "tensor/cpu/caching_allocator.h"
#include "tensor/cpu/cpu_backend.h"

namespace weft::detail {

Tensor scratch_tensor(const Shape& shape, DType dtype) {
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * itemsize(dtype);
  Allocator& allocator = default_cpu_allocator();
  void* data = allocator.allocate(nbytes);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::borrow(data, nbytes, kCPU, [&allocator, data, nbytes] { allocator.deallocate(data, nbytes); });
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor widen_if_narrow(const Tensor& t) {
  if (!is_narrow_float(t.dtype())) return t;
  Tensor wide = scratch_tensor(t.shape(), kFloat32);
  CpuBackend().copy(t, wide);
  return wide;
}

Tensor compute_target(const Tensor& out) {
  return is_narrow_float(out.dtype()) ? scratch_tensor(out.shape(), kFloat32) : out;
}

void store_from(const Tensor& scratch, const Tensor& out) {
  if (!scratch.is_same(out)) CpuBackend().copy(scratch, out);
}

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor packed = scratch_tensor(t.shape(), t.dtype());
  CpuBackend().copy(t, packed);
  return packed;
}

}  // namespace weft::detail
