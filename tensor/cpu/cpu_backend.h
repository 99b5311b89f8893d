// The CPU implementation of the kernel seam in tensor/backend.h. Each group of kernels lives in
// its own file (copy.cpp, elementwise.cpp, reduce.cpp, matmul.cpp, indexing.cpp); this header
// only declares the class and the helpers they share.
#pragma once

#include "tensor/backend.h"
#include "tensor/fused_kernels.h"

namespace weft::detail {

class CpuBackend final : public Backend {
 public:
  int device_count() override { return 1; }
  Allocator& allocator(int index) override;
  void synchronize(int) override {}  // CPU kernels return when they are done

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

// Kernel scratch for the matrix products, which hand GEMM libraries float32 or dense operands
// (tensor/cpu/scratch.cpp). Every other kernel converts as it loads (tensor/cpu/convert.h).
// A contiguous CPU tensor over memory taken from the CPU allocator directly.
Tensor scratch_tensor(const Shape& shape, DType dtype);
// A float32 copy of a narrow-float tensor (same shape, contiguous); other tensors pass through.
Tensor widen_if_narrow(const Tensor& t);
// Where `out` is narrow, a float32 scratch tensor to compute into; else `out` itself.
Tensor compute_target(const Tensor& out);
// Rounds the scratch tensor back into `out` when they differ.
void store_from(const Tensor& scratch, const Tensor& out);
// t itself when contiguous, else a contiguous scratch copy.
Tensor dense(const Tensor& t);

// The CPU kernels of the fused features (tensor/cpu/fused.cpp).
void cpu_cross_entropy_forward(const CrossEntropyForward& args);
void cpu_cross_entropy_backward(const CrossEntropyBackward& args);
void cpu_layer_norm_forward(const LayerNormForward& args);
void cpu_layer_norm_backward(const LayerNormBackward& args);
void cpu_rms_norm(const RmsNormLaunch& args);  // tensor/cpu/rms_norm.cpp
void cpu_dropout(const DropoutLaunch& args);
void cpu_linear(const LinearLaunch& args);
void cpu_gelu_tanh(const GeluTanhLaunch& args);  // tensor/cpu/gelu/gelu.cpp
void cpu_silu(const SiluLaunch& args);  // tensor/cpu/silu/silu.cpp

// Checks that an int64 index lies in [0, n), naming the op.
void check_index(int64_t index, int64_t n, const char* op);

}  // namespace weft::detail
