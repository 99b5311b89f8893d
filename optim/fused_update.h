// Internal helpers for the CPU kernels of the fused optimizer updates (SGD, Adam, AdamW) and
// gradient clipping (optim/fused_kernels.h).
//
// Every update is one pass over a parameter's contiguous memory, block by block: a block of
// kBlock elements of parameter, gradient and state is read, updated in float32 (float64 for
// float64 parameters) while it sits in L1 cache, and written back. The block kernels are plain
// loops, one line per PyTorch op, which spell the formulas as they read; they are the scalar
// references of the AVX2 / AVX-512 kernels (optim/update_*.cpp) that float32 blocks, and Adam's
// float64 ones, take where the CPU has them (and only CPUs without AVX2, SGD's float64 blocks and
// the tests run them).
// float16 / bfloat16 parameters are widened on load and rounded to nearest even on store; their
// state is float32 (optim::detail::state_dtype), so low-precision training keeps full-precision
// moments. A float32 / float64 parameter also takes a float16 / bfloat16 gradient (FSDP's
// keep_low_precision_grads hands the optimizer such shards): each block of it is widened into an
// L1-sized buffer as the block is read, so no full-precision copy of the gradient is ever made, and
// as widening is exact the update is the one a full-precision gradient of the same values gives.
// A launch's parameters are split over weft's threads together, in whole blocks.
//
// Internal to optim/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/dtype.h"
#include "tensor/float_formats.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace weft::optim::detail {

template <class P>
struct ComputeTypeOf {
  using type = float;
};
template <>
struct ComputeTypeOf<double> {
  using type = double;
};
template <class P>
using ComputeType = typename ComputeTypeOf<P>::type;

// A parameter value in its compute type, and back (narrow types round to nearest even).
template <class P>
ComputeType<P> widen(P v) {
  if constexpr (kIsNarrowFloat<P>)
    return to_float(v);
  else
    return v;
}
template <class P>
P narrow(ComputeType<P> v) {
  if constexpr (kIsNarrowFloat<P>)
    return from_float<P>(v);
  else
    return v;
}

// Calls fn(P{}) with P the storage type of a parameter dtype (see check_new_param for the set).
template <class Fn>
void dispatch_param_dtype(DType dtype, const std::string& op, Fn&& fn) {
  WEFT_CHECK(dtype == kFloat64 || dtype == kFloat32 || dtype == kFloat16 || dtype == kBFloat16, "[", op,
             "] parameters must be float64, float32, float16 or bfloat16, got ", dtype);
  visit_dtype(dtype, [&](auto tag) {
    if constexpr (std::is_floating_point_v<decltype(tag)> || kIsNarrowFloat<decltype(tag)>) fn(tag);
  });
}

// Calls fn(P{}, G{}) with P the storage type of the parameter's dtype and G that of its gradient's:
// G = P, or a float16 / bfloat16 G under a float32 / float64 P (fused_update_grad checks the pair).
template <class Fn>
void dispatch_param_grad_dtype(DType param, DType grad, const std::string& op, Fn&& fn) {
  dispatch_param_dtype(param, op, [&](auto p) {
    using P = decltype(p);
    if (grad == param) return fn(p, p);
    if constexpr (!kIsNarrowFloat<P>) {
      if (grad == kBFloat16) return fn(p, BFloat16{});
      if (grad == kFloat16) return fn(p, Half{});
    }
    WEFT_FAIL("[", op, "] a ", param, " parameter has a ", grad, " gradient; expected ", param,
              kIsNarrowFloat<P> ? "" : " (or float16 / bfloat16, widened in the update)");
  });
}

// Below this many elements an update runs on one thread: the fork costs more than it saves.
inline constexpr int64_t kUpdateGrain = 32768;
inline constexpr int64_t kBlock = 1024;

// n values from src converted into dst (a block widened into the compute type, or rounded back
// into a narrow parameter): the vector conversion kernels where there is one for the pair
// (float32 <-> float16 / bfloat16), the same bits as convert() (a float16 model's AdamW spent most
// of its time converting value by value).
template <class From, class To>
void convert_values(const From* src, int64_t n, To* dst) {
  weft::detail::convert_run<To, From>(reinterpret_cast<char*>(dst), sizeof(To), reinterpret_cast<const char*>(src),
                                      sizeof(From), n);
}

