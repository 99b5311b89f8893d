// Neural-network functions: softmax family (fused kernels with their own backward), losses,
// dropout, embedding and layer norm. Losses reduce in the input's floating dtype; class-index
// targets must be integers. Under autocast the softmax family, the losses and layer norm run in
// float32 (tensor/autocast_state.h).
#include <cmath>

#include "tensor/autocast_state.h"
#include "tensor/init_context.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;

namespace {

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
  return nll_loss_for("nll_loss", log_probs, target, reduction, ignore_index, weight);
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing, const Tensor& weight_in) {
  const auto [logits, weight] = autocast_inputs(AutocastOp::CrossEntropy, {logits_in, weight_in});
  WEFT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
             "[cross_entropy] label_smoothing must be in [0, 1], got ", label_smoothing);
  flatten_classes(logits, target, "cross_entropy");  // checks the shapes before log_softmax sees them
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const Tensor logp = log_softmax(logits, class_dim);
  const Tensor nll = nll_loss_for("cross_entropy", logp, target, reduction, ignore_index, weight);
  if (label_smoothing == 0.0) return nll;

  // Smoothing spreads ε of the target mass uniformly: loss = (1-ε)·nll + ε/C · Σ_c −log p_c (·w_c).
  auto [scores, flat_target] = flatten_classes(logp, target, "cross_entropy");
  const int64_t classes = scores.size(1);
  const Tensor t = flat_target.to(DType::Int64);
  const Tensor valid = ne(t, static_cast<double>(ignore_index)).to(scores.dtype());
  Tensor per_class = neg(scores);
  if (weight.defined()) per_class = mul(per_class, weight.to(scores.dtype()));
  const Tensor smooth = mul(sum(per_class, {1}), valid);
  Tensor smooth_reduced;
  switch (reduction) {
    case Reduction::None: smooth_reduced = smooth.reshape(target.shape()); break;
    case Reduction::Sum: smooth_reduced = sum(smooth); break;
    case Reduction::Mean: {
      Tensor denominator = sum(valid);
      if (weight.defined())
        denominator = sum(mul(index_select(weight.to(scores.dtype()), 0, where(ne(t, static_cast<double>(ignore_index)), t, zeros_like(t))), valid));
      smooth_reduced = div(sum(smooth), denominator);
      break;
    }
  }
  return add(mul(nll, 1.0 - label_smoothing), mul(smooth_reduced, label_smoothing / static_cast<double>(classes)));
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const auto [input, target] = autocast_inputs(AutocastOp::MseLoss, {input_in, target_in});
  detail::check_defined(input, "mse_loss");
  detail::check_defined(target, "mse_loss", "target");
  WEFT_CHECK(input.shape() == target.shape(), "[mse_loss] input and target shapes differ: ", input.shape(), " vs ",
             target.shape());
  const Tensor diff = sub(input, target);
  return reduce_loss(mul(diff, diff), reduction);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::check_defined(x, "dropout");
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, zeros_like(x));
  const Tensor keep = lt(rand(x.shape(), TensorOptions(x.dtype()).device(x.device()), gen), 1.0 - p);
  return mul(x, div(keep.to(x.dtype()), 1.0 - p));
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

Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
  const auto [x, weight, bias] = autocast_inputs(AutocastOp::LayerNorm, {x_in, weight_in, bias_in});
  detail::check_defined(x, "layer_norm");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  WEFT_CHECK(k >= 1 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
             "[layer_norm] expected input with trailing dims ", normalized_shape, ", got ", x.shape());
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor variance = mean(mul(centered, centered), dims, true);
  Tensor out = mul(centered, rsqrt(add(variance, eps)));
  if (weight.defined()) {
    WEFT_CHECK(weight.shape() == normalized_shape, "[layer_norm] expected weight of shape ", normalized_shape,
               ", got ", weight.shape());
    out = mul(out, weight);
  }
  if (bias.defined()) {
    WEFT_CHECK(bias.shape() == normalized_shape, "[layer_norm] expected bias of shape ", normalized_shape, ", got ",
               bias.shape());
    out = add(out, bias);
  }
  return out;
}

}  // namespace weft
