// matmul and linear. matmul follows torch.matmul: 1-D operands get a temporary unit dim, batch
// dims broadcast, and the core product is (B, M, K) · (B, K, N) on the device's GEMM. The core's
// backward is two more products; the engine sums gradients over broadcast batch dims.
// Under autocast both run in the low-precision dtype (tensor/autocast_state.h).
#include "tensor/autocast_state.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;

namespace {

std::string shapes_text(const Tensor& a, const Tensor& b) { return detail::cat(a.shape(), " · ", b.shape()); }

// a: (..., M, K) · b: (..., K, N) -> (..., M, N), both with at least 2 dims.
Tensor batched_matmul(const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.size(-1) == b.size(-2), "[matmul] inner dimensions differ: ", shapes_text(a, b));
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int64_t count = detail::shape_numel(batch);

  Shape a_full = batch, b_full = batch, out_shape = batch;
  a_full.insert(a_full.end(), {m, k});
  b_full.insert(b_full.end(), {k, n});
  out_shape.insert(out_shape.end(), {m, n});
  // Broadcast batch dims become stride-0 views; flattening them to one dim copies only when the
  // strides do not allow a view.
  const Tensor a3 = detail::raw_expand(a.detach(), a_full).reshape({count, m, k});
  const Tensor b3 = detail::raw_expand(b.detach(), b_full).reshape({count, k, n});
  const DType dtype = promote_types(a.dtype(), b.dtype());
  Tensor out = detail::make_tensor(out_shape, dtype, a.device());
  detail::backend(a.device()).matmul(detail::raw_cast(a3, dtype), detail::raw_cast(b3, dtype),
                                     out.detach().view({count, m, n}));
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Matmul", out, {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g) {
      const Tensor& av = sa.unpack();
      const Tensor& bv = sb.unpack();
      return std::vector<Tensor>{batched_matmul(g, bv.transpose(-1, -2)), batched_matmul(av.transpose(-1, -2), g)};
    });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autocast_inputs(AutocastOp::Matmul, {a_in, b_in});
  detail::check_defined(a, "matmul");
  detail::check_defined(b, "matmul");
  detail::check_same_device(a, b, "matmul");
  WEFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both arguments need at least 1 dimension, got ",
             shapes_text(a, b));
  WEFT_CHECK(a.size(-1) == b.size(b.dim() == 1 ? 0 : -2), "[matmul] inner dimensions differ: ", shapes_text(a, b));
  const bool a_vector = a.dim() == 1, b_vector = b.dim() == 1;
  Tensor out = batched_matmul(a_vector ? a.unsqueeze(0) : a, b_vector ? b.unsqueeze(1) : b);
  if (b_vector) out = out.squeeze(-1);
  if (a_vector) out = out.squeeze(a_vector && b_vector ? -1 : -2);
  return out;
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const auto [x, weight, bias] = autocast_inputs(AutocastOp::Linear, {x_in, weight_in, bias_in});
  detail::check_defined(x, "linear");
  detail::check_defined(weight, "linear", "weight");
  WEFT_CHECK(weight.dim() == 2, "[linear] expected a 2-D weight (out, in), got shape ", weight.shape());
  WEFT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "[linear] input features differ: input ", x.shape(),
             " has ", x.dim() >= 1 ? x.size(-1) : 0, " features, weight ", weight.shape(), " expects ", weight.size(1));
  Tensor out = matmul(x, weight.t());
  if (bias.defined()) {
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "[linear] expected a bias of shape (",
               weight.size(0), ",), got ", bias.shape());
    out = add(out, bias);
  }
  return out;
}

}  // namespace weft
