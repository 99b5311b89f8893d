// The device seam: the small set of kernels an op front-end needs from a device.
//
// Front-ends (tensor/*.cpp) do all checking, shape logic, dtype promotion and autograd; they
// then call backend(device).<kernel>. A backend only moves and computes numbers, and owns what a
// device has: its indices, its allocator (the one new storages on it get, tensor/storage.h) and
// the way to wait for its queued work. The CPU backend (tensor/cpu/) is always built. The CUDA
// backend (tensor/cuda/) is reached through cuda_backend(), which the library names directly: it
// is defined by tensor/cuda/cuda_backend.cpp in a build with -DWEFT_CUDA=ON and by
// tensor/cuda_stub.cpp otherwise, where it fails with the way out (Note [Linking kernels by
// reference] in tensor/kernel_registry.h). Kernels outside this vtable register per feature
// (tensor/kernel_registry.h).
//
// Contracts shared by all kernels (Note [Kernel contracts]):
// - `out` tensors are contiguous and already allocated with the final shape and dtype.
// - Inputs may have any strides, including 0 (broadcast by expand()).
// - Unless a kernel says otherwise, inputs have the dtype of `out`. Narrow floating dtypes
//   (float16, bfloat16, float8) are computed in float32 and rounded once on store.
// - A kernel never calls back up into the tensor front end (no contiguous(), to(), op calls or
//   backend() lookups): it reads its operands through their strides, converts narrow values as
//   it loads them and keeps any scratch it needs to itself.
// - On a device with queues (CUDA), a kernel is enqueued on the device's current stream and
//   returns without waiting, except where it hands data to the host (a copy to the CPU).
#pragma once

#include <cstdint>

#include "tensor/op_kinds.h"
#include "tensor/tensor.h"

namespace weft::detail {

class Backend {
 public:
  virtual ~Backend() = default;

  // Devices of this type that exist (the CPU: 1; CUDA: the visible GPUs, 0 without a driver).
  virtual int device_count() = 0;
  // The allocator new storages on device `index` get.
  virtual Allocator& allocator(int index) = 0;
  // Returns once all work queued on device `index` has finished.
  virtual void synchronize(int index) = 0;

  // dst = src, converting dtype; same shape. dst may be any strided view (not only contiguous).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;
  virtual void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out = cond ? a : b; cond is bool.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // x: (rows, n) contiguous -> out: (rows). Sum writes out's dtype (int64 for integer input),
  // ArgMax/ArgMin write int64.
  virtual void reduce(ReduceOp op, const Tensor& x, const Tensor& out) = 0;
  // x: (n, cols) contiguous -> out: (cols), the sum down each column, accumulated as reduce's
  // Sum (a sum over leading dims, e.g. a bias gradient, without first transposing x).
  virtual void sum_columns(const Tensor& x, const Tensor& out) = 0;
  // a: (B, M, K) · b: (B, K, N) -> out: (B, M, N), or out += a · b when accumulating (how a
  // bias is fused into a product). a and b may be transposed views. bfloat16 a and b may come
  // with a float32 out: the products are accumulated in float32 and stored unrounded (the CPU
  // FP8 GEMM multiplies its exactly decoded operands so, precision/fp8/fp8_gemm.h).
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) = 0;
  // x: (outer, n, inner), index: int64 (k) -> out: (outer, k, inner)
  virtual void index_select(const Tensor& x, const Tensor& index, const Tensor& out) = 0;
  // out: (outer, n, inner) += src: (outer, k, inner) at rows index (k)
  virtual void index_add(const Tensor& out, const Tensor& index, const Tensor& src) = 0;
  // Along dim 1 of 3-D views: out[o, j, i] = x[o, index[o, j, i], i]
  virtual void gather(const Tensor& x, const Tensor& index, const Tensor& out) = 0;
  // out[o, index[o, j, i], i] += src[o, j, i]
  virtual void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src) = 0;
  // x: (rows, n) contiguous; softmax (or log_softmax) of each row.
  virtual void softmax(const Tensor& x, const Tensor& out, bool log) = 0;
  // grad_in = y·(g − Σ g·y) for softmax, g − exp(y)·Σ g for log_softmax; all (rows, n) contiguous.
  virtual void softmax_backward(const Tensor& grad, const Tensor& y, const Tensor& grad_in, bool log) = 0;
};

// The backend of a device; throws when the device type is not built in or the index does not exist.
Backend& backend(Device device);
Backend& cpu_backend();
// Throws in a build without CUDA (tensor/cuda_stub.cpp).
Backend& cuda_backend();

}  // namespace weft::detail
