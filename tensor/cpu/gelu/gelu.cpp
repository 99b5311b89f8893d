// The CPU kernel of the fused tanh GELU (tensor/fused_kernels.h, GeluTanhLaunch): the forward and
// the gradient over contiguous float32 or bfloat16, in blocks spread over the threads, each block
// on the best vector kernel the CPU has (gelu_avx512.cpp, gelu_avx2.cpp) or on the scalar
// reference below. The forward may keep the formula's tanh for the gradient (GeluTanhLaunch::tanh),
// which then does a third of the work. The reference is the elementwise ops' own per-element formulas
// (tensor/elementwise_math.h), so every path gives the bits those ops give.
#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gelu/gelu_kernels.h"
#include "tensor/cpu/loops.h"
#include "tensor/elementwise_math.h"

namespace weft::detail {
namespace {

// The formulas of unary_scalar<GeluTanh> and binary_scalar<GeluTanhBackward> split at the tanh,
// operation for operation, for a launch that carries it from the forward to the gradient.
float tanh_of(float x) { return gelu_tanh_of(float(kSqrt2OverPi) * (x + float(kGeluCubic) * x * x * x)); }
float forward_from(float x, float t) { return 0.5f * x * (1.0f + t); }
float backward_from(float g, float x, float t) {
  const float d_inner = float(kSqrt2OverPi) * (1.0f + float(3 * kGeluCubic) * x * x);
  return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
}

// The scalar reference: n elements from `first`, stored as S, computed in float.
template <class S>
void reference(const GeluTanhLaunch& a, int64_t first, int64_t n) {
  const S* x = static_cast<const S*>(a.x.data_ptr()) + first;
  S* out = static_cast<S*>(a.out.data_ptr()) + first;
  float* t = a.tanh.defined() ? a.tanh.data<float>() + first : nullptr;
  if (!a.grad.defined()) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = convert<float>(x[i]);
      if (!t) {
        out[i] = convert<S>(unary_scalar<UnaryOp::GeluTanh>(v, 0, 0));
        continue;
      }
      t[i] = tanh_of(v);
      out[i] = convert<S>(forward_from(v, t[i]));
    }
    return;
  }
  const S* g = static_cast<const S*>(a.grad.data_ptr()) + first;
  for (int64_t i = 0; i < n; ++i) {
    const float gv = convert<float>(g[i]), v = convert<float>(x[i]);
    out[i] = convert<S>(t ? backward_from(gv, v, t[i]) : binary_scalar<BinaryOp::GeluTanhBackward>(gv, v));
  }
}

// n elements from `first` on the CPU's best kernel for the dtype.
void run_block(const GeluTanhLaunch& a, int64_t first, int64_t n) {
  const bool bf16 = a.x.dtype() == DType::BFloat16;
  const size_t bytes = bf16 ? 2 : 4;
  const auto at = [&](const Tensor& t) { return static_cast<const char*>(t.data_ptr()) + first * bytes; };
  char* out = static_cast<char*>(a.out.data_ptr()) + first * bytes;
  const bool backward = a.grad.defined();
  float* t = a.tanh.defined() ? a.tanh.data<float>() + first : nullptr;
  const CpuIsa isa = cpu_isa();
  if (isa >= CpuIsa::Avx512) {
    if (backward) gelu_tanh_backward_avx512(at(a.grad), at(a.x), t, out, n, bf16);
    else gelu_tanh_forward_avx512(at(a.x), out, t, n, bf16);
  } else if (isa == CpuIsa::Avx2 && !bf16) {
    const auto* x = reinterpret_cast<const float*>(at(a.x));
    if (backward) gelu_tanh_backward_avx2(reinterpret_cast<const float*>(at(a.grad)), x, t, reinterpret_cast<float*>(out), n);
    else gelu_tanh_forward_avx2(x, reinterpret_cast<float*>(out), t, n);
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
  WEFT_CHECK(!a.tanh.defined() || (a.tanh.dtype() == DType::Float32 && a.tanh.numel() == a.x.numel() &&
                                   a.tanh.is_contiguous()),
             "[gelu] internal: the fused tanh GELU's saved tanh must be contiguous float32 of the input's size");
  for_each_vector_block(a.x.numel(), [&](int64_t first, int64_t n) { run_block(a, first, n); });
}

}  // namespace weft::detail
