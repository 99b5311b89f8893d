// CPU kernels of the tensor floor's fused features (tensor/fused_kernels.h): cross-entropy,
// layer norm, dropout and linear. Rows are widened as they are read (tensor/cpu/rows.h); sums
// accumulate in double, as the CPU reductions do, so results agree with the composite ops to
// the last bits of the compute type (the order of a double sum of float values moves its
// float result only when it lies within a double rounding of a float's halfway point).
// Cross-entropy and layer norm over float32 take the AVX-512 row kernels of
// cross_entropy_kernels.h (their exp is within 2 ulp of std::exp) and layer_norm_kernels.h (16
// partial sums, not 4) where the CPU has them; the loops here are their reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/cross_entropy_kernels.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/cpu/gemm_library.h"
#include "tensor/cpu/layer_norm_kernels.h"
#include "tensor/cpu/packed_weights.h"
#include "tensor/cpu/rows.h"
#include "tensor/fused_kernels.h"
#include "tensor/philox.h"

namespace weft::detail {
namespace {

// The dtype row statistics (lse, mean, rstd) are kept in: float64 for float64 rows, else float32.
template <class S>
using Stat = std::conditional_t<std::is_same_v<S, double>, double, float>;

// Row sums in double over four interleaved partial sums (interleaved_sum, rows.h): one running sum
// kept a GPT step's layer norms waiting on its additions most of their time.
constexpr int kPartialSums = 4;

void check_targets(const Tensor& target, int64_t classes, int64_t ignore_index) {
  const int64_t* t = target.data<int64_t>();
  for (int64_t r = 0; r < target.numel(); ++r)
    WEFT_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < classes), "[cross_entropy] target ", t[r],
               " is out of bounds for ", classes, " classes");
}

}  // namespace

void cpu_cross_entropy_forward(const CrossEntropyForward& a) {
  const int64_t rows = a.logits.size(0), classes = a.logits.size(1);
  check_targets(a.target, classes, a.ignore_index);
  const int64_t* target = a.target.data<int64_t>();
  visit_floating_storage(a.logits.dtype(), "cross_entropy", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* x = static_cast<const S*>(a.logits.data_ptr());
    S* losses = static_cast<S*>(a.losses.data_ptr());
    Stat<S>* lse_out = static_cast<Stat<S>*>(a.lse.data_ptr());
    const C smooth = static_cast<C>(a.label_smoothing / static_cast<double>(classes));
    const C hit = static_cast<C>(1.0 - a.label_smoothing);
    const bool vector = std::is_same_v<S, float> && cpu_isa() >= CpuIsa::Avx512;
    for_each_row(rows, classes, [&](int64_t r) {
      std::vector<C> buffer;
      const C* row = row_values(x, r, classes, buffer);
      C m = -std::numeric_limits<C>::infinity();
      double total = 0, row_sum = 0;
      if (vector) {
        if constexpr (std::is_same_v<S, float>) {
          const CrossEntropyRowSums sums = cross_entropy_row_sums_avx512(row, classes);
          m = sums.max;
          total = sums.exp_sum;
          row_sum = sums.sum;
        }
        if (std::isinf(m) && m < 0) m = 0;  // as below; the sums were taken from 0 already
      } else {
        for (int64_t c = 0; c < classes; ++c) m = std::max(m, row[c]);
        if (std::isinf(m) && m < 0) m = 0;  // an all -inf row gives nan, as log_softmax; avoid inf - inf
        for (int64_t c = 0; c < classes; ++c) {
          total += std::exp(row[c] - m);
          row_sum += row[c];
        }
      }
      const C lse = m + static_cast<C>(std::log(total));
      lse_out[r] = static_cast<Stat<S>>(lse);
      const C loss = target[r] == a.ignore_index
                         ? C(0)
                         : lse - hit * row[target[r]] - (smooth != C(0) ? smooth * static_cast<C>(row_sum) : C(0));
      losses[r] = convert<S>(loss);
    });
  });
}

