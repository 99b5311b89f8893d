// matmul and linear. matmul follows torch.matmul: 1-D operands get a temporary unit dim, batch
// dims broadcast, and the core product is (B, M, K) · (B, K, N) on the device's GEMM. The core's
// backward is two more products; the engine sums gradients over broadcast batch dims.
// linear is one fused op rather than matmul + add (tensor/fused_kernels.h): the bias is part of
// the product (on the CPU written into the output and the product accumulated onto it, one pass
// over the output rather than three; on CUDA cuBLASLt's bias epilogue), the weight gradient comes
// out as gᵀ·x directly in the weight's (out, in) layout (no transpose of it to copy), and only
// the gradients the inputs need are computed (the first layer's input never needs one).
// Under autocast both run in the low-precision dtype (tensor/autocast_state.h).
#include "tensor/autocast_state.h"
#include "tensor/fused_kernels.h"
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
                                     out.detach().view({count, m, n}), /*accumulate=*/false);
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
  detail::check_same_device(x, weight, "linear");
  WEFT_CHECK(weight.dim() == 2, "[linear] expected a 2-D weight (out, in), got shape ", weight.shape());
  WEFT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "[linear] input features differ: input ", x.shape(),
             " has ", x.dim() >= 1 ? x.size(-1) : 0, " features, weight ", weight.shape(), " expects ", weight.size(1));
  const int64_t in_features = weight.size(1), out_features = weight.size(0);
  DType dtype = promote_types(x.dtype(), weight.dtype());
  if (bias.defined()) {
    detail::check_same_device(x, bias, "linear");
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "[linear] expected a bias of shape (", out_features,
               ",), got ", bias.shape());
    dtype = promote_types(dtype, bias.dtype());
  }

  // Leading dims flatten into rows: (rows, in) · (in, out) -> (rows, out).
  const int64_t rows = detail::shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Tensor x_rows = detail::raw_cast(x.detach().reshape({rows, in_features}), dtype);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = detail::make_tensor(out_shape, dtype, x.device());
  detail::linear_kernels().at(x.device())({x_rows, detail::raw_cast(weight.detach(), dtype),
                                           bias.defined() ? detail::raw_cast(bias.detach(), dtype) : Tensor(),
                                           out.detach().view({rows, out_features}),
                                           !weight_in.requires_grad() && weight.is_same(weight_in) &&
                                               weight.dtype() == dtype});

  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool x_grad = x.requires_grad(), weight_grad = weight.requires_grad();
    const bool bias_grad = bias.defined() && bias.requires_grad();
    autograd::record("Linear", out, {x, weight, bias},
                     [sx = weight_grad ? SavedTensor(x_rows) : SavedTensor(), sw = x_grad ? SavedTensor(weight) : SavedTensor(), x_grad, weight_grad, bias_grad,
                      x_shape = x.shape(), rows, out_features](const Tensor& g) {
                       const Tensor g_rows = g.reshape({rows, out_features});
                       std::vector<Tensor> grads(3);
                       if (x_grad) grads[0] = matmul(g_rows, sw.unpack()).reshape(x_shape);
                       if (weight_grad) grads[1] = matmul(g_rows.t(), sx.unpack());
                       if (bias_grad) grads[2] = sum(g_rows, {0});
                       return grads;
                     });
  }
  return out;
}

}  // namespace weft
