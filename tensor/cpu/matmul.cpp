// CPU matrix products. Floating products go to a GEMM library (tensor/cpu/gemm_library.h):
// OpenBLAS's sgemm/dgemm when weft is built with it, Eigen's otherwise; integer products to a
// plain loop. Operands are handed over in place, without copies, whenever each matrix is
// row-major or a transposed view of a row-major matrix (GEMMs take both); only an operand strided
// in both dims, or one whose rows overlap (an expanded view), is first made contiguous. The batch
// loop is outside the library, which parallelises each product itself on weft's OpenMP pool.
//
// a: (B, M, K) · b: (B, K, N) -> out: (B, M, N), or out += a · b when accumulating.
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>

#ifdef WEFT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gemm_library.h"
#include "tensor/cpu/loops.h"

namespace weft {
namespace {

std::atomic<GemmLibrary> active_library{
#ifdef WEFT_HAVE_OPENBLAS
    GemmLibrary::OpenBLAS
#else
    GemmLibrary::Eigen
#endif
};

}  // namespace

const char* to_string(GemmLibrary library) { return library == GemmLibrary::OpenBLAS ? "OpenBLAS" : "Eigen"; }

bool cpu_gemm_library_available(GemmLibrary library) {
#ifdef WEFT_HAVE_OPENBLAS
  (void)library;
  return true;
#else
  return library == GemmLibrary::Eigen;
#endif
}

GemmLibrary cpu_gemm_library() { return active_library.load(); }

void set_cpu_gemm_library(GemmLibrary library) {
  WEFT_CHECK(cpu_gemm_library_available(library), "[set_cpu_gemm_library] this build of weft has no ",
             to_string(library), "; install libopenblas-openmp-dev and reconfigure with -DWEFT_OPENBLAS=ON");
  active_library.store(library);
}

namespace detail {
namespace {

// How one (rows, cols) matrix of a (B, rows, cols) operand is laid out for a GEMM: a row-major
// matrix with leading dimension `ld`, or (transposed) the transpose of a row-major (cols, rows) one.
struct MatrixLayout {
  bool transposed;
  int64_t ld;
};

std::optional<MatrixLayout> gemm_layout(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2), row_stride = t.stride(1), col_stride = t.stride(2);
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= cols))
    return MatrixLayout{false, rows == 1 ? cols : row_stride};
  if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= rows))
    return MatrixLayout{true, cols == 1 ? rows : col_stride};
  return std::nullopt;
}

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using OuterStride = Eigen::OuterStride<Eigen::Dynamic>;

// Calls fn with an Eigen map of matrix `index` of a (B, R, C) operand laid out as `layout`.
template <class T, class Fn>
void with_eigen_matrix(const Tensor& t, MatrixLayout layout, int64_t index, Fn fn) {
  const T* base = t.data<T>() + index * t.stride(0);
  if (layout.transposed) fn(Eigen::Map<const ColMajor<T>, 0, OuterStride>(base, t.size(1), t.size(2), OuterStride(layout.ld)));
  else fn(Eigen::Map<const RowMajor<T>, 0, OuterStride>(base, t.size(1), t.size(2), OuterStride(layout.ld)));
}

template <class T>
void eigen_gemm(const Tensor& a, MatrixLayout la, const Tensor& b, MatrixLayout lb, const Tensor& out, bool accumulate) {
  const int64_t m = out.size(1), n = out.size(2);
  for (int64_t i = 0; i < out.size(0); ++i) {
    Eigen::Map<RowMajor<T>> c(out.data<T>() + i * m * n, m, n);
    with_eigen_matrix<T>(a, la, i, [&](const auto& am) {
      with_eigen_matrix<T>(b, lb, i, [&](const auto& bm) {
        if (accumulate) c.noalias() += am * bm;
        else c.noalias() = am * bm;
      });
    });
  }
}

#ifdef WEFT_HAVE_OPENBLAS
// The caller has checked that every size and leading dimension fits OpenBLAS's 32-bit ints.
template <class T>
void openblas_gemm(const Tensor& a, MatrixLayout la, const Tensor& b, MatrixLayout lb, const Tensor& out, bool accumulate) {
  const auto m = static_cast<int>(out.size(1)), n = static_cast<int>(out.size(2)), k = static_cast<int>(a.size(2));
  const auto lda = static_cast<int>(la.ld), ldb = static_cast<int>(lb.ld);
  const auto ta = la.transposed ? CblasTrans : CblasNoTrans, tb = lb.transposed ? CblasTrans : CblasNoTrans;
  const T beta = accumulate ? T(1) : T(0);
  for (int64_t i = 0; i < out.size(0); ++i) {
    const T* ap = a.data<T>() + i * a.stride(0);
    const T* bp = b.data<T>() + i * b.stride(0);
    T* cp = out.data<T>() + i * int64_t{m} * n;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ap, lda, bp, ldb, beta, cp, n);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ap, lda, bp, ldb, beta, cp, n);
  }
}
#endif

template <class T>
void floating_gemm(Tensor a, Tensor b, const Tensor& out, bool accumulate) {
  if (!gemm_layout(a)) a = dense(a);
  if (!gemm_layout(b)) b = dense(b);
  const MatrixLayout la = *gemm_layout(a), lb = *gemm_layout(b);
#ifdef WEFT_HAVE_OPENBLAS
  // OpenBLAS takes 32-bit sizes and leading dimensions; a product beyond them goes to Eigen.
  const int64_t largest = std::max({out.size(1), out.size(2), a.size(2), la.ld, lb.ld});
  if (cpu_gemm_library() == GemmLibrary::OpenBLAS && largest <= std::numeric_limits<int>::max())
    return openblas_gemm<T>(a, la, b, lb, out, accumulate);
#endif
  eigen_gemm<T>(a, la, b, lb, out, accumulate);
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
  const Tensor a = widen_if_narrow(a_in);
  const Tensor b = widen_if_narrow(b_in);
  const Tensor out = compute_target(out_in);
  if (out.numel() == 0) return;
  if (accumulate && !out.is_same(out_in)) copy(out_in, out);
  if (a.size(2) == 0) {
    if (!accumulate) fill(out, 0.0);
  } else if (is_floating(a.dtype())) {
    WEFT_DISPATCH_FLOATING(a.dtype(), T, floating_gemm<T>(a, b, out, accumulate));
  } else {
    WEFT_DISPATCH_COMPUTE(a.dtype(), T, integer_gemm<T>(a, b, out, accumulate));
  }
  store_from(out, out_in);
}

}  // namespace detail
}  // namespace weft