void cpu_cross_entropy_backward(const CrossEntropyBackward& a) {
  const int64_t rows = a.logits.size(0), classes = a.logits.size(1);
  const int64_t* target = a.target.data<int64_t>();
  visit_floating_storage(a.logits.dtype(), "cross_entropy", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* x = static_cast<const S*>(a.logits.data_ptr());
    const S* g = static_cast<const S*>(a.grad_losses.data_ptr());
    const Stat<S>* lse = static_cast<const Stat<S>*>(a.lse.data_ptr());
    S* gx = static_cast<S*>(a.grad_logits.data_ptr());
    const C smooth = static_cast<C>(a.label_smoothing / static_cast<double>(classes));
    const C hit = static_cast<C>(1.0 - a.label_smoothing);
    const bool vector = std::is_same_v<S, float> && cpu_isa() >= CpuIsa::Avx512;
    for_each_row(rows, classes, [&](int64_t r) {
      std::vector<C> in_buffer, out_buffer;
      const C* row = row_values(x, r, classes, in_buffer);
      C* out = row_target(gx, r, classes, out_buffer);
      if (target[r] == a.ignore_index) {
        for (int64_t c = 0; c < classes; ++c) out[c] = C(0);
      } else {
        const C grad = convert<C>(g[r]);
        const C l = static_cast<C>(lse[r]);
        if (vector) {
          if constexpr (std::is_same_v<S, float>)
            cross_entropy_row_grad_avx512(row, classes, l, grad, smooth, target[r], hit, out);
        } else {
          for (int64_t c = 0; c < classes; ++c)
            out[c] = grad * (std::exp(row[c] - l) - smooth - (c == target[r] ? hit : C(0)));
        }
      }
      store_row(gx, r, classes, out_buffer);
    });
  });
}

void cpu_layer_norm_forward(const LayerNormForward& a) {
  const int64_t rows = a.x.size(0), cols = a.x.size(1);
  visit_floating_storage(a.x.dtype(), "layer_norm", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* x = static_cast<const S*>(a.x.data_ptr());
    S* y = static_cast<S*>(a.y.data_ptr());
    Stat<S>* mean_out = static_cast<Stat<S>*>(a.mean.data_ptr());
    Stat<S>* rstd_out = static_cast<Stat<S>*>(a.rstd.data_ptr());
    std::vector<C> w_buffer, b_buffer;
    const C* w = a.weight.defined() ? row_values(static_cast<const S*>(a.weight.data_ptr()), 0, cols, w_buffer) : nullptr;
    const C* b = a.bias.defined() ? row_values(static_cast<const S*>(a.bias.data_ptr()), 0, cols, b_buffer) : nullptr;
    const bool vector = std::is_same_v<S, float> && cpu_isa() >= CpuIsa::Avx512;
    for_each_row(rows, cols, [&](int64_t r) {
      if constexpr (std::is_same_v<S, float>) {
        if (vector) {
          const LayerNormRowStats stats = layer_norm_row_avx512(x + r * cols, cols, w, b, static_cast<C>(a.eps), y + r * cols);
          mean_out[r] = stats.mean;
          rstd_out[r] = stats.rstd;
          return;
        }
      }
      std::vector<C> in_buffer, out_buffer;
      const C* row = row_values(x, r, cols, in_buffer);
      C* out = row_target(y, r, cols, out_buffer);
      const double sum = interleaved_sum<kPartialSums>(cols, [&](int64_t c) { return static_cast<double>(row[c]); });
      const C mean = static_cast<C>(sum / static_cast<double>(cols));
      const double squares = interleaved_sum<kPartialSums>(cols, [&](int64_t c) {
        return static_cast<double>(row[c] - mean) * static_cast<double>(row[c] - mean);
      });
      const C var = static_cast<C>(squares / static_cast<double>(cols));
      const C rstd = C(1) / std::sqrt(var + static_cast<C>(a.eps));
      for (int64_t c = 0; c < cols; ++c) {
        C v = (row[c] - mean) * rstd;
        if (w) v = v * w[c];
        if (b) v = v + b[c];
        out[c] = v;
      }
      store_row(y, r, cols, out_buffer);
      mean_out[r] = static_cast<Stat<S>>(mean);
      rstd_out[r] = static_cast<Stat<S>>(rstd);
    });
  });
}

