// Neural-network functions: softmax family (fused kernels with their own backward), losses,
// dropout, embedding, layer norm and RMS norm. Losses reduce in the input's floating dtype;
// class-index targets must be integers. Under autocast the softmax family, the losses and layer
// norm run in float32 (tensor/autocast_state.h).
// cross_entropy without class weights, layer_norm and dropout run fused kernels with their own
// backward (tensor/fused_kernels.h); cross_entropy with class weights is composed of
// log_softmax and nll_loss. rms_norm is a composition of ops, which autograd records, computed
// by one fused kernel where there is nothing to record.
#include <cmath>

#include "tensor/autocast_state.h"
#include "tensor/enum_check.h"
#include "tensor/fused_kernels.h"
#include "tensor/init_context.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;

namespace {

constexpr int kNumReductions = 3;  // Reduction::None, Mean, Sum (tensor/ops.h)


// Softmax over `dim`: the kernel works on rows of the last dim, so other dims are moved there.
// Errors name `op`, the function the user called; `name` is the autograd node's.
Tensor softmax_impl(const Tensor& input, int64_t dim_in, bool log, const char* op, const char* name) {
  detail::check_defined(input, op);
  const auto [autocast_x] = autocast_inputs(log ? AutocastOp::LogSoftmax : AutocastOp::Softmax, {input});
  const Tensor x = is_floating(autocast_x.dtype()) ? autocast_x : autocast_x.to(default_dtype());
  if (x.dim() == 0) {
    // Softmax over one element is constant, but it stays in the graph (with a zero gradient) so
    // that a loss built on it can still be differentiated.
    Tensor out = log ? zeros_like(x) : ones_like(x);
    if (autograd::needs_grad({&x}))
      autograd::record(name, out, {x}, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });
    return out;
  }
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), op);
  const int64_t last = x.dim() - 1;
  const Tensor rows = x.detach().transpose(d, last).contiguous();
  Tensor y_rows = detail::make_tensor(rows.shape(), x.dtype(), x.device());
  detail::backend(x.device()).softmax(rows, y_rows, log);
  Tensor out = d == last ? y_rows : y_rows.transpose(d, last).contiguous();
  if (autograd::needs_grad({&x})) {
    autograd::record(name, out, {x}, [so = SavedTensor(y_rows), d, last, log](const Tensor& g) {
      const Tensor g_rows = g.transpose(d, last).contiguous();
      const Tensor& y = so.unpack();
      Tensor gx = detail::make_tensor(y.shape(), y.dtype(), y.device());
      detail::backend(y.device()).softmax_backward(detail::raw_cast(g_rows, y.dtype()), y, gx, log);
      return std::vector<Tensor>{d == last ? gx : gx.transpose(d, last).contiguous()};
    });
  }
  return out;
}

Tensor reduce_loss(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return mean(losses);
  }
  return losses;
}

// Moves the class dim of (N, C, d...) last and flattens: (N·d..., C); targets (N·d...).
struct FlatClasses {
  Tensor scores;
  Tensor target;
};

