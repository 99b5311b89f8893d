// The scalar reference tile kernels of the fused attention (contract: attention_tiles.h): plain
// loops with std::exp, what CpuIsa::Scalar runs and what the vector sets are tested against. The
// bfloat16 path's fused steps (AttentionTilesBf16) only run vectorized, on AMX CPUs; their
// reference here is what the tests hold the AVX-512 set to.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/float_formats.h"

namespace weft::detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Columns i < first of row j are hidden by the causal mask.
int64_t hidden_columns(int64_t diag, int64_t j) { return diag + j; }

void softmax_step(float* s, int64_t ld, int rows, int cols, int64_t diag, float* m, float* l, float* alpha) {
  for (int j = 0; j < rows; ++j)
    for (int64_t i = 0; i < cols && i < hidden_columns(diag, j); ++i) s[j * ld + i] = -kInf;
  for (int i = 0; i < cols; ++i) {
    float most = m[i];
    for (int j = 0; j < rows; ++j) most = std::fmax(most, s[j * ld + i]);
    const float base = most == -kInf ? 0.0f : most;
    float sum = 0.0f;
    for (int j = 0; j < rows; ++j) {
      float& x = s[j * ld + i];
      x = std::exp(x - base);
      sum += x;
    }
    alpha[i] = std::exp(m[i] - base);
    l[i] = alpha[i] * l[i] + sum;
    m[i] = most;
  }
}

void rescale(float* o, int64_t ld, int rows, int cols, const float* alpha) {
  for (int d = 0; d < rows; ++d)
    for (int i = 0; i < cols; ++i) o[d * ld + i] *= alpha[i];
}

void probs(float* s, int64_t ld, int rows, int cols, int64_t diag, const float* lse) {
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) {
      float& x = s[j * ld + i];
      x = i < hidden_columns(diag, j) ? 0.0f : std::exp(x - lse[i]);
    }
}

void dscores(const float* p, float* dp, int64_t ld, int rows, int cols, int64_t diag, const float* d) {
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) {
      float& x = dp[j * ld + i];
      x = i < hidden_columns(diag, j) ? 0.0f : p[j * ld + i] * (x - d[i]);
    }
}

// Where (row j, column i) of a tile lies in its K-pair panels (attention_tiles.h).
int64_t pair_index(int64_t j, int64_t i, int64_t pairs) { return (i / 32 * pairs + j / 2) * 64 + i % 32 * 2 + j % 2; }

int64_t panel_values(int cols, int64_t pairs) { return (cols + 31) / 32 * pairs * 64; }

void softmax_step_pairs(const float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, float* m, float* l,
                        float* alpha, int64_t pairs, uint16_t* dst) {
  std::fill_n(dst, panel_values(cols, pairs), uint16_t{0});
  for (int i = 0; i < cols; ++i) {
    float most = m[i];
    for (int j = 0; j < rows; ++j)
      if (i >= hidden_columns(diag, j)) most = std::fmax(most, scale * s[j * ld + i]);
    const float base = most == -kInf ? 0.0f : most;
    float sum = 0.0f;
    for (int j = 0; j < rows; ++j) {
      const float e = i < hidden_columns(diag, j) ? 0.0f : std::exp(scale * s[j * ld + i] - base);
      sum += e;
      dst[pair_index(j, i, pairs)] = float_to_bfloat16(e);
    }
    alpha[i] = std::exp(m[i] - base);
    l[i] = alpha[i] * l[i] + sum;
    m[i] = most;
  }
}

void probs_rows(float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, const float* lse, int64_t pairs,
                uint16_t* rows_dst) {
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) {
      float& x = s[j * ld + i];
      x = i < hidden_columns(diag, j) ? 0.0f : std::exp(scale * x - lse[i]);
    }
  if (rows_dst == nullptr) return;
  std::fill_n(rows_dst, 2 * pairs * ld, uint16_t{0});
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) rows_dst[j * ld + i] = float_to_bfloat16(s[j * ld + i]);
}

void dscores_bf16(const float* p, const float* dp, int64_t ld, int rows, int cols, const float* d, int64_t pairs,
                  uint16_t* rows_dst, uint16_t* pairs_dst) {
  std::fill_n(rows_dst, 2 * pairs * ld, uint16_t{0});
  std::fill_n(pairs_dst, panel_values(cols, pairs), uint16_t{0});
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) {
      const uint16_t bits = float_to_bfloat16(p[j * ld + i] * (dp[j * ld + i] - d[i]));
      rows_dst[j * ld + i] = bits;
      pairs_dst[pair_index(j, i, pairs)] = bits;
    }
}

}  // namespace

const AttentionTiles kAttentionTilesScalar = {"scalar", softmax_step, rescale, probs, dscores};
const AttentionTilesBf16 kAttentionTilesBf16Scalar = {"scalar", softmax_step_pairs, probs_rows, dscores_bf16};

}  // namespace weft::detail
