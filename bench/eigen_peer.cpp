// Eigen's GEMM for bench_matmul (eigen_peer.h). Compiled with -march=native and OpenMP.
#include "eigen_peer.h"

#include <Eigen/Core>

namespace bench {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

}  // namespace

void eigen_sgemm(int64_t m, int64_t n, int64_t k, const float* a, bool a_t, const float* b, bool b_t, float* c) {
  // The maps give Eigen the strides weft gets: A or Aᵀ, B or Bᵀ of row-major storage.
  Eigen::Map<RowMajor> cm(c, m, n);
  if (a_t && b_t) cm.noalias() = Eigen::Map<const ColMajor>(a, m, k) * Eigen::Map<const ColMajor>(b, k, n);
  else if (a_t) cm.noalias() = Eigen::Map<const ColMajor>(a, m, k) * Eigen::Map<const RowMajor>(b, k, n);
  else if (b_t) cm.noalias() = Eigen::Map<const RowMajor>(a, m, k) * Eigen::Map<const ColMajor>(b, k, n);
  else cm.noalias() = Eigen::Map<const RowMajor>(a, m, k) * Eigen::Map<const RowMajor>(b, k, n);
}

void eigen_set_threads(int threads) { Eigen::setNbThreads(threads); }
int eigen_threads() { return Eigen::nbThreads(); }

const char* eigen_simd() { return Eigen::SimdInstructionSetsInUse(); }

}  // namespace bench
