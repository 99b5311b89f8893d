// Reduction front-ends. Every reduction moves the reduced dims last (a permute), makes that
// contiguous and hands rows to the kernel; the result is then shaped with or without keepdim.
// The one exception is a sum over the leading dims of a contiguous tensor, which a column
// kernel reads in place.
// Composite reductions (mean, var, std, norm, logsumexp) are built from differentiable ops, so
// their gradients come from the parts. Under autocast sum, mean, norm and logsumexp run in
// float32 (tensor/autocast_state.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/autocast_state.h"
#include "tensor/init_context.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;
using detail::ReduceOp;

namespace {

// Sorted, unique, wrapped dims; empty input means all dims.
Shape normalize_dims(const Shape& dims, int64_t ndim, const char* op) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(detail::wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  WEFT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "[", op, "] a dimension appears twice in ", dims);
  return out;
}

struct ReductionLayout {
  Tensor rows;       // (kept..., reduced...) contiguous, viewed as (rows, n)
  Shape kept_shape;  // result shape without keepdim
  Shape keep_shape;  // result shape with keepdim
};

ReductionLayout layout(const Tensor& x, const Shape& dims) {
  const int64_t nd = x.dim();
  Shape perm, kept, keep;
  int64_t n = 1;
  for (int64_t d = 0; d < nd; ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) {
      perm.push_back(d);
      kept.push_back(x.size(d));
    }
    keep.push_back(reduced ? 1 : x.size(d));
  }
  for (int64_t d : dims) {
    perm.push_back(d);
    n *= x.size(d);
  }
  // Kernels never record, so the (rows, n) view is made raw; when the reduced dims are already
  // last and x is contiguous (the usual case) x itself is viewed, with no permute and no copy.
  bool in_place = x.is_contiguous();
  for (size_t i = 0; i < perm.size(); ++i) in_place &= perm[i] == static_cast<int64_t>(i);
  const Tensor permuted = in_place ? x : x.detach().permute(perm).contiguous();
  const int64_t rows = detail::shape_numel(kept);
  const Shape rows_shape{rows, n};
  return {detail::make_view(permuted, rows_shape, detail::contiguous_strides(rows_shape), permuted.offset()), kept,
          keep};
}

// A sum over the leading dims of a contiguous tensor (a bias gradient, a gradient summed back
// over broadcast batch dims) reads x as (reduced, kept) columns in place instead of transposing
// it first; any other sum takes the row layout.
struct SumLayout : ReductionLayout {
  bool columns = false;  // rows is (n, kept) and the sum runs down its columns
};

SumLayout layout_for_sum(const Tensor& x, const Shape& dims) {
  const auto k = static_cast<int64_t>(dims.size());
  bool leading = x.is_contiguous() && k > 0 && k < x.dim();
  for (int64_t i = 0; leading && i < k; ++i) leading = dims[static_cast<size_t>(i)] == i;
  if (!leading) return {layout(x, dims), false};
  const Shape kept(x.shape().begin() + k, x.shape().end());
  Shape keep = kept;
  keep.insert(keep.begin(), static_cast<size_t>(k), 1);
  const Shape columns_shape{x.numel() / std::max<int64_t>(detail::shape_numel(kept), 1), detail::shape_numel(kept)};
  return {{detail::make_view(x, columns_shape, detail::contiguous_strides(columns_shape), x.offset()), kept, keep},
          true};
}

Tensor run_reduce(ReduceOp op, const ReductionLayout& l, DType out_dtype, bool keepdim) {
  Tensor out = detail::make_tensor(keepdim ? l.keep_shape : l.kept_shape, out_dtype, l.rows.device());
  detail::backend(out.device()).reduce(op, l.rows, detail::make_view(out, {l.rows.size(0)}, {1}, 0));
  return out;
}

// Brings a reduced gradient back to the input's shape (unsqueezing the reduced dims first).
Tensor expand_back(const Tensor& g, const Shape& keep_shape, const Shape& input_shape) {
  return g.reshape(keep_shape).expand(input_shape);
}

}  // namespace

