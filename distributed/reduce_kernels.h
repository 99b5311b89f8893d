// The element-wise reductions collectives apply to buffers, for every dtype a collective reduces.
//
// Narrow floats (float16, bfloat16) are widened to float32, combined, and rounded once per call,
// so a ring all-reduce rounds once per hop and a reduce-scatter (which combines all ranks' blocks
// in one call) rounds once in all. Integers are combined in their own type (the counts and flags
// collectives carry do not overflow it). Blocks are combined in rank order, so every rank computes
// bit-identical results.
#pragma once

#include <cstddef>

#include "distributed/process_group.h"

namespace weft::distributed::detail {

// out[i] = a[i] ⊕ b[i] for n elements (out may alias a or b). Avg combines as Sum. Max and min
// of floats propagate NaN and order −0 below +0, so a ⊕ b and b ⊕ a have the same bits (Note
// [Max and min of floats on every rank] in reduce_kernels.cpp).
void combine(DType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t n);

// out[i] = ⊕ over r < blocks of in[r·n + i]; with Avg, the sum divided by `blocks`.
// in: (blocks, n) · out: (n)
void reduce_blocks(DType dtype, ReduceOp op, void* out, const void* in, size_t blocks, size_t n);

// x[i] /= divisor, in place (the second half of Avg after a summing all-reduce).
void divide(DType dtype, void* x, size_t n, double divisor);

// out[i] = (a[i] + b[i]) / divisor, the sum rounded to the dtype before the division: the bits of
// combine(Sum) then divide, in one pass over the memory instead of two (a pair's Avg all-reduce,
// where both passes run over megabytes that no longer fit in L2).
void sum_and_divide(DType dtype, void* out, const void* a, const void* b, size_t n, double divisor);

// out[i] = to(to(in[i]) / divisor) for n elements: a buffer cast to a narrow float, then divided
// in it, rounding twice as PyTorch's compressing DDP comm hooks do (`.to(bf16).div_(n)`), in one
// pass. `to` is Float16 or BFloat16.
void cast_and_divide(DType from, const void* in, DType to, void* out, size_t n, double divisor);

}  // namespace weft::distributed::detail
