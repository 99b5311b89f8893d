// Kernel scratch for the CPU products (tensor/cpu/cpu_backend.h): tensors over memory taken from
// the CPU allocator directly and filled by the CPU copy kernel, so a kernel that hands a GEMM
// library float32 or dense operands never goes back through the op front end.
#include "tensor/cpu/cpu_backend.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tensor/cpu/caching_allocator.h"

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

namespace {

// Whether t's elements are the t.numel() consecutive ones from its first, each once: its strides
// are a contiguous layout's in some order of the dimensions (a transposed view, for one).
bool dense_in_some_order(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dimensions that step
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace

// A transposed view is widened in its memory's order and keeps its strides (the GEMM reads any
// layout): copied into its logical order, it was converted value by value down the columns, the
// vector kernels needing contiguous runs (float16 training: the products' W^T was most of it).
Tensor widen_if_narrow(const Tensor& t) {
  if (!is_narrow_float(t.dtype())) return t;
  if (!t.is_contiguous() && t.numel() > 0 && dense_in_some_order(t)) {
    Tensor wide = scratch_tensor({t.numel()}, kFloat32);
    CpuBackend().copy(make_view(t, {t.numel()}, {1}, t.offset()), wide);
    return make_view(wide, t.shape(), t.strides(), 0);
  }
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
