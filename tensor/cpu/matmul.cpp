// CPU matrix products: a: (B, M, K) · b: (B, K, N) -> out: (B, M, N), or out += a · b when
// accumulating (linear's fused bias).
//
// float32 and bfloat16 products go to weft's own GEMM (tensor/cpu/gemm/gemm.h) unless another
// library is chosen (tensor/cpu/gemm_library.h). It reads every operand in place through its
// strides — transposed views, padded rows, rows repeated by expand — and bfloat16 without
// widening it first; a bfloat16 result is rounded by its own stores where it computes the product
// in one K chunk or transposed in AMX tiles (gemm_to_bf16), else computed into float32 scratch and
// converted. float16 is widened to float32; float64 has a GEMM of its own (gemm_f64). A batch of
// products each too small to be split over the threads is spread over them one product per
// thread instead. Integer products are a plain loop. A single row times a weight read in place
// (decode's linear at batch 1: a bfloat16 or float16 W with contiguous rows, or a float32 B with
// contiguous rows) goes to the batch-1 kernels (tensor/cpu/gemv.h), which read the weight once, as
// it lies, on every thread.
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/cpu/gemv.h"
#include "tensor/cpu/library_gemm.h"
#include "tensor/cpu/loops.h"
#include "tensor/parallel.h"

