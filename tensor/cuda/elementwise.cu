// Elementwise CUDA kernels: copy with dtype conversion, fill, the unary and binary ops and where.
// One thread per element of the (merged) iteration shape, grid-stride; each op is the WEFT_HD
// scalar of tensor/elementwise_math.h that the CPU kernels use, in the same compute type
// (tensor/cuda/device_values.cuh), so CPU and GPU agree up to the rounding of the math library.
#include <cuda_runtime.h>

#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"
#include "tensor/elementwise_math.h"

namespace weft::cuda::detail {
namespace {

using weft::detail::binary_scalar;
using weft::detail::kBinarySupports;
using weft::detail::kUnarySupports;
using weft::detail::unary_scalar;

// I: the intermediate type of the conversion (double from floating sources, int64 otherwise).
template <class I>
__global__ void copy_kernel(View dst, View src, int64_t n) {
  WEFT_GRID_LOOP(i, n) store_as(element(dst, i), dst.dtype, load_as<I>(element(src, i), src.dtype));
}

__global__ void fill_kernel(View dst, double value, int64_t n) {
  WEFT_GRID_LOOP(i, n) store_as(element(dst, i), dst.dtype, value);
}

template <UnaryOp OP, class C>
__global__ void unary_kernel(View x, View out, double p0, double p1, int64_t n) {
  WEFT_GRID_LOOP(i, n) {
    const C v = load_as<C>(element(x, i), x.dtype);
    store_as(element(out, i), out.dtype, unary_scalar<OP, C>(v, p0, p1));
  }
}

template <BinaryOp OP, class C>
__global__ void binary_kernel(View a, View b, View out, int64_t n) {
  WEFT_GRID_LOOP(i, n) {
    const C x = load_as<C>(element(a, i), a.dtype);
    const C y = load_as<C>(element(b, i), b.dtype);
    store_as(element(out, i), out.dtype, binary_scalar<OP, C>(x, y));
  }
}

// a, b and out share a dtype: the chosen element is moved as bytes.
__global__ void where_kernel(View cond, View a, View b, View out, int64_t n) {
  const int64_t size = itemsize_of(out.dtype);
  WEFT_GRID_LOOP(i, n) {
    const char* from = *reinterpret_cast<const bool*>(element(cond, i)) ? element(a, i) : element(b, i);
    char* to = element(out, i);
    for (int64_t byte = 0; byte < size; ++byte) to[byte] = from[byte];
  }
}

// Calls fn(C{}) with the compute type of dtype d (device_values.cuh).
template <class Fn>
void visit_compute(DType d, Fn&& fn) {
  if (d == kFloat64) fn(double{});
  else if (is_floating(d)) fn(float{});
  else if (d == kBool) fn(bool{});
  else fn(int64_t{});
}

template <UnaryOp OP>
void unary_as(const View& x, const View& out, double p0, double p1, int64_t n, StreamHandle stream) {
  visit_compute(x.dtype, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (kUnarySupports<OP, C>) unary_kernel<OP, C><<<blocks_for(n), kThreads, 0, stream>>>(x, out, p0, p1, n);
    else WEFT_FAIL("[cuda] internal: unary op ", static_cast<int>(OP), " has no ", x.dtype, " kernel");
  });
}

template <BinaryOp OP>
void binary_as(const View& a, const View& b, const View& out, int64_t n, StreamHandle stream) {
  visit_compute(a.dtype, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (kBinarySupports<OP, C>) binary_kernel<OP, C><<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
    else WEFT_FAIL("[cuda] internal: binary op ", static_cast<int>(OP), " has no ", a.dtype, " kernel");
  });
}

}  // namespace

void launch_copy(const View& dst, const View& src, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  if (is_floating(src.dtype)) copy_kernel<double><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  else copy_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  check_launch("copy");
}

void launch_fill(const View& dst, double value, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, value, n);
  check_launch("fill");
}

void launch_unary(UnaryOp op, const View& x, const View& out, double p0, double p1, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  switch (op) {
#define WEFT_UNARY_CASE(OP) \
  case UnaryOp::OP: unary_as<UnaryOp::OP>(x, out, p0, p1, n, stream); break;
    WEFT_UNARY_CASE(Neg) WEFT_UNARY_CASE(Abs) WEFT_UNARY_CASE(Sign) WEFT_UNARY_CASE(Exp) WEFT_UNARY_CASE(Log)
    WEFT_UNARY_CASE(Sqrt) WEFT_UNARY_CASE(Rsqrt) WEFT_UNARY_CASE(Relu) WEFT_UNARY_CASE(Gelu)
    WEFT_UNARY_CASE(GeluTanh) WEFT_UNARY_CASE(Silu) WEFT_UNARY_CASE(Sigmoid) WEFT_UNARY_CASE(Tanh)
    WEFT_UNARY_CASE(Clamp) WEFT_UNARY_CASE(PowScalar) WEFT_UNARY_CASE(LogicalNot) WEFT_UNARY_CASE(IsFinite)
#undef WEFT_UNARY_CASE
  }
  check_launch("unary");
}

void launch_binary(BinaryOp op, const View& a, const View& b, const View& out, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  switch (op) {
#define WEFT_BINARY_CASE(OP) \
  case BinaryOp::OP: binary_as<BinaryOp::OP>(a, b, out, n, stream); break;
    WEFT_BINARY_CASE(Add) WEFT_BINARY_CASE(Sub) WEFT_BINARY_CASE(Mul) WEFT_BINARY_CASE(Div) WEFT_BINARY_CASE(Pow)
    WEFT_BINARY_CASE(Maximum) WEFT_BINARY_CASE(Minimum) WEFT_BINARY_CASE(Eq) WEFT_BINARY_CASE(Ne)
    WEFT_BINARY_CASE(Lt) WEFT_BINARY_CASE(Le) WEFT_BINARY_CASE(Gt) WEFT_BINARY_CASE(Ge)
    WEFT_BINARY_CASE(ReluBackward) WEFT_BINARY_CASE(GeluBackward) WEFT_BINARY_CASE(GeluTanhBackward)
    WEFT_BINARY_CASE(SiluBackward) WEFT_BINARY_CASE(SigmoidBackward) WEFT_BINARY_CASE(TanhBackward)
#undef WEFT_BINARY_CASE
  }
  check_launch("binary");
}

void launch_where(const View& cond, const View& a, const View& b, const View& out, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  where_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cond, a, b, out, n);
  check_launch("where");
}

}  // namespace weft::cuda::detail
