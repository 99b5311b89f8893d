// The kernels of the ops that pick positions along one dim: sort, topk (tensor/sorting.cpp) and
// multinomial (tensor/sampling.cpp). They sit outside the Backend vtable, each a feature with its
// own KernelRegistry (tensor/kernel_registry.h); the CPU kernels live in tensor/cpu/sorting.cpp
// and tensor/cpu/sampling.cpp. There is no CUDA kernel yet: the registries' CUDA slots are empty,
// so a CUDA tensor gets "[sort] has no kernel for cuda:0" from the front-end.
//
// Every kernel here writes int64 positions only; the front-ends gather the values with gather(),
// which copies the exact bits (NaN payloads, -0.0, narrow floats) and records the gradient.
// Operands follow Note [Kernel contracts] (tensor/backend.h) and are contiguous.
#pragma once

#include <cstdint>

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::detail {

// Note [Order of values]: ascending order is numeric order with every NaN above +inf (PyTorch's
// order); descending is its reverse, NaN first. Equal values (NaN with NaN, -0.0 with 0.0) keep
// their original order, so every kernel here is stable and deterministic. Narrow floats are
// compared as float32 (exact), bool as false < true.

// ---- sort ----
// x: (outer, n, inner) -> indices: (outer, n, inner) int64, for every (o, i) the positions of
// x[o, :, i] in sorted order.
struct SortLaunch {
  Tensor x, indices;
  bool descending;
};
using SortKernel = void(const SortLaunch&);
KernelRegistry<SortKernel>& sort_kernels();
void cpu_sort(const SortLaunch& args);

// ---- topk ----
// x: (outer, n, inner) -> indices: (outer, k, inner) int64, 0 <= k <= n: the positions of the k
// largest (smallest) values of every x[o, :, i], best first when `sorted`, else in increasing
// position. Ties go to the lower position, so the result is a prefix of a stable sort's.
struct TopkLaunch {
  Tensor x, indices;
  bool largest, sorted;
};
using TopkKernel = void(const TopkLaunch&);
KernelRegistry<TopkKernel>& topk_kernels();
void cpu_topk(const TopkLaunch& args);

// ---- multinomial ----
// probs: (rows, C) floating weights -> out: (rows, num_samples) int64 category indices. Throws
// when a weight is negative, infinite or NaN, when a row sums to 0, or (without replacement) when
// a row has fewer categories of non-zero weight than samples; `out` is then left partly written.
// The draws are a function of `key` and the positions only (Note [Multinomial draws] in
// tensor/cpu/sampling.cpp).
struct MultinomialLaunch {
  Tensor probs, out;
  bool replacement;
  uint64_t key;
};
using MultinomialKernel = void(const MultinomialLaunch&);
KernelRegistry<MultinomialKernel>& multinomial_kernels();
void cpu_multinomial(const MultinomialLaunch& args);

}  // namespace weft::detail
