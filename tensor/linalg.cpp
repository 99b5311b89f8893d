// matmul and linear. matmul follows torch.matmul: 1-D operands get a temporary unit dim, batch
// dims broadcast, and the core product is (B, M, K) · (B, K, N) on the device's GEMM. The core's
// backward is two more products; the engine sums gradients over broadcast batch dims.
// linear is one fused op rather than matmul + add (tensor/fused_kernels.h): the bias is part of
// the product (on the CPU written into the output and the product accumulated onto it, one pass
// over the output rather than three; on CUDA cuBLASLt's bias epilogue), the weight gradient comes
// out as gᵀ·x directly in the weight's (out, in) layout (no transpose of it to copy), and only
// the gradients the inputs need are computed (the first layer's input never needs one).
// Under autocast both run in the low-precision dtype (tensor/autocast_state.h); on the CPU linear
// keeps float32 parameters' gradients in float32 (Note [Autocast linear with float32 parameters]).
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

// Note [Autocast linear with float32 parameters]
// Under autocast a float32 weight would be cast to bfloat16 by a recorded copy, its gradient
// computed in bfloat16 (gᵀ·x rounded) and widened by the copy's backward: per step, a bfloat16
// gradient written, read and widened for every weight (a tenth of a GPT-2 bf16-mixed step), and a
// rounding the float32 sums never needed. On the CPU linear casts a float32 weight and bias that
// need gradients itself, unrecorded, and records one node for them, whose backward writes their
// gradients in float32 straight from the GEMM's float32 sums (bfloat16 products into a float32
// C) and from a float32 sum of g. The forward product is the usual one of the same bfloat16
// operands; the gradients are its sums without the bfloat16 rounding.
bool casts_parameters_itself(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!detail::autocast_any_enabled() || !x.defined() || !weight.defined()) return false;
  if (weight.device().type != DeviceType::CPU || !autocast_state(DeviceType::CPU).enabled) return false;
  if (!x.is_floating_point() || x.dtype() == kFloat64 || weight.dtype() != kFloat32) return false;
  if (bias.defined() && bias.dtype() != kFloat32) return false;
  return autograd::needs_grad({&weight, &bias});
}

// gᵀ·x of bfloat16 rows into a float32 (out, in) gradient: the GEMM's float32 sums, unrounded.
Tensor weight_grad_float32(const Tensor& g_rows, const Tensor& x_rows) {
  Tensor dw = detail::make_tensor({g_rows.size(1), x_rows.size(1)}, kFloat32, g_rows.device());
  detail::backend(g_rows.device()).matmul(g_rows.detach().t().unsqueeze(0), x_rows.detach().unsqueeze(0),
                                          dw.view({1, g_rows.size(1), x_rows.size(1)}), /*accumulate=*/false);
  return dw;
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
  // Note [Autocast linear with float32 parameters]: own_casts makes the parameters' casts here.
  const bool own_casts = casts_parameters_itself(x_in, weight_in, bias_in);
  Tensor x, weight, bias;
  if (own_casts) {
    const DType low = autocast_state(DeviceType::CPU).dtype;
    x = autocast_inputs(AutocastOp::Linear, {x_in})[0];
    weight = weight_in.detach().to(low);
    bias = bias_in.defined() ? bias_in.detach().to(low) : Tensor();
  } else {
    const auto cast = autocast_inputs(AutocastOp::Linear, {x_in, weight_in, bias_in});
    x = cast[0];
    weight = cast[1];
    bias = cast[2];
  }
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

  // The node's parameter inputs: the float32 ones where linear made their casts itself.
  const Tensor& weight_input = own_casts ? weight_in : weight;
  const Tensor& bias_input = own_casts ? bias_in : bias;
  if (autograd::needs_grad({&x, &weight_input, &bias_input})) {
    const bool x_grad = x.requires_grad(), weight_grad = weight_input.requires_grad();
    const bool bias_grad = bias_input.defined() && bias_input.requires_grad();
    autograd::record("Linear", out, {x, weight_input, bias_input},
                     [sx = weight_grad ? SavedTensor(x_rows) : SavedTensor(), sw = x_grad ? SavedTensor(weight) : SavedTensor(), x_grad, weight_grad, bias_grad,
                      own_casts, x_shape = x.shape(), rows, out_features](const Tensor& g) {
                       const Tensor g_rows = g.reshape({rows, out_features});
                       std::vector<Tensor> grads(3);
                       if (x_grad) grads[0] = matmul(g_rows, sw.unpack()).reshape(x_shape);
                       if (weight_grad)
                         grads[1] = own_casts ? weight_grad_float32(g_rows, sx.unpack()) : matmul(g_rows.t(), sx.unpack());
                       if (bias_grad) grads[2] = own_casts ? sum(g_rows, {0}, false, kFloat32) : sum(g_rows, {0});
                       return grads;
                     });
  }
  return out;
}

}  // namespace weft