Tensor sum(const Tensor& input, Shape dims_in, bool keepdim, std::optional<DType> dtype) {
  const auto [x] = autocast_inputs(AutocastOp::Sum, {input});
  detail::check_defined(x, "sum");
  const Shape dims = normalize_dims(dims_in, x.dim(), "sum");
  const DType out_dtype = dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : DType::Int64);
  const DType accumulator_dtype = is_floating(out_dtype) ? out_dtype : DType::Int64;
  const auto l = layout_for_sum(x, dims);
  Tensor out = detail::make_tensor(keepdim ? l.keep_shape : l.kept_shape, accumulator_dtype, x.device());
  const Tensor out_flat = detail::make_view(out, {out.numel()}, {1}, 0);
  if (l.columns) detail::backend(x.device()).sum_columns(l.rows, out_flat);
  else detail::backend(x.device()).reduce(ReduceOp::Sum, l.rows, out_flat);
  if (out.dtype() != out_dtype) out = detail::raw_cast(out, out_dtype);
  if (autograd::needs_grad({&x})) {
    autograd::record("Sum", out, {x}, [keep = l.keep_shape, shape = x.shape()](const Tensor& g) {
      return std::vector<Tensor>{expand_back(g, keep, shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& input, Shape dims_in, bool keepdim) {
  const auto [x] = autocast_inputs(AutocastOp::Mean, {input});
  detail::check_defined(x, "mean");
  WEFT_CHECK(is_floating(x.dtype()), "[mean] expected a floating tensor, got ", x.dtype(),
             "; convert with .to(dtype) first");
  const Shape dims = normalize_dims(dims_in, x.dim(), "mean");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  return div(sum(x, dims, keepdim), static_cast<double>(n));
}

namespace {

Tensor extreme(ReduceOp op, const Tensor& x, Shape dims_in, bool keepdim, const char* name) {
  detail::check_defined(x, name);
  const Shape dims = normalize_dims(dims_in, x.dim(), name);
  for (int64_t d : dims)
    WEFT_CHECK(x.size(d) > 0, "[", name, "] cannot reduce over dimension ", d, " of size 0 in shape ", x.shape());
  WEFT_CHECK(x.numel() > 0 || !dims.empty(), "[", name, "] cannot reduce an empty tensor");
  const auto l = layout(x, dims);
  Tensor out = run_reduce(op, l, x.dtype(), keepdim);
  if (autograd::needs_grad({&x})) {
    // Ties share the gradient evenly, as PyTorch's amax/amin.
    autograd::record(name, out, {x}, [sx = SavedTensor(x), so = SavedTensor(out), keep = l.keep_shape, dims](const Tensor& g) {
      const Tensor hit = eq(sx.unpack(), so.unpack().reshape(keep)).to(g.dtype());
      return std::vector<Tensor>{div(mul(hit, g.reshape(keep)), sum(hit, dims, true))};
    });
  }
  return out;
}

ValuesIndices extreme_with_index(bool is_max, const Tensor& x, int64_t dim_in, bool keepdim) {
  const char* name = is_max ? "max" : "min";
  detail::check_defined(x, name);
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), name);
  const Shape dims = x.dim() == 0 ? Shape{} : Shape{dim};
  WEFT_CHECK(x.dim() == 0 || x.size(dim) > 0, "[", name, "] cannot reduce over dimension ", dim,
             " of size 0 in shape ", x.shape());
  const auto l = layout(x, dims);
  Tensor values = run_reduce(is_max ? ReduceOp::Max : ReduceOp::Min, l, x.dtype(), keepdim);
  Tensor indices = run_reduce(is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, l, DType::Int64, keepdim);
  if (autograd::needs_grad({&x})) {
    // The gradient goes to the chosen index only.
    autograd::record(is_max ? "Max" : "Min", values, {x},
                     [idx = indices, keep = l.keep_shape, shape = x.shape(), dim](const Tensor& g) {
                       if (shape.empty()) return std::vector<Tensor>{g};
                       return std::vector<Tensor>{scatter_add(zeros(shape, TensorOptions(g.dtype()).device(g.device())),
                                                              dim, idx.reshape(keep), g.reshape(keep))};
                     });
  }
  return {values, indices};
}

}  // namespace

Tensor amax(const Tensor& x, Shape dims, bool keepdim) { return extreme(ReduceOp::Max, x, std::move(dims), keepdim, "Amax"); }
Tensor amin(const Tensor& x, Shape dims, bool keepdim) { return extreme(ReduceOp::Min, x, std::move(dims), keepdim, "Amin"); }
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_with_index(true, x, dim, keepdim); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_with_index(false, x, dim, keepdim); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return max(x.detach().reshape({-1}), 0, false).indices;
  return max(x.detach(), *dim, keepdim).indices;
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return min(x.detach().reshape({-1}), 0, false).indices;
  return min(x.detach(), *dim, keepdim).indices;
}

Tensor var(const Tensor& x, Shape dims_in, int64_t correction, bool keepdim) {
  detail::check_defined(x, "var");
  WEFT_CHECK(is_floating(x.dtype()), "[var] expected a floating tensor, got ", x.dtype());
  const Shape dims = normalize_dims(dims_in, x.dim(), "var");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  const Tensor centered = sub(x, mean(x, dims, true));
  const double denominator = std::max<double>(static_cast<double>(n - correction), 0.0);
  return div(sum(mul(centered, centered), dims, keepdim), denominator);
}

Tensor std(const Tensor& x, Shape dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, std::move(dims), correction, keepdim));
}

