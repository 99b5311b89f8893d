// The CPU RMS norm for inference (RmsNormLaunch, tensor/fused_kernels.h): one pass per row where
// rms_norm's composition of ops makes seven over the whole tensor (widen to float32, square, sum,
// divide, add eps and rsqrt, scale, round back, times the weight: with its conversions, ~10 % of a
// Llama bf16 prefill). Each step is the composition's own float32 operation in its order, so the
// bits are its bits; the loops are plain C++ the compiler vectorises, and the conversions are the
// chunk kernels every CPU op uses (tensor/cpu/convert.h).
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/rows.h"

namespace weft::detail {

void cpu_rms_norm(const RmsNormLaunch& a) {
  const int64_t cols = a.x.size(-1), rows = cols == 0 ? 0 : a.x.numel() / cols;
  visit_floating_storage(a.x.dtype(), "rms_norm", [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_same_v<S, float> || kIsNarrowFloat<S>) {
      const S* x = a.x.data<S>();
      S* y = a.y.data<S>();
      std::vector<float> weight_buffer;
      const float* weight = row_values(a.weight.data<S>(), 0, cols, weight_buffer);
      // The composition adds eps as a float32 scalar and divides by the row length as one.
      const auto eps = static_cast<float>(a.eps), n = static_cast<float>(cols);
      for_each_row(rows, cols, [&](int64_t r) {
        std::vector<float> in, out, square_buffer(static_cast<size_t>(cols));
        const float* v = row_values(x, r, cols, in);
        float* squares = square_buffer.data();
        for (int64_t c = 0; c < cols; ++c) squares[c] = v[c] * v[c];
        const float mean = static_cast<float>(sum_in_double(squares, cols)) / n;
        const float scale = 1.0f / std::sqrt(mean + eps);
        float* target = row_target(y, r, cols, out);
        for (int64_t c = 0; c < cols; ++c) target[c] = v[c] * scale;
        if constexpr (kIsNarrowFloat<S>) {
          // Rounded to x's dtype before the weight multiplies it, as the composition rounds it.
          store_row(y, r, cols, out);
          row_values(static_cast<const S*>(y), r, cols, out);
        }
        for (int64_t c = 0; c < cols; ++c) target[c] = weight[c] * target[c];
        store_row(y, r, cols, out);
      });
    }
  });
}

}  // namespace weft::detail