namespace weft::detail {
namespace {

// Below this much work per product (2·M·N·K) a batch is spread one product per thread.
constexpr int64_t kSmallProduct = int64_t{4} << 20;

GemmMatrix gemm_matrix(const Tensor& t, int64_t index) {
  const bool bf16 = t.dtype() == kBFloat16;
  const int64_t offset = index * t.stride(0) * (bf16 ? 2 : 4);
  return {static_cast<const char*>(t.data_ptr()) + offset, t.stride(1), t.stride(2), bf16};
}

// The products of a batch, one per thread when each is small.
template <class Fn>
void for_each_product(int64_t batch, int64_t work, Fn&& one) {
  if (batch > 1 && work <= kSmallProduct) return parallel_for(batch, one);
  for (int64_t i = 0; i < batch; ++i) one(i);
}

void weft_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  float* c = out.data<float>();
  for_each_product(batch, 2 * m * n * k, [&](int64_t i) {
    gemm(m, n, k, gemm_matrix(a, i), gemm_matrix(b, i), c + i * m * n, n, accumulate);
  });
}

void weft_gemm_f64(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  auto matrix = [](const Tensor& t, int64_t i) {
    return GemmMatrixF64{t.data<double>() + i * t.stride(0), t.stride(1), t.stride(2)};
  };
  double* c = out.data<double>();
  for_each_product(batch, 2 * m * n * k, [&](int64_t i) {
    gemm_f64(m, n, k, matrix(a, i), matrix(b, i), c + i * m * n, n, accumulate);
  });
}

// bfloat16 operands into a contiguous bfloat16 out, rounded by the GEMM's own stores (no float32
// C and no conversion pass over it), where weft's GEMM can (gemm_stores_bf16).
bool weft_gemm_to_bf16(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  if (a.dtype() != kBFloat16 || b.dtype() != kBFloat16 || out.dtype() != kBFloat16 || !out.is_contiguous() ||
      !gemm_stores_bf16(m, n, k, gemm_matrix(a, 0), gemm_matrix(b, 0)))
    return false;
  auto* c = static_cast<uint16_t*>(out.data_ptr());
  for_each_product(batch, 2 * m * n * k, [&](int64_t i) {
    gemm_to_bf16(m, n, k, gemm_matrix(a, i), gemm_matrix(b, i), c + i * m * n, n, accumulate);
  });
  return true;
}

// One row times a weight, (1, 1, K) · (1, K, N) -> (1, 1, N), through the batch-1 kernels where
// the weight's layout is one they read in place: bfloat16 or float16 operands with B's columns contiguous
// (linear's Wᵀ, W (N×K) row-major), or float32 ones with B's rows contiguous (a weight stored
// [in, out]). float32 x·Wᵀ is left to the GEMM, whose transposed path computes it as dot
// products of W's rows already. A 16-bit result is summed in float32 and rounded once.
bool batch1_gemv(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  if (out.size(0) != 1 || out.size(1) != 1 || a.size(2) == 0 || out.size(2) == 0) return false;
  const int64_t n = out.size(2), k = a.size(2);
  const bool x_contiguous = a.stride(2) == 1 || k == 1;
  const CpuIsa isa = cpu_isa();
  const bool narrow = (a.dtype() == kBFloat16 || a.dtype() == kFloat16) && b.dtype() == a.dtype();
  if (narrow && (out.dtype() == a.dtype() || out.dtype() == kFloat32) && x_contiguous && b.stride(1) == 1) {
    const bool direct = out.dtype() == kFloat32 && out.stride(2) == 1;
    const Tensor y = direct ? out : make_tensor({1, 1, n}, kFloat32, kCPU);
    if (accumulate && !direct) cpu_backend().copy(out, y);
    const auto* w = static_cast<const uint16_t*>(b.data_ptr());
    const auto* x = static_cast<const uint16_t*>(a.data_ptr());
    if (a.dtype() == kBFloat16) gemv_bf16_rows(isa, w, b.stride(2), x, k, n, y.data<float>(), accumulate);
    else gemv_f16_rows(isa, w, b.stride(2), x, k, n, y.data<float>(), accumulate);
    if (!direct) cpu_backend().copy(y, out);
    return true;
  }
  if (a.dtype() == kFloat32 && b.dtype() == kFloat32 && out.dtype() == kFloat32 && x_contiguous && b.stride(2) == 1 &&
      b.stride(1) != 1 && out.stride(2) == 1) {
    gemv_f32_cols(isa, a.data<float>(), b.data<float>(), b.stride(1), k, n, out.data<float>(), accumulate);
    return true;
  }
  return false;
}

template <class T>
void integer_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  T* o = out.data<T>();
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = accumulate ? o[(s * m + i) * n + j] : T(0);
        for (int64_t p = 0; p < k; ++p)
          acc = static_cast<T>(acc + ap[s * a.stride(0) + i * a.stride(1) + p * a.stride(2)] *
                                         bp[s * b.stride(0) + p * b.stride(1) + j * b.stride(2)]);
        o[(s * m + i) * n + j] = acc;
      }
}

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out_in, bool accumulate) {
  const GemmLibrary library = cpu_gemm_library();
  if (library == GemmLibrary::Weft && out_in.numel() > 0 && batch1_gemv(a_in, b_in, out_in, accumulate)) return;
  if (library == GemmLibrary::Weft && out_in.numel() > 0 && weft_gemm_to_bf16(a_in, b_in, out_in, accumulate)) return;
  // weft's GEMM reads bfloat16 as it is; every other path computes narrow floats in float32.
  const bool bf16_in_place = library == GemmLibrary::Weft && a_in.dtype() == kBFloat16 && b_in.dtype() == kBFloat16;
  const Tensor a = bf16_in_place ? a_in : widen_if_narrow(a_in);
  const Tensor b = bf16_in_place ? b_in : widen_if_narrow(b_in);
  const Tensor out = compute_target(out_in);
  if (out.numel() == 0) return;
  if (accumulate && !out.is_same(out_in)) copy(out_in, out);
  if (a.size(2) == 0) {
    if (!accumulate) fill(out, 0.0);
  } else if (out.dtype() == kFloat32 && library == GemmLibrary::Weft) {
    weft_gemm(a, b, out, accumulate);
  } else if (out.dtype() == kFloat32) {
    library_gemm<float>(library, a, b, out, accumulate);
  } else if (out.dtype() == kFloat64 && library == GemmLibrary::Weft) {
    weft_gemm_f64(a, b, out, accumulate);
  } else if (out.dtype() == kFloat64) {
    library_gemm<double>(library, a, b, out, accumulate);
  } else {
    WEFT_DISPATCH_COMPUTE(a.dtype(), T, integer_gemm<T>(a, b, out, accumulate));
  }
  store_from(out, out_in);
}

}  // namespace weft::detail
