// The CUDA backend (tensor/backend.h) of a build with -DWEFT_CUDA=ON: the host side of every core
// op on the GPU. It turns tensors into the plain views of tensor/cuda/launch.h, checks what the
// kernels cannot, and queues the kernels of the .cu files on the device's current stream.
#pragma once

#include <array>

#include "tensor/backend.h"
#include "tensor/cuda/launch.h"

namespace weft::cuda::detail {

class CudaBackend final : public weft::detail::Backend {
 public:
  int device_count() override;
  Allocator& allocator(int index) override;
  void synchronize(int index) override;

  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, double value) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void reduce(ReduceOp op, const Tensor& x, const Tensor& out) override;
  void sum_columns(const Tensor& x, const Tensor& out) override;
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) override;
  void index_select(const Tensor& x, const Tensor& index, const Tensor& out) override;
  void index_add(const Tensor& out, const Tensor& index, const Tensor& src) override;
  void gather(const Tensor& x, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src) override;
  void softmax(const Tensor& x, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& grad, const Tensor& y, const Tensor& grad_in, bool log) override;
};

// The caching allocator of a device (tensor/cuda/allocator.cpp).
Allocator& device_allocator(int device);

// Views of tensors that share one iteration shape (each expanded to `shape`), with the dims that
// are contiguous in all of them merged; fails past kMaxDims dims that cannot be merged.
template <size_t N>
std::array<View, N> views_of(const std::array<const Tensor*, N>& tensors, const Shape& shape);
// A view of a tensor over its own shape and strides (no merging).
View view_of(const Tensor& t);

// The current stream of a tensor's device.
StreamHandle stream_for(const Tensor& t);

// A contiguous tensor on `device` from its caching allocator, for kernel scratch.
Tensor device_scratch(const Shape& shape, DType dtype, Device device);

// y: (B, M, N) (+)= a: (B, M, K) · b: (B, K, N) through cuBLAS (tensor/cuda/matmul.cpp).
void cublas_matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);

}  // namespace weft::cuda::detail
