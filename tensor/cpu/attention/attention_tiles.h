// The elementwise tile kernels of the fused CPU attention (tensor/cpu/attention/attention.cpp),
// one set per instruction set: attention_scalar.cpp (the reference), attention_avx2.cpp,
// attention_avx512.cpp. The products between tiles are the GEMM's microkernels.
//
// Every tile is a score tile held transposed: row j is a key, column i a query, `ld` floats
// between rows, so one vector holds 8 or 16 queries and the per-query softmax statistics (running
// max m, running sum l, logsumexp, D) are vector loads, never horizontal reductions. `rows` keys ×
// `cols` queries are valid. Causal tiles mask (j, i) where i < diag + j (query i0 + i sees key
// j0 + j only when j0 + j <= i0 + i, so diag = j0 − i0); kNoDiag masks nothing.
//
// Plain declarations only: included by ISA kernel units (Note [ISA kernel units] in
// tensor/cpu/simd.h).
#pragma once

#include <cstdint>

namespace weft::detail {

constexpr int64_t kNoDiag = -(int64_t{1} << 40);

struct AttentionTiles {
  const char* name;
  // One step of the online softmax over a tile of scores s (already scaled, mask added): the
  // causal mask set to −inf, then per query i: m' = max(m, max_j s), alpha = e^(m − m'),
  // s ← e^(s − m'), l ← alpha·l + Σ_j s, m ← m'. While m' is −inf (nothing kept yet) the
  // exponentials use 0 in its place, so they are 0 and not NaN.
  void (*softmax_step)(float* s, int64_t ld, int rows, int cols, int64_t diag, float* m, float* l, float* alpha);
  // o(d, i) *= alpha(i) for d < rows, i < cols: the output accumulator, transposed like the scores.
  void (*rescale)(float* o, int64_t ld, int rows, int cols, const float* alpha);
  // The backward's probabilities: s ← e^(s − lse(i)), 0 where the causal mask hides (j, i).
  void (*probs)(float* s, int64_t ld, int rows, int cols, int64_t diag, const float* lse);
  // The backward's score gradient, in place of dp: dp ← p · (dp − D(i)), 0 where the causal mask
  // hides (j, i) whatever dp holds there (the product that makes dp leaves those out).
  void (*dscores)(const float* p, float* dp, int64_t ld, int rows, int cols, int64_t diag, const float* d);
};

// bfloat16 K-pair panels of a float32 tile, for AMX products (Note [bf16 K-pair panels] in
// tensor/cpu/gemm/packing.h): panel p (columns 32p .. 32p+31) of dst, `pairs` K-pairs long, holds
// dst[(p·pairs + q)·64 + 2j + t] = bf16(src[(2q + t)·ld + 32p + j]), rounded to nearest even,
// zero past `rows` and `cols` (up to whole panels). AVX-512BW, which every AMX CPU has.
void attention_pairs_avx512(const float* src, int64_t ld, int rows, int cols, int64_t pairs, uint16_t* dst);

// The bfloat16 path's tile steps (the products on AMX tiles): each is a float32 step above fused
// with the rounding of its result into the bf16 layouts the next products read, so a score tile
// is read once instead of three or four times. Scores arrive unscaled: `scale` multiplies them
// first (as `rescale` would). A tile's bf16 copies cover 2·pairs rows (zero past `rows`) and, as
// rows, `ld` columns (zero past `cols`; ld a multiple of 16); as K-pair panels (above), the panels
// that hold `cols` columns.
struct AttentionTilesBf16 {
  const char* name;
  // softmax_step on scale·s, P written only as K-pair panels (s is left as it was).
  void (*softmax_step_pairs)(const float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, float* m,
                             float* l, float* alpha, int64_t pairs, uint16_t* dst);
  // probs on scale·s: P in place, and as bf16 rows of ld values in `rows_dst` unless it is null.
  // Columns every row hides (i < diag) come out 0 whatever their scores hold (the backward leaves
  // them uncomputed).
  void (*probs_rows)(float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, const float* lse,
                     int64_t pairs, uint16_t* rows_dst);
  // dscores, dS = p·(dp − D), written only as bf16 rows and as K-pair panels (dp is left as it was).
  void (*dscores_bf16)(const float* p, const float* dp, int64_t ld, int rows, int cols, const float* d,
                       int64_t pairs, uint16_t* rows_dst, uint16_t* pairs_dst);
};

extern const AttentionTiles kAttentionTilesScalar;
extern const AttentionTiles kAttentionTilesAvx2;
extern const AttentionTiles kAttentionTilesAvx512;
extern const AttentionTilesBf16 kAttentionTilesBf16Scalar;
extern const AttentionTilesBf16 kAttentionTilesBf16Avx512Bf16;

}  // namespace weft::detail
