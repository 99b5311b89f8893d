// Eigen's GEMM for bench_matmul (eigen_peer.h). Compiled with -march=native and OpenMP.
#include "eigen_peer.h"

#include <Eigen/Core>

namespace bench {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

template <class T>
void product(int64_t m, int64_t n, int64_t k, const T* a, bool a_t, const T* b, bool b_t, T* c) {
  // The maps give Eigen the strides weft gets: A or Aᵀ, B or Bᵀ of row-major storage.
  Eigen::Map<RowMajor<T>> cm(c, m, n);
  if (a_t && b_t) cm.noalias() = Eigen::Map<const ColMajor<T>>(a, m, k) * Eigen::Map<const ColMajor<T>>(b, k, n);
  else if (a_t) cm.noalias() = Eigen::Map<const ColMajor<T>>(a, m, k) * Eigen::Map<const RowMajor<T>>(b, k, n);
  else if (b_t) cm.noalias() = Eigen::Map<const RowMajor<T>>(a, m, k) * Eigen::Map<const ColMajor<T>>(b, k, n);
  else cm.noalias() = Eigen::Map<const RowMajor<T>>(a, m, k) * Eigen::Map<const RowMajor<T>>(b, k, n);
}

}  // namespace

void eigen_gemm(int64_t m, int64_t n, int64_t k, const float* a, bool a_t, const float* b, bool b_t, float* c) {
  product(m, n, k, a, a_t, b, b_t, c);
}

void eigen_gemm(int64_t m, int64_t n, int64_t k, const double* a, bool a_t, const double* b, bool b_t, double* c) {
  product(m, n, k, a, a_t, b, b_t, c);
}

void eigen_set_threads(int threads) { Eigen::setNbThreads(threads); }
int eigen_threads() { return Eigen::nbThreads(); }

const char* eigen_simd() { return Eigen::SimdInstructionSetsInUse(); }

}  // namespace bench