FlatClasses flatten_classes(const Tensor& scores, const Tensor& target, const char* op) {
  detail::check_defined(scores, op);
  detail::check_defined(target, op, "target");
  WEFT_CHECK(is_integral(target.dtype()), "[", op, "] expected class-index targets of an integer dtype, got ",
             target.dtype());
  WEFT_CHECK(scores.dim() >= 1, "[", op, "] expected input of shape (C), (N, C) or (N, C, d...), got ", scores.shape());
  if (scores.dim() == 1) {
    WEFT_CHECK(target.dim() == 0, "[", op, "] a (C) input takes a 0-d target, got shape ", target.shape());
    return {scores.unsqueeze(0), target.reshape({1})};
  }
  Shape expected = scores.shape();
  expected.erase(expected.begin() + 1);
  WEFT_CHECK(target.shape() == expected, "[", op, "] expected a target of shape ", expected, " for input ",
             scores.shape(), ", got ", target.shape());
  Tensor s = scores;
  if (scores.dim() > 2) {
    Shape perm{0};
    for (int64_t d = 2; d < scores.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    s = scores.permute(perm);
  }
  return {s.reshape({-1, scores.size(1)}), target.reshape({-1})};
}

// nll_loss on behalf of `op` (nll_loss itself, or cross_entropy), which its errors name.
Tensor nll_loss_for(const char* op, const Tensor& log_probs_in, const Tensor& target, Reduction reduction,
                    int64_t ignore_index, const Tensor& weight_in) {
  const auto [log_probs, weight] = autocast_inputs(AutocastOp::NllLoss, {log_probs_in, weight_in});
  auto [scores, flat_target] = flatten_classes(log_probs, target, op);
  const int64_t classes = scores.size(1);
  const Tensor t = flat_target.to(DType::Int64);
  const Tensor valid = ne(t, static_cast<double>(ignore_index));
  const Tensor safe_t = where(valid, t, zeros_like(t));
  const std::vector<int64_t> labels = safe_t.to_vector<int64_t>();
  for (int64_t label : labels)
    WEFT_CHECK(label >= 0 && label < classes, "[", op, "] target ", label, " is out of bounds for ", classes,
               " classes");
  Tensor w = valid.to(scores.dtype());
  if (weight.defined()) {
    WEFT_CHECK(weight.dim() == 1 && weight.size(0) == classes, "[", op, "] expected a weight of shape (", classes,
               ",), got ", weight.shape());
    w = mul(w, index_select(weight.to(scores.dtype()), 0, safe_t));
  }
  const Tensor picked = gather(scores, 1, safe_t.unsqueeze(1)).squeeze(1);
  const Tensor losses = neg(mul(picked, w));
  if (reduction == Reduction::None) return losses.reshape(target.shape());
  if (reduction == Reduction::Sum) return sum(losses);
  return div(sum(losses), sum(w));  // weighted mean over the targets that are not ignored
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax", "Softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax", "LogSoftmax"); }

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index,
                const Tensor& weight) {
  detail::check_enum(reduction, kNumReductions, "nll_loss", "Reduction");
  return nll_loss_for("nll_loss", log_probs, target, reduction, ignore_index, weight);
}

namespace {

// cross_entropy with class weights: log_softmax, then the weighted nll_loss, plus the smoothing term.
Tensor weighted_cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                              double label_smoothing, const Tensor& weight) {
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const Tensor logp = log_softmax(logits, class_dim);
  const Tensor nll = nll_loss_for("cross_entropy", logp, target, reduction, ignore_index, weight);
  if (label_smoothing == 0.0) return nll;

  // Smoothing spreads ε of the target mass uniformly: loss = (1-ε)·nll + ε/C · Σ_c −log p_c · w_c.
  auto [scores, flat_target] = flatten_classes(logp, target, "cross_entropy");
  const int64_t classes = scores.size(1);
  const Tensor t = flat_target.to(DType::Int64);
  const Tensor valid = ne(t, static_cast<double>(ignore_index)).to(scores.dtype());
  const Tensor per_class = mul(neg(scores), weight.to(scores.dtype()));
  const Tensor smooth = mul(sum(per_class, {1}), valid);
  Tensor smooth_reduced;
  switch (reduction) {
    case Reduction::None: smooth_reduced = smooth.reshape(target.shape()); break;
    case Reduction::Sum: smooth_reduced = sum(smooth); break;
    case Reduction::Mean: {
      const Tensor safe_t = where(ne(t, static_cast<double>(ignore_index)), t, zeros_like(t));
      smooth_reduced = div(sum(smooth), sum(mul(index_select(weight.to(scores.dtype()), 0, safe_t), valid)));
      break;
    }
  }
  return add(mul(nll, 1.0 - label_smoothing), mul(smooth_reduced, label_smoothing / static_cast<double>(classes)));
}

// Per-row losses of (N, C) scores against (N) int64 targets, by the fused kernel, with its backward.
Tensor cross_entropy_rows(const Tensor& scores, const Tensor& target, int64_t ignore_index, double label_smoothing) {
  const Tensor x = scores.contiguous();
  const int64_t rows = x.size(0);
  Tensor losses = detail::make_tensor({rows}, x.dtype(), x.device());
  const Tensor lse = detail::make_tensor({rows}, x.dtype() == kFloat64 ? kFloat64 : kFloat32, x.device());
  detail::cross_entropy_forward_kernels().at(x.device())({x.detach(), target, losses, lse, ignore_index, label_smoothing});
  if (autograd::needs_grad({&x})) {
    autograd::record("CrossEntropy", losses, {x},
                     [sx = SavedTensor(x), target, lse, ignore_index, label_smoothing](const Tensor& g) {
                       const Tensor& xv = sx.unpack();
                       Tensor grad = detail::make_tensor(xv.shape(), xv.dtype(), xv.device());
                       detail::cross_entropy_backward_kernels().at(xv.device())(
                           {xv.detach(), target, lse, detail::raw_cast(g, xv.dtype()).contiguous(), grad, ignore_index,
                            label_smoothing});
                       return std::vector<Tensor>{grad};
                     });
  }
  return losses;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing, const Tensor& weight_in) {
  detail::check_enum(reduction, kNumReductions, "cross_entropy", "Reduction");
  const auto [logits, weight] = autocast_inputs(AutocastOp::CrossEntropy, {logits_in, weight_in});
  WEFT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
             "[cross_entropy] label_smoothing must be in [0, 1], got ", label_smoothing);
  if (weight.defined()) return weighted_cross_entropy(logits, target, reduction, ignore_index, label_smoothing, weight);
  detail::check_defined(logits, "cross_entropy");
  const Tensor floating = is_floating(logits.dtype()) ? logits : logits.to(default_dtype());
  auto [scores, flat_target] = flatten_classes(floating, target, "cross_entropy");
  detail::check_same_device(scores, flat_target, "cross_entropy");
  const Tensor t = flat_target.to(DType::Int64).contiguous();
  const Tensor losses = cross_entropy_rows(scores, t, ignore_index, label_smoothing);
  switch (reduction) {
    case Reduction::None: return losses.reshape(target.shape());
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: break;
  }
  // The mean over the targets that are not ignored (nan when all are, as PyTorch).
  return div(sum(losses), sum(ne(t, static_cast<double>(ignore_index)).to(losses.dtype())));
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  detail::check_enum(reduction, kNumReductions, "mse_loss", "Reduction");
  const auto [input, target] = autocast_inputs(AutocastOp::MseLoss, {input_in, target_in});
  detail::check_defined(input, "mse_loss");
  detail::check_defined(target, "mse_loss", "target");
  WEFT_CHECK(input.shape() == target.shape(), "[mse_loss] input and target shapes differ: ", input.shape(), " vs ",
             target.shape());
  const Tensor diff = sub(input, target);
  return reduce_loss(mul(diff, diff), reduction);
}