void cpu_layer_norm_backward(const LayerNormBackward& a) {
  const int64_t rows = a.x.size(0), cols = a.x.size(1);
  visit_floating_storage(a.x.dtype(), "layer_norm", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* x = static_cast<const S*>(a.x.data_ptr());
    const S* dy = static_cast<const S*>(a.grad_y.data_ptr());
    const Stat<S>* mean = static_cast<const Stat<S>*>(a.mean.data_ptr());
    const Stat<S>* rstd = static_cast<const Stat<S>*>(a.rstd.data_ptr());
    std::vector<C> w_buffer;
    const C* w = a.weight.defined() ? row_values(static_cast<const S*>(a.weight.data_ptr()), 0, cols, w_buffer) : nullptr;
    const bool vector = std::is_same_v<S, float> && cpu_isa() >= CpuIsa::Avx512;
    if (a.grad_x.defined()) {
      S* dx = static_cast<S*>(a.grad_x.data_ptr());
      for_each_row(rows, cols, [&](int64_t r) {
        if constexpr (std::is_same_v<S, float>) {
          if (vector) return layer_norm_row_grad_avx512(x + r * cols, dy + r * cols, cols, w, mean[r], rstd[r], dx + r * cols);
        }
        std::vector<C> x_buffer, dy_buffer, out_buffer;
        const C* xr = row_values(x, r, cols, x_buffer);
        const C* dyr = row_values(dy, r, cols, dy_buffer);
        C* out = row_target(dx, r, cols, out_buffer);
        const C mu = static_cast<C>(mean[r]), inv = static_cast<C>(rstd[r]);
        const auto g_at = [&](int64_t c) { return w ? dyr[c] * w[c] : dyr[c]; };
        const double sum_g =
            interleaved_sum<kPartialSums>(cols, [&](int64_t c) { return static_cast<double>(g_at(c)); });
        const double sum_gx = interleaved_sum<kPartialSums>(cols, [&](int64_t c) {
          return static_cast<double>(g_at(c)) * static_cast<double>((xr[c] - mu) * inv);
        });
        const C mean_g = static_cast<C>(sum_g / static_cast<double>(cols));
        const C mean_gx = static_cast<C>(sum_gx / static_cast<double>(cols));
        for (int64_t c = 0; c < cols; ++c) {
          const C g = w ? dyr[c] * w[c] : dyr[c];
          out[c] = inv * (g - mean_g - (xr[c] - mu) * inv * mean_gx);
        }
        store_row(dx, r, cols, out_buffer);
      });
    }
    if (!a.grad_weight.defined() && !a.grad_bias.defined()) return;
    // Column sums over rows: threads take disjoint column ranges, so results do not depend on
    // the thread count.
    std::vector<double> dw(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
    const int64_t chunks = rows * cols >= kParallelGrain ? std::min<int64_t>(num_threads(), (cols + 7) / 8) : 1;
    parallel_for(chunks, [&](int64_t chunk) {
      const int64_t begin = cols * chunk / chunks, end = cols * (chunk + 1) / chunks;
      if constexpr (std::is_same_v<S, float>) {
        if (vector) return layer_norm_columns_avx512(x, dy, rows, cols, begin, end, mean, rstd, dw.data(), db.data());
      }
      std::vector<C> x_buffer, dy_buffer;
      for (int64_t r = 0; r < rows; ++r) {
        const C* xr = row_values(x, r, cols, x_buffer);
        const C* dyr = row_values(dy, r, cols, dy_buffer);
        const C mu = static_cast<C>(mean[r]), inv = static_cast<C>(rstd[r]);
        for (int64_t c = begin; c < end; ++c) {
          dw[static_cast<size_t>(c)] += static_cast<double>(dyr[c] * ((xr[c] - mu) * inv));
          db[static_cast<size_t>(c)] += static_cast<double>(dyr[c]);
        }
      }
    });
    if (a.grad_weight.defined()) {
      S* out = static_cast<S*>(a.grad_weight.data_ptr());
      for (int64_t c = 0; c < cols; ++c) out[c] = convert<S>(static_cast<C>(dw[static_cast<size_t>(c)]));
    }
    if (a.grad_bias.defined()) {
      S* out = static_cast<S*>(a.grad_bias.data_ptr());
      for (int64_t c = 0; c < cols; ++c) out[c] = convert<S>(static_cast<C>(db[static_cast<size_t>(c)]));
    }
  });
}

