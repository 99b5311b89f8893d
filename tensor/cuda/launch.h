// What the host side of the CUDA backend hands its kernels: strided views as plain structs and
// the launch functions of the .cu files. No Tensor and no CUDA header, so both g++ (the .cpp
// wrappers, tensor/cuda/cuda_backend.cpp) and nvcc (the kernels) include it; the streams are
// passed as the opaque cudaStream_t they are.
//
// Every launch function queues its kernels on `stream` and returns; a launch error throws.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/op_kinds.h"

struct CUstream_st;

namespace weft::cuda::detail {

using StreamHandle = CUstream_st*;
using weft::detail::BinaryOp;
using weft::detail::ReduceOp;
using weft::detail::UnaryOp;

inline constexpr int kMaxDims = 8;

// One operand of an elementwise kernel: element (c0, …, c[dims-1]) of the iteration shape `sizes`
// is at data + Σ c_d·strides[d] elements. Operands of one launch share `sizes` (a broadcast input
// has stride 0); the host merges dims that are contiguous in every operand first.
struct View {
  char* data = nullptr;
  DType dtype = kFloat32;
  int32_t dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// ---- elementwise (tensor/cuda/elementwise.cu); n = the number of elements of the shape ----
void launch_copy(const View& dst, const View& src, int64_t n, StreamHandle stream);
void launch_fill(const View& dst, double value, int64_t n, StreamHandle stream);
void launch_unary(UnaryOp op, const View& x, const View& out, double p0, double p1, int64_t n, StreamHandle stream);
void launch_binary(BinaryOp op, const View& a, const View& b, const View& out, int64_t n, StreamHandle stream);
void launch_where(const View& cond, const View& a, const View& b, const View& out, int64_t n, StreamHandle stream);

// ---- rows (tensor/cuda/reduce.cu); x and out contiguous, x: (rows, n) ----
void launch_reduce(ReduceOp op, const void* x, DType x_dtype, void* out, DType out_dtype, int64_t rows, int64_t n,
                   StreamHandle stream);
// x: (n, cols) -> out: (cols)
void launch_sum_columns(const void* x, DType x_dtype, void* out, DType out_dtype, int64_t n, int64_t cols,
                        StreamHandle stream);
void launch_softmax(const void* x, void* out, DType dtype, int64_t rows, int64_t n, bool log, StreamHandle stream);
void launch_softmax_backward(const void* grad, const void* y, void* grad_in, DType dtype, int64_t rows, int64_t n,
                             bool log, StreamHandle stream);

// ---- indexing (tensor/cuda/indexing.cu); 3-D views (outer, n or k, inner), index int64 ----
// Out-of-range indices are recorded in `error` and skipped (Note [Deferred device errors]).
struct DeviceError;
void launch_index_select(const View& x, const int64_t* index, int64_t k, const View& out, DeviceError* error,
                         StreamHandle stream);
void launch_index_add(const View& out, const int64_t* index, int64_t k, const View& src, DeviceError* error,
                      StreamHandle stream);
void launch_gather(const View& x, const View& index, const View& out, DeviceError* error, StreamHandle stream);
void launch_scatter_add(const View& out, const View& index, const View& src, DeviceError* error, StreamHandle stream);

}  // namespace weft::cuda::detail
