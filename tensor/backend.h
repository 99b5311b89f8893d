// The device seam: the small set of kernels an op front-end needs from a device.
//
// Front-ends (tensor/*.cpp) do all checking, shape logic, dtype promotion and autograd; they
// then call backend(device).<kernel>. A backend only moves and computes numbers. The CPU backend
// (tensor/cpu/) is always built; a CUDA backend registers itself when weft is built with
// -DWEFT_CUDA=ON. Asking for a device whose backend is absent fails with the way out.
//
// Contracts shared by all kernels (Note [Kernel contracts]):
// - `out` tensors are contiguous and already allocated with the final shape and dtype.
// - Inputs may have any strides, including 0 (broadcast by expand()).
// - Unless a kernel says otherwise, inputs have the dtype of `out`. Narrow floating dtypes
//   (float16, bfloat16, float8) are computed in float32 and rounded once on store.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace weft::detail {

enum class UnaryOp {
  Neg, Abs, Sign, Exp, Log, Sqrt, Rsqrt, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh,
  Clamp,       // params: (low, high); ±inf for an open side
  PowScalar,   // params: (exponent)
  LogicalNot,  // out is bool
  IsFinite,    // out is bool
};

enum class BinaryOp {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // out is bool
  // Fused backward rules: (grad, saved) -> grad_input.
  ReluBackward,      // saved = input
  GeluBackward,      // saved = input
  GeluTanhBackward,  // saved = input
  SiluBackward,      // saved = input
  SigmoidBackward,   // saved = output
  TanhBackward,      // saved = output
};

enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };

class Backend {
 public:
  virtual ~Backend() = default;

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

Backend& backend(Device device);
void register_backend(DeviceType type, Backend* backend);

}  // namespace weft::detail
