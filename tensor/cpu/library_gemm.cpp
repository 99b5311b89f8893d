// Eigen's and OpenBLAS's GEMMs behind weft's thread pool, and the process-wide library choice.
// Each is compiled in only when the build asks for it (WEFT_EIGEN, WEFT_OPENBLAS: both off by
// default, so the default library needs neither); a choice this build lacks is refused up front.
//
// Operands are handed over in place whenever each matrix is row-major or a transposed view of a
// row-major matrix (both libraries take both); an operand strided in both dims, or whose rows
// overlap (an expanded view), is first made contiguous. Each product is cut into one block of C
// per thread, along its larger dimension, and each block is one single-threaded library call:
// weft links no OpenMP, and OpenBLAS (its OpenMP build, when linked) is told to use one thread,
// so its OpenMP runtime never starts a team that would spin against weft's pool.
#include "tensor/cpu/library_gemm.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <optional>

#ifdef WEFT_HAVE_EIGEN
#include <Eigen/Core>
#endif
#ifdef WEFT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/enum_check.h"
#include "tensor/parallel.h"

namespace weft {
namespace {

std::atomic<GemmLibrary> active_library{GemmLibrary::Weft};
constexpr int kNumGemmLibraries = 3;  // Weft, Eigen, OpenBLAS

}  // namespace

const char* to_string(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::Weft: return "weft";
    case GemmLibrary::Eigen: return "eigen";
    case GemmLibrary::OpenBLAS: return "openblas";
  }
  return "?";
}

GemmLibrary gemm_library_from_name(const std::string& name) {
  for (GemmLibrary library : {GemmLibrary::Weft, GemmLibrary::Eigen, GemmLibrary::OpenBLAS})
    if (name == to_string(library)) return library;
  WEFT_FAIL("[gemm_library] expected one of weft, eigen, openblas, got '", name, "'");
}

#ifdef WEFT_HAVE_EIGEN
constexpr bool kHaveEigen = true;
#else
constexpr bool kHaveEigen = false;
#endif
#ifdef WEFT_HAVE_OPENBLAS
constexpr bool kHaveOpenBLAS = true;
#else
constexpr bool kHaveOpenBLAS = false;
#endif

bool cpu_gemm_library_available(GemmLibrary library) {
  detail::check_enum(library, kNumGemmLibraries, "cpu_gemm_library_available", "GemmLibrary");
  switch (library) {
    case GemmLibrary::Weft: return true;
    case GemmLibrary::Eigen: return kHaveEigen;
    case GemmLibrary::OpenBLAS: return kHaveOpenBLAS;
  }
  return false;
}

GemmLibrary cpu_gemm_library() { return active_library.load(); }

void set_cpu_gemm_library(GemmLibrary library) {
  detail::check_enum(library, kNumGemmLibraries, "set_cpu_gemm_library", "GemmLibrary");
  WEFT_CHECK(library != GemmLibrary::Eigen || kHaveEigen,
             "[set_cpu_gemm_library] built without Eigen: configure with -DWEFT_EIGEN=ON");
  WEFT_CHECK(library != GemmLibrary::OpenBLAS || kHaveOpenBLAS, "[set_cpu_gemm_library] built without OpenBLAS: "
             "install libopenblas-openmp-dev and configure with -DWEFT_OPENBLAS=ON");
  active_library.store(library);
}

std::string cpu_gemm_kernel(DType dtype) {
  const GemmLibrary library = cpu_gemm_library();
  if (library != GemmLibrary::Weft) return to_string(library);
  if (dtype == kFloat64) return std::string("weft ") + detail::gemm_f64_kernel_name(cpu_isa());
  return std::string("weft ") + detail::gemm_kernel_name(cpu_isa(), dtype == kBFloat16);
}