// Runs kernel(offset, length, p, g) over the elements [begin, end) of one parameter (begin on a
// block boundary) in blocks of kBlock elements (the parameter's last one shorter). p and g are
// the block's parameter and gradient values in the compute type: the tensors' own memory when they
// are float32 / float64, widened copies (the parameter's written back, rounded, after the kernel)
// when they are narrow. `offset` locates the block in the state tensors.
template <class P, class G, class Kernel>
void for_each_param_block(P* param, const G* grad, int64_t begin, int64_t end, Kernel&& kernel) {
  using C = ComputeType<P>;
  static_assert(std::is_same_v<G, P> || (std::is_same_v<P, C> && kIsNarrowFloat<G>),
                "a gradient has its parameter's type, or is narrow under a float32 / float64 parameter");
  for (int64_t offset = begin; offset < end; offset += kBlock) {
    const int64_t length = std::min(kBlock, end - offset);
    if constexpr (std::is_same_v<P, C> && std::is_same_v<G, P>) {
      kernel(offset, length, param + offset, grad + offset);
    } else if constexpr (std::is_same_v<P, C>) {
      alignas(64) C g[kBlock];
      convert_values(grad + offset, length, g);
      kernel(offset, length, param + offset, static_cast<const C*>(g));
    } else {
      alignas(64) C p[kBlock];
      alignas(64) C g[kBlock];
      convert_values(param + offset, length, p);
      convert_values(grad + offset, length, g);
      kernel(offset, length, p, static_cast<const C*>(g));
      convert_values(static_cast<const C*>(p), length, param + offset);
    }
  }
}

// Runs update(i, begin, end) over the elements [begin, end) of parameter i of a launch (sizes[i]
// elements each), in pieces that together cover every parameter once. The launch's parameters are
// cut as one run of blocks into equal shares, one per thread: a model of many small tensors (a
// GPT's biases and norms, the example GPT's weights of 16K-65K values) spreads over the threads as
// a large one does, where a fork per tensor left every tensor under 2 · kUpdateGrain to the calling
// thread (the example GPT's AdamW on two threads: 360 -> 265 µs a step, 1.9x its one-thread time
// where it was 1.4x). Pieces begin on block boundaries of their parameter, so every element is
// computed by the same instructions whatever the thread count, and results do not depend on it.
template <class Update>
void for_each_param_range(const std::vector<int64_t>& sizes, Update&& update) {
  // Parameter i holds blocks [first_block[i], first_block[i + 1]) of the run.
  std::vector<int64_t> first_block(sizes.size() + 1, 0);
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    first_block[i + 1] = first_block[i] + (sizes[i] + kBlock - 1) / kBlock;
    total += sizes[i];
  }
  const int64_t blocks = first_block.back();
  const int64_t chunks = std::clamp<int64_t>(total / kUpdateGrain, 1, num_threads());
  parallel_for(chunks, [&](int64_t c) {
    const int64_t begin = blocks * c / chunks, end = blocks * (c + 1) / chunks;
    // The last parameter whose blocks start at or before `begin`, then each that starts before `end`.
    const auto after = std::upper_bound(first_block.begin(), first_block.end(), begin);
    auto i = static_cast<size_t>(after - first_block.begin() - 1);
    for (; i < sizes.size() && first_block[i] < end; ++i) {
      const int64_t lo = std::max(begin, first_block[i]) - first_block[i];
      const int64_t hi = std::min(end, first_block[i + 1]) - first_block[i];
      if (lo < hi) update(i, lo * kBlock, std::min(hi * kBlock, sizes[i]));
    }
  });
}

// Checks that `param` can be updated in place by a fused kernel (contiguous, initialized, its
// gradient on its device) and returns its gradient, contiguous, of the parameter's dtype or (a CPU
// float32 / float64 parameter) float16 / bfloat16.
Tensor fused_update_grad(const std::string& op, const Tensor& param);
// A state tensor for `param`, zero-filled: param's shape, state_dtype(param).
Tensor zero_state(const Tensor& param);
// Marks `param` as modified in place, for autograd's saved-tensor checks.
inline void mark_updated(const Tensor& param) { param.storage()->bump_version(); }

}  // namespace weft::optim::detail
