// The process-wide cross-rank reduction seam (see cross_rank.h).
#include "precision/cross_rank.h"

#include <mutex>

namespace weft::precision {
namespace {

std::mutex g_mutex;
CrossRankMax g_reduce_max;

}  // namespace

void all_reduce_max_across_ranks(const Tensor& values) {
  CrossRankMax reduce;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    reduce = g_reduce_max;
  }
  if (reduce) reduce(values);
}

bool cross_rank_reduction_installed() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<bool>(g_reduce_max);
}

CrossRankReductionGuard::CrossRankReductionGuard(CrossRankMax reduce_max) {
  std::lock_guard<std::mutex> lock(g_mutex);
  previous_ = std::move(g_reduce_max);
  g_reduce_max = std::move(reduce_max);
}

CrossRankReductionGuard::~CrossRankReductionGuard() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_reduce_max = std::move(previous_);
}

}  // namespace weft::precision
