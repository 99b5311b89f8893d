// Matrix products through cuBLASLt with a fused epilogue (bias, ReLU, GELU) and FP8 operands with
// per-tensor scales. The plan — operand swap, transposes, leading dimensions, epilogue value,
// FP8 rules — comes from tensor/gemm_plan.h; this turns it into descriptors and runs it on the
// current stream of out's device. Host code, compiled only with -DWEFT_CUDA=ON.
#pragma once

#include "tensor/gemm_plan.h"
#include "tensor/tensor.h"

namespace weft::cuda::detail {

// out: (M, N) contiguous = act(a: (M, K) · b: (K, N) [· a_scale · b_scale] + bias: (N)).
// a and b are float32, float16, bfloat16 (both out's dtype) or FP8 (E4M3/E5M2, not both E5M2;
// then a_scale and b_scale are device float pointers to their dequantisation factors and the
// plan must pass check_fp8_plan). bias: undefined or a contiguous (N) vector. Returns false,
// doing nothing, when an operand's layout has no plan (neither it nor its transpose is
// row-contiguous); the caller packs it or takes another path.
struct LtCall {
  Tensor a, b, bias, out;
  weft::detail::GemmActivation activation = weft::detail::GemmActivation::None;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
};
bool cublaslt_matmul(const LtCall& call);

}  // namespace weft::cuda::detail
