// The scalar reference FP8-weight GEMV (precision/fp8/fp8_gemv_kernels.h): one code at a time
// through tensor/float_formats.h's exact E4M3 decode, one float32 sum per output, in order.
#include <cmath>

#include "precision/fp8/fp8_gemv_kernels.h"
#include "tensor/float_formats.h"

namespace weft::detail {

void fp8_gemv_scalar(const Fp8GemvArgs& a) {
  for (int64_t j = a.row_begin; j < a.row_end; ++j) {
    const uint8_t* w = a.codes + j * a.in;  // (in)
    const float scale = a.row_scales ? a.row_scales[j] : a.tensor_scale;
    const float bias = a.bias ? a.bias[j] : 0.0f;
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.in;  // (in)
      float acc = 0.0f;
      for (int64_t k = 0; k < a.in; ++k) acc = std::fma(fp8_e4m3fn_to_float(w[k]), x[k], acc);
      a.y[i * a.out + j] = std::fma(acc, scale, bias);
    }
  }
}

}  // namespace weft::detail