Tensor norm(const Tensor& input, double p, Shape dims_in, bool keepdim) {
  const auto [x] = autocast_inputs(AutocastOp::Norm, {input});
  detail::check_defined(x, "norm");
  WEFT_CHECK(is_floating(x.dtype()), "[norm] expected a floating tensor, got ", x.dtype());
  WEFT_CHECK(p > 0, "[norm] expected p > 0, got ", p);
  const Shape dims = normalize_dims(dims_in, x.dim(), "norm");
  if (std::isinf(p)) return amax(abs(x), dims, keepdim);
  if (p == 2.0) {
    const auto l = layout(mul(x.detach(), x.detach()), dims);
    Tensor out = sqrt(run_reduce(ReduceOp::Sum, l, x.dtype(), keepdim));
    if (autograd::needs_grad({&x})) {
      // d‖x‖/dx = x/‖x‖, and 0 where the norm is 0 (a subgradient, as PyTorch).
      autograd::record("Norm", out, {x}, [sx = SavedTensor(x), so = SavedTensor(out), keep = l.keep_shape](const Tensor& g) {
        const Tensor n = so.unpack().reshape(keep);
        const Tensor scale = where(eq(n, 0.0), zeros_like(n), div(g.reshape(keep), n));
        return std::vector<Tensor>{mul(sx.unpack(), scale)};
      });
    }
    return out;
  }
  return pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
}

Tensor logsumexp(const Tensor& input, Shape dims_in, bool keepdim) {
  const auto [x] = autocast_inputs(AutocastOp::LogSumExp, {input});
  detail::check_defined(x, "logsumexp");
  const Tensor xf = is_floating(x.dtype()) ? x : x.to(default_dtype());
  const Shape dims = normalize_dims(dims_in, xf.dim(), "logsumexp");
  // Shift by the (detached) max for stability; infinite maxima shift by 0 instead.
  Tensor m = amax(xf.detach(), dims, true);
  m = where(isfinite(m), m, zeros_like(m));
  Tensor out = add(log(sum(exp(sub(xf, m)), dims, true)), m);
  if (!keepdim) {
    Shape kept;
    for (int64_t d = 0; d < xf.dim(); ++d)
      if (!std::binary_search(dims.begin(), dims.end(), d)) kept.push_back(xf.size(d));
    out = out.reshape(kept);
  }
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  WEFT_CHECK(lead >= 0, "[sum_to] cannot sum shape ", x.shape(), " to the larger shape ", shape);
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) dims.push_back(d);
    else if (shape[static_cast<size_t>(d - lead)] == 1 && x.size(d) != 1) dims.push_back(d);
    else
      WEFT_CHECK(shape[static_cast<size_t>(d - lead)] == x.size(d), "[sum_to] shape ", x.shape(),
                 " does not broadcast to ", shape);
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace weft
