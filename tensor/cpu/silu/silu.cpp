// The CPU kernel of fused SiLU (tensor/fused_kernels.h, SiluLaunch): the forward and the gradient
// over contiguous float32 or bfloat16, in blocks spread over the threads, each block on the AVX-512
// kernel (silu_avx512.cpp) where the CPU has it, else on the scalar reference below: the
// elementwise ops' own per-element formulas (tensor/elementwise_math.h), so every path gives the
// bits those ops give.
#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/isa.h"
#include "tensor/cpu/loops.h"
#include "tensor/cpu/silu/silu_kernels.h"
#include "tensor/elementwise_math.h"

namespace weft::detail {
namespace {

// The scalar reference: n elements from `first`, stored as S, computed in float.
template <class S>
void reference(const SiluLaunch& a, int64_t first, int64_t n) {
  const S* x = static_cast<const S*>(a.x.data_ptr()) + first;
  S* out = static_cast<S*>(a.out.data_ptr()) + first;
  if (!a.grad.defined()) {
    for (int64_t i = 0; i < n; ++i) out[i] = convert<S>(unary_scalar<UnaryOp::Silu>(convert<float>(x[i]), 0, 0));
    return;
  }
  const S* g = static_cast<const S*>(a.grad.data_ptr()) + first;
  for (int64_t i = 0; i < n; ++i)
    out[i] = convert<S>(binary_scalar<BinaryOp::SiluBackward>(convert<float>(g[i]), convert<float>(x[i])));
}

// n elements from `first` on the CPU's best kernel for the dtype.
void run_block(const SiluLaunch& a, int64_t first, int64_t n) {
  const bool bf16 = a.x.dtype() == DType::BFloat16;
  if (cpu_isa() < CpuIsa::Avx512) return bf16 ? reference<BFloat16>(a, first, n) : reference<float>(a, first, n);
  const size_t bytes = bf16 ? 2 : 4;
  const auto at = [&](const Tensor& t) { return static_cast<const char*>(t.data_ptr()) + first * bytes; };
  char* out = static_cast<char*>(a.out.data_ptr()) + first * bytes;
  if (a.grad.defined()) silu_backward_avx512(at(a.grad), at(a.x), out, n, bf16);
  else silu_forward_avx512(at(a.x), out, n, bf16);
}

}  // namespace

void cpu_silu(const SiluLaunch& a) {
  WEFT_CHECK((a.x.dtype() == DType::Float32 || a.x.dtype() == DType::BFloat16) && a.out.dtype() == a.x.dtype() &&
                 (!a.grad.defined() || a.grad.dtype() == a.x.dtype()),
             "[silu] internal: the fused SiLU takes float32 or bfloat16 throughout, got ", a.x.dtype());
  for_each_vector_block(a.x.numel(), [&](int64_t first, int64_t n) { run_block(a, first, n); });
}

}  // namespace weft::detail
