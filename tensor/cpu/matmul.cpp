// CPU matrix products through Eigen's GEMM. Operands are mapped in place, without copies,
// whenever one of their two trailing strides is 1 (a row-major matrix or a transposed view of
// one); only an operand strided in both dims is first made contiguous. The batch loop is outside
// Eigen, which parallelises each product itself.
//
// a: (B, M, K) · b: (B, K, N) -> out: (B, M, N)
#include <Eigen/Core>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using OuterStride = Eigen::OuterStride<Eigen::Dynamic>;

// Calls fn with an Eigen map of the matrix `index` of a (B, R, C) tensor.
template <class T, class Fn>
void with_matrix(const Tensor& t, int64_t index, Fn fn) {
  const T* base = t.data<T>() + index * t.stride(0);
  const int64_t rows = t.size(1), cols = t.size(2);
  if (t.stride(2) == 1 || cols == 1) {
    fn(Eigen::Map<const RowMajor<T>, 0, OuterStride>(base, rows, cols, OuterStride(std::max<int64_t>(t.stride(1), cols))));
  } else {
    fn(Eigen::Map<const ColMajor<T>, 0, OuterStride>(base, rows, cols, OuterStride(std::max<int64_t>(t.stride(2), rows))));
  }
}

bool mappable(const Tensor& t) { return t.stride(2) == 1 || t.stride(1) == 1 || t.size(2) == 1; }

template <class T>
void gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  for (int64_t i = 0; i < batch; ++i) {
    Eigen::Map<RowMajor<T>> c(out.data<T>() + i * m * n, m, n);
    with_matrix<T>(a, i, [&](const auto& am) {
      with_matrix<T>(b, i, [&](const auto& bm) { c.noalias() = am * bm; });
    });
  }
}

template <class T>
void integer_gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  T* o = out.data<T>();
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc = static_cast<T>(acc + ap[s * a.stride(0) + i * a.stride(1) + p * a.stride(2)] *
                                         bp[s * b.stride(0) + p * b.stride(1) + j * b.stride(2)]);
        o[(s * m + i) * n + j] = acc;
      }
}

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out_in) {
  Tensor a = widen_if_narrow(a_in);
  Tensor b = widen_if_narrow(b_in);
  const Tensor out = compute_target(out_in);
  if (out.numel() == 0) return;
  if (a.size(2) == 0) {
    fill(out, 0.0);
  } else if (is_floating(a.dtype())) {
    if (!mappable(a)) a = dense(a);
    if (!mappable(b)) b = dense(b);
    WEFT_DISPATCH_FLOATING(a.dtype(), T, gemm<T>(a, b, out));
  } else {
    WEFT_DISPATCH_COMPUTE(a.dtype(), T, integer_gemm<T>(a, b, out));
  }
  store_from(out, out_in);
}

}  // namespace weft::detail