Tensor dropout(const Tensor& x_in, double p, bool training, Generator* gen) {
  detail::check_defined(x_in, "dropout");
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x_in;
  WEFT_CHECK(is_floating(x_in.dtype()), "[dropout] expected a floating tensor, got ", x_in.dtype());
  if (p == 1.0) return mul(x_in, zeros_like(x_in));
  // One key per call (Note [Philox streams] in tensor/philox.h): the mask is a function of the
  // key and the element index only, the same on every device, and the backward recomputes it.
  const uint64_t key = (gen ? *gen : default_generator()).next_u64();
  const double keep = 1.0 - p;
  const Tensor x = x_in.contiguous();
  Tensor out = detail::make_tensor(x.shape(), x.dtype(), x.device());
  detail::dropout_kernels().at(x.device())({x.detach(), out, keep, key});
  if (autograd::needs_grad({&x})) {
    autograd::record("Dropout", out, {x}, [key, keep, dtype = x.dtype()](const Tensor& g) {
      const Tensor gc = detail::raw_cast(g, dtype).contiguous();
      Tensor grad = detail::make_tensor(gc.shape(), dtype, gc.device());
      detail::dropout_kernels().at(gc.device())({gc, grad, keep, key});
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  detail::check_defined(weight, "embedding", "weight");
  detail::check_defined(indices, "embedding", "indices");
  WEFT_CHECK(weight.dim() == 2, "[embedding] expected a 2-D weight (num_embeddings, dim), got ", weight.shape());
  WEFT_CHECK(is_integral(indices.dtype()), "[embedding] expected integer indices, got ", indices.dtype());
  // Checked here so that the message names embedding, not the index_select below.
  if (indices.numel() > 0) {
    const int64_t rows = weight.size(0);
    const int64_t lowest = amin(indices).item<int64_t>(), highest = amax(indices).item<int64_t>();
    WEFT_CHECK(lowest >= 0 && highest < rows, "[embedding] index ", lowest < 0 ? lowest : highest,
               " is out of range for ", rows, " embeddings; expected indices in [0, ", rows, ")");
  }
  Shape shape = indices.shape();
  shape.push_back(weight.size(1));
  return index_select(weight, 0, indices.reshape({-1})).view(shape);
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  detail::check_defined(x, "rms_norm");
  detail::check_defined(weight, "rms_norm");
  WEFT_CHECK(x.dim() >= 1 && is_floating(x.dtype()), "[rms_norm] expected a floating input of at least one dim, got ",
             x.dtype(), " of shape ", x.shape());
  WEFT_CHECK(weight.shape() == Shape{x.size(-1)}, "[rms_norm] expected weight of shape ", Shape{x.size(-1)},
             " (the input's last dim), got ", weight.shape());
  WEFT_CHECK(is_floating(weight.dtype()), "[rms_norm] expected a floating weight, got ", weight.dtype());
  detail::check_same_device(x, weight, "rms_norm");
  const DType d = x.dtype();
  detail::RmsNormKernel* kernel = detail::rms_norm_kernels().find(x.device().type);
  if (kernel != nullptr && weight.dtype() == d && (d == kFloat32 || d == kBFloat16 || d == kFloat16) &&
      !autograd::needs_grad({&x, &weight})) {
    const Tensor xc = x.contiguous();
    Tensor y = detail::make_tensor(x.shape(), d, x.device());
    kernel({xc, weight.contiguous(), y, eps});
    return y;
  }
  const Tensor x32 = x.to(kFloat32);
  const Tensor normed = mul(x32, rsqrt(add(mean(mul(x32, x32), {-1}, /*keepdim=*/true), eps)));
  return mul(weight, normed.to(d));
}

Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
  const auto [x_cast, weight_cast, bias_cast] = autocast_inputs(AutocastOp::LayerNorm, {x_in, weight_in, bias_in});
  detail::check_defined(x_cast, "layer_norm");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  WEFT_CHECK(k >= 1 && k <= x_cast.dim() && Shape(x_cast.shape().end() - k, x_cast.shape().end()) == normalized_shape,
             "[layer_norm] expected input with trailing dims ", normalized_shape, ", got ", x_cast.shape());
  WEFT_CHECK(is_floating(x_cast.dtype()), "[layer_norm] expected a floating input, got ", x_cast.dtype());
  DType dtype = x_cast.dtype();
  for (const Tensor* p : {&weight_cast, &bias_cast}) {
    if (!p->defined()) continue;
    WEFT_CHECK(p->shape() == normalized_shape, "[layer_norm] expected ", p == &weight_cast ? "weight" : "bias",
               " of shape ", normalized_shape, ", got ", p->shape());
    detail::check_same_device(x_cast, *p, "layer_norm");
    dtype = promote_types(dtype, p->dtype());
  }
  // One dtype for the kernel; the casts are recorded, so each gradient comes back in its input's dtype.
  const Tensor x = x_cast.to(dtype).contiguous();
  const Tensor weight = weight_cast.defined() ? weight_cast.to(dtype).contiguous() : Tensor();
  const Tensor bias = bias_cast.defined() ? bias_cast.to(dtype).contiguous() : Tensor();
  const int64_t cols = detail::shape_numel(normalized_shape);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const DType stat = dtype == kFloat64 ? kFloat64 : kFloat32;
  auto rows_of = [rows, cols](const Tensor& t) { return t.detach().view({rows, cols}); };
  auto flat = [cols](const Tensor& t) { return t.defined() ? t.detach().view({cols}) : Tensor(); };

  Tensor y = detail::make_tensor(x.shape(), dtype, x.device());
  const Tensor mean = detail::make_tensor({rows}, stat, x.device());
  const Tensor rstd = detail::make_tensor({rows}, stat, x.device());
  detail::layer_norm_forward_kernels().at(x.device())({rows_of(x), flat(weight), flat(bias), rows_of(y), mean, rstd, eps});
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool x_grad = x.requires_grad();
    const bool weight_grad = weight.defined() && weight.requires_grad();
    const bool bias_grad = bias.defined() && bias.requires_grad();
    autograd::record("LayerNorm", y, {x, weight, bias},
                     [sx = SavedTensor(x), sw = weight.defined() ? SavedTensor(weight) : SavedTensor(), mean, rstd,
                      x_grad, weight_grad, bias_grad, rows_of, flat, normalized_shape](const Tensor& g) {
                       const Tensor& xv = sx.unpack();
                       const Tensor w = sw.defined() ? sw.unpack() : Tensor();
                       auto fresh = [&](bool needed, const Shape& shape) {
                         return needed ? detail::make_tensor(shape, xv.dtype(), xv.device()) : Tensor();
                       };
                       std::vector<Tensor> grads{fresh(x_grad, xv.shape()), fresh(weight_grad, normalized_shape),
                                                 fresh(bias_grad, normalized_shape)};
                       detail::layer_norm_backward_kernels().at(xv.device())(
                           {rows_of(detail::raw_cast(g, xv.dtype()).contiguous()), rows_of(xv), flat(w), mean, rstd,
                            grads[0].defined() ? rows_of(grads[0]) : Tensor(), flat(grads[1]), flat(grads[2])});
                       return grads;
                     });
  }
  return y;
}

}  // namespace weft