namespace detail {
namespace {

// Products with less work than this per thread are not split.
constexpr int64_t kWorkPerThread = int64_t{2} << 20;

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

// One block of C: rows [r0, r0+rows) and columns [c0, c0+cols) of product `index`.
struct Block {
  int64_t index, r0, rows, c0, cols;
};

#ifdef WEFT_HAVE_EIGEN
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
void eigen_block(const Tensor& a, MatrixLayout la, const Tensor& b, MatrixLayout lb, const Tensor& out, bool accumulate,
                 const Block& k) {
  const int64_t n = out.size(2);
  Eigen::Map<RowMajor<T>, 0, OuterStride> c(out.data<T>() + k.index * out.size(1) * n + k.r0 * n + k.c0, k.rows, k.cols,
                                            OuterStride(n));
  with_eigen_matrix<T>(a, la, k.index, [&](const auto& am) {
    with_eigen_matrix<T>(b, lb, k.index, [&](const auto& bm) {
      if (accumulate) c.noalias() += am.middleRows(k.r0, k.rows) * bm.middleCols(k.c0, k.cols);
      else c.noalias() = am.middleRows(k.r0, k.rows) * bm.middleCols(k.c0, k.cols);
    });
  });
}
#endif

#ifdef WEFT_HAVE_OPENBLAS
// The caller has checked that every size and leading dimension fits OpenBLAS's 32-bit ints.
template <class T>
void openblas_block(const Tensor& a, MatrixLayout la, const Tensor& b, MatrixLayout lb, const Tensor& out,
                    bool accumulate, const Block& k) {
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { openblas_set_num_threads(1); });
  const auto kk = static_cast<int>(a.size(2)), lda = static_cast<int>(la.ld), ldb = static_cast<int>(lb.ld);
  const auto n = static_cast<int>(out.size(2));
  const T* ap = a.data<T>() + k.index * a.stride(0) + (la.transposed ? k.r0 : k.r0 * la.ld);
  const T* bp = b.data<T>() + k.index * b.stride(0) + (lb.transposed ? k.c0 * lb.ld : k.c0);
  T* cp = out.data<T>() + k.index * out.size(1) * n + k.r0 * n + k.c0;
  const auto ta = la.transposed ? CblasTrans : CblasNoTrans, tb = lb.transposed ? CblasTrans : CblasNoTrans;
  const auto rows = static_cast<int>(k.rows), cols = static_cast<int>(k.cols);
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, kk, 1.0f, ap, lda, bp, ldb, beta, cp, n);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, kk, 1.0, ap, lda, bp, ldb, beta, cp, n);
}
#endif

}  // namespace

template <class T>
void library_gemm(GemmLibrary library, Tensor a, Tensor b, const Tensor& out, bool accumulate) {
  if (!gemm_layout(a)) a = dense(a);
  if (!gemm_layout(b)) b = dense(b);
  const MatrixLayout la = *gemm_layout(a), lb = *gemm_layout(b);
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  // OpenBLAS takes 32-bit sizes and leading dimensions; a product beyond them goes to Eigen.
  const bool fits_int = std::max({m, n, k, la.ld, lb.ld}) <= std::numeric_limits<int>::max();
  const bool openblas = library == GemmLibrary::OpenBLAS && fits_int;
  WEFT_CHECK(openblas || kHaveEigen, "[matmul] OpenBLAS takes sizes below 2^31, got (", m, ", ", k, ") · (", k, ", ",
             n, "); choose the gemm library 'weft' (set_cpu_gemm_library) for this product");
  const bool along_m = m >= n;
  const int64_t parts = std::clamp<int64_t>(2 * m * n * k / kWorkPerThread, 1, std::min<int64_t>(num_threads(), along_m ? m : n));
  parallel_for(batch * parts, [&](int64_t job) {
    const int64_t index = job / parts, part = job % parts, size = along_m ? m : n;
    const int64_t first = size * part / parts, count = size * (part + 1) / parts - first;
    const Block block = along_m ? Block{index, first, count, 0, n} : Block{index, 0, m, first, count};
#ifdef WEFT_HAVE_OPENBLAS
    if (openblas) return openblas_block<T>(a, la, b, lb, out, accumulate, block);
#endif
#ifdef WEFT_HAVE_EIGEN
    eigen_block<T>(a, la, b, lb, out, accumulate, block);
#else
    (void)block;  // a build with neither library never gets here: set_cpu_gemm_library refuses both
    (void)accumulate;
#endif
  });
}

template void library_gemm<float>(GemmLibrary, Tensor, Tensor, const Tensor&, bool);
template void library_gemm<double>(GemmLibrary, Tensor, Tensor, const Tensor&, bool);

}  // namespace detail
}  // namespace weft
