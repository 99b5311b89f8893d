// The vector kernel of the CPU column sums (tensor/cpu/reduce.cpp, whose scalar loop is the
// reference): a bias gradient in a bf16-mixed GPT step is such a sum over bfloat16 rows (~4 % of
// the char step, the rows widened chunk by chunk and added two doubles at a time). Chosen at run
// time (Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations.
#pragma once

#include <cstdint>

namespace weft::detail {

// acc[j] += x(r, j) for r < rows in order, j < cols: float32 (bf16 false) or bfloat16 bits at
// x + r·ld + j, each value widened to double and added as the reference adds it (the same bits).
void add_columns_avx512(const void* x, bool bf16, int64_t ld, int64_t rows, int64_t cols, double* acc);

}  // namespace weft::detail
