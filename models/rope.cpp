// Rotary position embeddings: frequencies (with their scalings), tables, application.
#include "models/rope.h"

#include <cmath>
#include <numbers>

#include "tensor/error.h"

namespace weft::models {

void RopeScaling::check() const {
  WEFT_CHECK(type == "default" || type == "linear" || type == "llama3", "[rope_scaling] rope_type '", type,
             "' is not supported (supported: default, linear, llama3)");
  if (type == "default") return;
  WEFT_CHECK(std::isfinite(factor) && factor > 0.0, "[rope_scaling] factor must be positive, got ", factor);
  if (type != "llama3") return;
  WEFT_CHECK(low_freq_factor > 0.0 && high_freq_factor > low_freq_factor, "[rope_scaling] expected 0 < low_freq_factor < ",
             "high_freq_factor, got ", low_freq_factor, " and ", high_freq_factor);
  WEFT_CHECK(original_max_position_embeddings > 0, "[rope_scaling] original_max_position_embeddings must be positive, got ",
             original_max_position_embeddings);
}

std::vector<float> rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling) {
  WEFT_CHECK(head_dim > 0 && head_dim % 2 == 0, "[rope] the head size must be even and positive, got ", head_dim);
  WEFT_CHECK(std::isfinite(theta) && theta > 0.0, "[rope] rope_theta must be positive, got ", theta);
  scaling.check();
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    // float32 throughout, as transformers: arange(0, d, 2).float() / d, then base ** that, then 1 / it.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  if (scaling.type == "linear") {
    for (float& f : inv) f /= static_cast<float>(scaling.factor);
  } else if (scaling.type == "llama3") {
    const auto factor = static_cast<float>(scaling.factor);
    const auto low = static_cast<float>(scaling.low_freq_factor), high = static_cast<float>(scaling.high_freq_factor);
    const auto old_context = static_cast<float>(scaling.original_max_position_embeddings);
    const float low_freq_wavelen = old_context / low, high_freq_wavelen = old_context / high;
    for (float& f : inv) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
      if (wavelen < high_freq_wavelen || wavelen > low_freq_wavelen) {
        f = scaled;
      } else {
        const float smooth = (old_context / wavelen - low) / (high - low);
        f = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
    }
  }
  return inv;
}

RopeTables rope_tables(const Tensor& positions, const std::vector<float>& inv_freq) {
  WEFT_CHECK(positions.dim() == 2 && is_integral(positions.dtype()), "[rope] expected integer positions (B, T), got ",
             positions.dtype(), " ", positions.shape());
  const int64_t B = positions.size(0), T = positions.size(1), half = static_cast<int64_t>(inv_freq.size());
  const std::vector<int64_t> pos = positions.to(DType::Int64).to_vector<int64_t>();
  std::vector<float> cos_values(static_cast<size_t>(B * T * 2 * half)), sin_values(cos_values.size());
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const auto p = static_cast<float>(pos[static_cast<size_t>(bt)]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = inv_freq[static_cast<size_t>(i)] * p;
      const float c = std::cos(angle), s = std::sin(angle);
      for (int64_t copy : {i, i + half}) {
        cos_values[static_cast<size_t>(bt * 2 * half + copy)] = c;
        sin_values[static_cast<size_t>(bt * 2 * half + copy)] = s;
      }
    }
  }
  const Shape shape{B, 1, T, 2 * half};
  const Device device = positions.device();
  return {from_vector(cos_values, shape, kFloat32).to(device), from_vector(sin_values, shape, kFloat32).to(device)};
}

Tensor apply_rope(const Tensor& x, const RopeTables& tables) {
  const int64_t d = x.size(-1), half = d / 2;
  WEFT_CHECK(tables.cos.size(-1) == d, "[rope] tables of head size ", tables.cos.size(-1), " for a tensor of head size ",
             d);
  const Tensor rotated = cat({neg(x.narrow(-1, half, half)), x.narrow(-1, 0, half)}, -1);
  return add(mul(x, tables.cos.to(x.dtype())), mul(rotated, tables.sin.to(x.dtype())));
}

}  // namespace weft::models
