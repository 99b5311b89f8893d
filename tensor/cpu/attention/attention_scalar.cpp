// The scalar reference tile kernels of the fused attention (contract: attention_tiles.h): plain
// loops with std::exp, what CpuIsa::Scalar runs and what the vector sets are tested against.
#include <cmath>
#include <limits>

#include "tensor/cpu/attention/attention_tiles.h"

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

void dscores(const float* p, float* dp, int64_t ld, int rows, int cols, const float* d) {
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < cols; ++i) dp[j * ld + i] = p[j * ld + i] * (dp[j * ld + i] - d[i]);
}

}  // namespace

const AttentionTiles kAttentionTilesScalar = {"scalar", softmax_step, rescale, probs, dscores};

}  // namespace weft::detail
