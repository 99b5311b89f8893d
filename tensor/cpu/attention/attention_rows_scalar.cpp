// The scalar reference row kernels of the attention's decode path (contract: attention_rows.h):
// plain loops with std::exp, what the AVX-512 set is tested against.
#include <cmath>
#include <limits>

#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/float_formats.h"

namespace weft::detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float widen(float x) { return x; }
float widen(uint16_t bits) { return bfloat16_to_float(bits); }

template <class T>
void scores(const float* q, const T* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s) {
  for (int64_t j = 0; j < rows; ++j) {
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += q[e] * widen(k[j * ldk + e]);
    s[j] = sum * scale;
  }
}

float exp_row(float* s, int64_t n, float* m) {
  float most = -kInf;
  for (int64_t j = 0; j < n; ++j) most = std::fmax(most, s[j]);
  const float base = most == -kInf ? 0.0f : most;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - base);
    sum += s[j];
  }
  *m = most;
  return sum;
}

template <class T>
void accumulate(const float* p, const T* v, int64_t ldv, int64_t rows, int64_t Ev, float* o) {
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t d = 0; d < Ev; ++d) o[d] += p[j] * widen(v[j * ldv + d]);
}

}  // namespace

const AttentionRows kAttentionRowsScalar = {"scalar", scores<float>, scores<uint16_t>, exp_row, accumulate<float>,
                                            accumulate<uint16_t>};

}  // namespace weft::detail