void cpu_dropout(const DropoutLaunch& a) {
  const int64_t n = a.x.numel();
  visit_floating_storage(a.x.dtype(), "dropout", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* x = static_cast<const S*>(a.x.data_ptr());
    S* out = static_cast<S*>(a.out.data_ptr());
    const float keep = static_cast<float>(a.keep_probability);
    const C scale = C(1) / static_cast<C>(a.keep_probability);
    const int64_t groups = (n + 3) / 4;
    const int64_t chunks = n >= kParallelGrain ? num_threads() : 1;
    parallel_for(chunks, [&](int64_t chunk) {
      for (int64_t group = groups * chunk / chunks; group < groups * (chunk + 1) / chunks; ++group) {
        const PhiloxBlock words = philox_group(a.key, static_cast<uint64_t>(group));
        for (int64_t lane = 0; lane < 4 && 4 * group + lane < n; ++lane) {
          const int64_t i = 4 * group + lane;
          const bool kept = philox_uniform(words.w[lane]) < keep;
          out[i] = convert<S>(kept ? convert<C>(x[i]) * scale : C(0));
        }
      }
    });
  });
}

namespace {

// A float32 linear of more than one row with a bias, through weft's GEMM, which hands the bias to
// its tiles (Note [Linear's bias in the tiles] in tensor/cpu/gemm/gemm.cpp) instead of taking it
// as C's first rows; false where the general path below applies (a row at a time goes to the
// batch-1 kernels; other dtypes and libraries take the bias as C's rows).
bool linear_f32_bias_in_tiles(const LinearLaunch& a) {
  const int64_t rows = a.x.size(0), in = a.x.size(1), out_features = a.weight.size(0);
  if (rows < 2 || !a.bias.defined() || a.x.dtype() != kFloat32 || a.weight.dtype() != kFloat32 ||
      a.bias.dtype() != kFloat32 || a.out.dtype() != kFloat32 || !a.out.is_contiguous() ||
      (a.bias.stride(0) != 1 && out_features != 1) || cpu_gemm_library() != GemmLibrary::Weft)
    return false;
  const GemmMatrix x{a.x.data_ptr(), a.x.stride(0), a.x.stride(1), false};
  const GemmMatrix w_t{a.weight.data_ptr(), a.weight.stride(1), a.weight.stride(0), false};  // B(p, j) = W(j, p)
  gemm(rows, out_features, in, x, w_t, a.out.data<float>(), out_features, /*accumulate=*/false, a.bias.data<float>());
  return true;
}

}  // namespace

void cpu_linear(const LinearLaunch& a) {
  if (linear_f32_bias_in_tiles(a)) return;
  const int64_t rows = a.x.size(0), in = a.x.size(1), out_features = a.weight.size(0);
  const Tensor out3 = make_view(a.out, {1, rows, out_features}, {rows * out_features, out_features, 1}, a.out.offset());
  if (a.bias.defined()) {
    // The bias broadcast over the rows, which the product then adds to. A contiguous bias is a
    // row copied whole (the strided copy walked it value by value: 4 % of a GPT step).
    if (a.bias.stride(0) == 1 || out_features == 1) {
      const size_t row_bytes = static_cast<size_t>(out_features) * itemsize(a.out.dtype());
      bias_into_rows(rows, a.bias.data_ptr(), row_bytes, a.out.data_ptr(), static_cast<int64_t>(row_bytes));
    } else {
      cpu_backend().copy(make_view(a.bias, {1, rows, out_features}, {0, 0, a.bias.stride(0)}, a.bias.offset()), out3);
    }
  }
  if (a.weight_frozen && linear_with_packed_weight(a.x, a.weight, a.out, a.bias.defined())) return;
  const Tensor x3 = make_view(a.x, {1, rows, in}, {0, a.x.stride(0), a.x.stride(1)}, a.x.offset());
  const Tensor w3 = make_view(a.weight, {1, in, out_features}, {0, a.weight.stride(1), a.weight.stride(0)}, a.weight.offset());
  cpu_backend().matmul(x3, w3, out3, /*accumulate=*/a.bias.defined());
}

}  // namespace weft::detail
