// Rotary position embeddings as Hugging Face's Llama computes them (transformers.md §3): the
// "rotate half" convention, not the interleaved pairs of Meta's original code.
//
//   inv_freq[i] = 1 / theta^(2i / d),  i < d/2      (then reshaped by rope_scaling, below)
//   angle(p, i) = p · inv_freq[i], duplicated:  cos/sin of cat(angle, angle)   (d values)
//   rope(x) = x·cos + rotate_half(x)·sin,  rotate_half(x) = cat(-x[d/2:], x[:d/2])
//
// rope_scaling "linear" divides positions by `factor` (inv_freq / factor). "llama3" keeps the
// high frequencies, divides the low ones by `factor`, and blends in between by the wavelength
// 2π / inv_freq against original_max_position_embeddings / {low, high}_freq_factor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace weft::models {

struct RopeScaling {
  std::string type = "default";  // "default", "linear" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;

  void check() const;  // unknown type, factor <= 0, low >= high: errors naming the key
};

// The d/2 inverse frequencies, computed in float32 as transformers does.
std::vector<float> rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling);

// cos and sin for positions (B, T) int64: each (B, 1, T, d) float32, to broadcast over heads.
struct RopeTables {
  Tensor cos;
  Tensor sin;
};
RopeTables rope_tables(const Tensor& positions, const std::vector<float>& inv_freq);

// x: (B, H, T, d) -> x·cos + rotate_half(x)·sin, in x's dtype (tables cast to it, as transformers).
Tensor apply_rope(const Tensor& x, const RopeTables& tables);

}  // namespace weft::models
