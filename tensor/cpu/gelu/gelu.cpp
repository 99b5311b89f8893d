// The CPU kernel of the fused tanh GELU (tensor/fused_kernels.h, GeluTanhLaunch): the forward and
// the gradient over contiguous float32 or bfloat16, in blocks spread over the threads, each block
// on the best vector kernel the CPU has (gelu_avx512.cpp, gelu_avx2.cpp) or on the scalar
// reference below. The reference is the elementwise ops' own per-element formulas
// (tensor/elementwise_math.h), so every path gives the bits those ops give.
#include <algorithm>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gelu/gelu_kernels.h"
#include "tensor/cpu/loops.h"
#include "tensor/elementwise_math.h"
#include "tensor/parallel.h"

namespace weft::detail {
namespace {

// The scalar reference: n elements from `first`, stored as S, computed in float.
template <class S>
void reference(const GeluTanhLaunch& a, int64_t first, int64_t n) {
  const S* x = static_cast<const S*>(a.x.data_ptr()) + first;
  S* out = static_cast<S*>(a.out.data_ptr()) + first;
  if (!a.grad.defined()) {
    for (int64_t i = 0; i < n; ++i) out[i] = convert<S>(unary_scalar<UnaryOp::GeluTanh>(convert<float>(x[i]), 0, 0));
    return;
  }
  const S* g = static_cast<const S*>(a.grad.data_ptr()) + first;
  for (int64_t i = 0; i < n; ++i)
    out[i] = convert<S>(binary_scalar<BinaryOp::GeluTanhBackward>(convert<float>(g[i]), convert<float>(x[i])));
}

// n elements from `first` on the CPU's best kernel for the dtype.
void run_block(const GeluTanhLaunch& a, int64_t first, int64_t n) {
  const bool bf16 = a.x.dtype() == DType::BFloat16;
  const size_t bytes = bf16 ? 2 : 4;
  const auto at = [&](const Tensor& t) { return static_cast<const char*>(t.data_ptr()) + first * bytes; };
  char* out = static_cast<char*>(a.out.data_ptr()) + first * bytes;
  const bool backward = a.grad.defined();
  const CpuIsa isa = cpu_isa();
  if (isa >= CpuIsa::Avx512) {
    if (backward) gelu_tanh_backward_avx512(at(a.grad), at(a.x), out, n, bf16);
    else gelu_tanh_forward_avx512(at(a.x), out, n, bf16);
  } else if (isa == CpuIsa::Avx2 && !bf16) {
    const auto* x = reinterpret_cast<const float*>(at(a.x));
    if (backward) gelu_tanh_backward_avx2(reinterpret_cast<const float*>(at(a.grad)), x, reinterpret_cast<float*>(out), n);
    else gelu_tanh_forward_avx2(x, reinterpret_cast<float*>(out), n);
  } else if (bf16) {
    reference<BFloat16>(a, first, n);
  } else {
    reference<float>(a, first, n);
  }
}

}  // namespace

void cpu_gelu_tanh(const GeluTanhLaunch& a) {
  WEFT_CHECK((a.x.dtype() == DType::Float32 || a.x.dtype() == DType::BFloat16) && a.out.dtype() == a.x.dtype() &&
                 (!a.grad.defined() || a.grad.dtype() == a.x.dtype()),
             "[gelu] internal: the fused tanh GELU takes float32 or bfloat16 throughout, got ", a.x.dtype());
  const int64_t n = a.x.numel();
  // Blocks of whole 16-lane vectors, a few per thread so a preempted thread's share moves.
  const int64_t blocks = n >= 2 * kParallelGrain ? 4 * static_cast<int64_t>(num_threads()) : 1;
  const int64_t block = ((n + blocks - 1) / blocks + 15) / 16 * 16;
  parallel_for_if(blocks > 1, blocks, [&](int64_t b) {
    const int64_t first = b * block;
    if (first < n) run_block(a, first, std::min(block, n - first));
  });
}

}  // namespace weft::detail
