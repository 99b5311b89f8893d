// Vector kernels for the rows of the CPU layer norm over float32 (tensor/cpu/fused.cpp, whose
// scalar loops are the reference), chosen at run time (Note [ISA kernel units] in
// tensor/cpu/simd.h). Plain declarations.
//
// The reference's row sums run four double partial sums, a chain of dependent additions per
// value that its rows' other work waits on (a bf16-mixed GPT step at width 128 spent ~10 % in its
// layer norms). These keep sixteen partial sums in two vectors of eight doubles, so a row's float
// result moves from the reference's only where it lies within a double rounding of a float's
// halfway point; the elementwise parts are the reference's float operations, in its order (no
// fused multiply-adds).
#pragma once

#include <cstdint>

namespace weft::detail {

struct LayerNormRowStats {
  float mean, rstd;
};

// One row x[0..n): mean, rstd = 1/√(var + eps), y = ((x − mean)·rstd)·w + b (w, b may be null).
LayerNormRowStats layer_norm_row_avx512(const float* x, int64_t n, const float* w, const float* b, float eps, float* y);

// One row's dx = rstd·((g − mean(g)) − x̂·mean(g·x̂)) with g = dy·w (dy where w is null) and
// x̂ = (x − mean)·rstd.
void layer_norm_row_grad_avx512(const float* x, const float* dy, int64_t n, const float* w, float mean, float rstd,
                                float* dx);

// The weight and bias gradients over columns [begin, end) of `rows` rows (row r at x + r·n, dy +
// r·n, its statistics mean[r], rstd[r]): dw[c] += Σ_r dy[r][c]·((x[r][c] − mean[r])·rstd[r]),
// db[c] += Σ_r dy[r][c], each product rounded to float and added in double in row order, as the
// reference adds them (so column sums are its bits). Sixteen columns at a time go down all the
// rows with their sums in registers: row by row through memory, every row's sums waited on the
// last row's masked stores, which do not forward to loads (768 rows × 128, two threads: the
// affine parameters' gradients added 80 µs to a layer norm's forward + backward, now 20).
void layer_norm_columns_avx512(const float* x, const float* dy, int64_t rows, int64_t n, int64_t begin, int64_t end,
                               const float* mean, const float* rstd, double* dw, double* db);

}  // namespace weft::detail
