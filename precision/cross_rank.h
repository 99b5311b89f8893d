// A seam through which precision code combines values across data-parallel ranks without
// depending on distributed/ (a higher floor): FP8 recipes take the maximum of their amax over all
// ranks so that every rank scales alike.
//
//   precision::all_reduce_max_across_ranks(amax);   // in place; a no-op in a single process
//
// A data-parallel strategy installs the reduction for its ranks with a CrossRankReductionGuard
// (process-wide, nested guards restore the previous one) and removes it when it ends.
#pragma once

#include <functional>

#include "tensor/tensor.h"

namespace weft::precision {

// Element-wise maximum over the ranks, in place on a contiguous CPU tensor.
using CrossRankMax = std::function<void(const Tensor& values)>;

// Applies the installed reduction; does nothing when none is installed (one process).
void all_reduce_max_across_ranks(const Tensor& values);
bool cross_rank_reduction_installed();

class CrossRankReductionGuard {
 public:
  explicit CrossRankReductionGuard(CrossRankMax reduce_max);
  ~CrossRankReductionGuard();
  CrossRankReductionGuard(const CrossRankReductionGuard&) = delete;
  CrossRankReductionGuard& operator=(const CrossRankReductionGuard&) = delete;

 private:
  CrossRankMax previous_;
};

}  // namespace weft::precision
