// multinomial: checks the shapes, draws one 64-bit key from the Generator (the default one when
// none is given) and lets the kernel (tensor/selection_kernels.h) turn the key and the weights
// into category indices (Note [Multinomial draws] in tensor/cpu/sampling.cpp: inverse CDF with
// replacement or for one sample, the exponential race without). The weights' values are checked
// by the kernel as it reads them. The result is int64 and not differentiable.
//
// One difference from PyTorch: asked for more samples without replacement than a row has non-zero
// weights, PyTorch fills in zero-weight categories; weft refuses, so a zero weight is never drawn.
#include "tensor/op_helpers.h"
#include "tensor/ops.h"
#include "tensor/selection_kernels.h"

namespace weft {

namespace detail {

KernelRegistry<MultinomialKernel>& multinomial_kernels() {
  static KernelRegistry<MultinomialKernel> registry("multinomial", &cpu_multinomial, nullptr);
  return registry;
}

}  // namespace detail

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  detail::check_defined(probs, "multinomial", "probs");
  WEFT_CHECK(is_floating(probs.dtype()), "[multinomial] only supports floating-point dtypes for input, got ",
             probs.dtype());
  WEFT_CHECK(probs.dim() == 1 || probs.dim() == 2, "[multinomial] prob_dist must be 1 or 2 dim, got shape ",
             probs.shape());
  WEFT_CHECK(num_samples > 0, "[multinomial] cannot sample n_sample <= 0 samples, got num_samples = ", num_samples);
  const int64_t categories = probs.size(-1);
  WEFT_CHECK(replacement || num_samples <= categories,
             "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement: num_samples = ",
             num_samples, ", categories = ", categories);
  auto& kernel = detail::multinomial_kernels().at(probs.device());
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1;
  Tensor out = detail::make_tensor(probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples}, kInt64,
                                   probs.device());
  const uint64_t key = (gen ? *gen : default_generator()).next_u64();
  if (rows > 0) {
    const Shape weights_shape{rows, categories}, out_shape{rows, num_samples};
    const Tensor weights = probs.detach().contiguous();
    kernel({detail::make_view(weights, weights_shape, detail::contiguous_strides(weights_shape), weights.offset()),
            detail::make_view(out, out_shape, detail::contiguous_strides(out_shape), 0), replacement, key});
  }
  return out;
}

}  // namespace weft
