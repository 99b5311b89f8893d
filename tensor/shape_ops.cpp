// View ops (no copy: a new TensorImpl over the same storage) and the ops that join, split and
// index tensors. A view's backward rule scatters the gradient back into the input's geometry;
// expand needs none because the engine sums broadcast gradients (Note [Gradient shape and dtype]).
#include <numeric>

#include "tensor/autograd_region.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;

namespace {

Shape infer_size(Shape shape, int64_t numel, const Shape& from, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      WEFT_CHECK(infer < 0, "[", op, "] only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      WEFT_CHECK(shape[i] >= 0, "[", op, "] invalid size ", shape[i], " in ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    WEFT_CHECK(known != 0 && numel % known == 0, "[", op, "] shape ", shape, " is invalid for input of shape ", from);
    shape[static_cast<size_t>(infer)] = numel / known;
  }
  WEFT_CHECK(detail::shape_numel(shape) == numel, "[", op, "] shape ", shape, " is invalid for input of shape ", from,
             " (", numel, " elements)");
  return shape;
}

// Strides that let `shape` view memory laid out as (old_shape, old_strides), if any exist.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape) {
  if (old_shape.empty() || detail::shape_numel(shape) == 0) return detail::contiguous_strides(shape);
  Shape strides(shape.size(), 1);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[static_cast<size_t>(d)];
    const bool chunk_ends = d == 0 || (old_shape[static_cast<size_t>(d - 1)] != 1 &&
                                       old_strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[static_cast<size_t>(view_d)] == 1)) {
      strides[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
      view_numel *= shape[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[static_cast<size_t>(d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

void record_reshape_view(const char* name, Tensor& out, const Tensor& x) {
  if (!autograd::needs_grad({&x})) return;
  autograd::record(name, out, {x}, [shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(shape)};
  });
}

// A contiguous tensor seen as (outer, size(dim), inner), the geometry indexing kernels use.
Tensor as_3d(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return t.reshape({1, 1, 1});
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  return t.reshape({outer, t.size(dim), inner});
}

Tensor index_as_int64(const Tensor& index, const char* op) {
  detail::check_defined(index, op, "index");
  WEFT_CHECK(is_integral(index.dtype()), "[", op, "] expected an integer index tensor, got ", index.dtype());
  return detail::raw_cast(index, DType::Int64);
}

}  // namespace

Tensor Tensor::view(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), this->shape(), "view");
  auto strides = view_strides(this->shape(), this->strides(), shape);
  WEFT_CHECK(strides.has_value(), "[view] shape ", shape, " is not compatible with the input's size ", this->shape(),
             " and strides ", this->strides(), "; use reshape() (which copies when needed)");
  Tensor out = detail::make_view(*this, shape, *strides, offset());
  record_reshape_view("View", out, *this);
  return out;
}

// As PyTorch's view(dtype): the result is never differentiable (it does not require grad, even
// for the same dtype) and shares storage, so writes go through. With a different item size the
// last dim must have stride 1; it grows or shrinks by the ratio of the sizes, the other strides
// and the offset scale with it, and each must divide evenly when the new items are larger.
Tensor Tensor::view(DType dtype) const {
  Tensor out = detail::make_view(*this, shape(), strides(), offset());
  out.impl()->dtype = dtype;
  const auto from = static_cast<int64_t>(itemsize(this->dtype())), to = static_cast<int64_t>(itemsize(dtype));
  if (from == to) return out;
  const auto what = [&] { return detail::cat(" to view ", this->dtype(), " as ", dtype, " (different element sizes)"); };
  WEFT_CHECK(dim() > 0, "[view] self.dim() cannot be 0", what());
  WEFT_CHECK(stride(-1) == 1, "[view] self.stride(-1) must be 1", what(), ", but got ", stride(-1));
  Shape& sizes = out.impl()->shape;
  Shape& steps = out.impl()->strides;
  if (from > to) {
    const int64_t ratio = from / to;
    sizes.back() *= ratio;
    for (size_t d = 0; d + 1 < steps.size(); ++d) steps[d] *= ratio;
    out.impl()->offset *= ratio;
    return out;
  }
  const int64_t ratio = to / from;
  WEFT_CHECK(size(-1) % ratio == 0, "[view] self.size(-1) must be divisible by ", ratio, what(), ", but got ", size(-1));
  WEFT_CHECK(offset() % ratio == 0, "[view] self.storage_offset() must be divisible by ", ratio, what(), ", but got ",
             offset());
  for (size_t d = 0; d + 1 < steps.size(); ++d) {
    WEFT_CHECK(steps[d] % ratio == 0, "[view] self.stride(", d, ") must be divisible by ", ratio, what(), ", but got ",
               steps[d]);
    steps[d] /= ratio;
  }
  sizes.back() /= ratio;
  out.impl()->offset /= ratio;
  return out;
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), this->shape(), "reshape");
  if (view_strides(this->shape(), this->strides(), shape)) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const int64_t nd = dim();
  if (nd == 0) return *this;
  d0 = detail::wrap_dim(d0, nd, "transpose");
  d1 = detail::wrap_dim(d1, nd, "transpose");
  Shape shape = this->shape(), strides = this->strides();
  std::swap(shape[static_cast<size_t>(d0)], shape[static_cast<size_t>(d1)]);
  std::swap(strides[static_cast<size_t>(d0)], strides[static_cast<size_t>(d1)]);
  Tensor out = detail::make_view(*this, shape, strides, offset());
  if (autograd::needs_grad({this})) {
    autograd::record("Transpose", out, {*this}, [d0, d1](const Tensor& g) {
      return std::vector<Tensor>{g.transpose(d0, d1)};
    });
  }
  return out;
}

Tensor Tensor::t() const {
  WEFT_CHECK(dim() <= 2, "[t] expected a tensor with at most 2 dimensions, got shape ", shape());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(Shape dims) const {
  const int64_t nd = dim();
  WEFT_CHECK(static_cast<int64_t>(dims.size()) == nd, "[permute] expected ", nd, " dims, got ", dims);
  Shape shape(dims.size()), strides(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = detail::wrap_dim(dims[i], nd, "permute");
    WEFT_CHECK(!seen[static_cast<size_t>(d)], "[permute] repeated dim in ", dims);
    seen[static_cast<size_t>(d)] = true;
    shape[i] = this->shape()[static_cast<size_t>(d)];
    strides[i] = this->strides()[static_cast<size_t>(d)];
    inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
  }
  Tensor out = detail::make_view(*this, shape, strides, offset());
  if (autograd::needs_grad({this})) {
    autograd::record("Permute", out, {*this}, [inverse](const Tensor& g) {
      return std::vector<Tensor>{g.permute(inverse)};
    });
  }
  return out;
}

Tensor Tensor::slice(int64_t dim_in, int64_t start, int64_t end, int64_t step) const {
  const int64_t d = detail::wrap_dim(dim_in, dim(), "slice");
  WEFT_CHECK(step > 0, "[slice] step must be positive, got ", step);
  const int64_t n = size(d);
  // Python slice rules: negative counts from the end, out-of-range bounds clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = this->shape(), strides = this->strides();
  shape[static_cast<size_t>(d)] = (end - start + step - 1) / step;
  strides[static_cast<size_t>(d)] *= step;
  Tensor out = detail::make_view(*this, shape, strides, offset() + start * stride(d));
  autograd::record_region_view("Slice", out, *this, [d, start, end, step](const Tensor& t) { return t.slice(d, start, end, step); });
  return out;
}

Tensor Tensor::narrow(int64_t dim_in, int64_t start, int64_t length) const {
  const int64_t d = detail::wrap_dim(dim_in, dim(), "narrow");
  if (start < 0) start += size(d);
  WEFT_CHECK(start >= 0 && length >= 0 && start + length <= size(d), "[narrow] start ", start, " and length ",
             length, " are out of range for dimension ", d, " of size ", size(d));
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t dim_in, int64_t index) const {
  const int64_t d = detail::wrap_dim(dim_in, dim(), "select");
  const int64_t n = size(d);
  WEFT_CHECK(index >= -n && index < n, "[select] index ", index, " is out of range for dimension ", d, " of size ", n);
  if (index < 0) index += n;
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = detail::make_view(*this, shape, strides, offset() + index * stride(d));
  autograd::record_region_view("Select", out, *this, [d, index](const Tensor& t) { return t.select(d, index); });
  return out;
}

Tensor Tensor::unsqueeze(int64_t dim_in) const {
  const int64_t nd = dim();
  WEFT_CHECK(dim_in >= -nd - 1 && dim_in <= nd, "[unsqueeze] dimension out of range: expected in [", -nd - 1, ", ",
             nd, "], got ", dim_in);
  const int64_t d = dim_in < 0 ? dim_in + nd + 1 : dim_in;
  Shape shape = this->shape(), strides = this->strides();
  const int64_t stride = d < nd ? shape[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Tensor out = detail::make_view(*this, shape, strides, offset());
  record_reshape_view("Unsqueeze", out, *this);
  return out;
}

Tensor Tensor::squeeze() const {
  Shape shape, strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (size(d) == 1) continue;
    shape.push_back(size(d));
    strides.push_back(stride(d));
  }
  Tensor out = detail::make_view(*this, shape, strides, offset());
  record_reshape_view("Squeeze", out, *this);
  return out;
}

Tensor Tensor::squeeze(int64_t dim_in) const {
  if (dim() == 0) return *this;
  const int64_t d = detail::wrap_dim(dim_in, dim(), "squeeze");
  if (size(d) != 1) return *this;
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = detail::make_view(*this, shape, strides, offset());
  record_reshape_view("Squeeze", out, *this);
  return out;
}

Tensor Tensor::expand(Shape shape) const {
  const int64_t nd = static_cast<int64_t>(shape.size()), td = dim();
  WEFT_CHECK(nd >= td, "[expand] cannot expand shape ", this->shape(), " to fewer dimensions ", shape);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t j = i - (nd - td);
    if (shape[static_cast<size_t>(i)] == -1) {
      WEFT_CHECK(j >= 0, "[expand] -1 is not allowed in a new leading dimension: ", shape);
      shape[static_cast<size_t>(i)] = size(j);
    }
    WEFT_CHECK(j < 0 || size(j) == 1 || size(j) == shape[static_cast<size_t>(i)], "[expand] the size ", size(j),
               " of dimension ", j, " must match ", shape[static_cast<size_t>(i)], " or be 1: cannot expand ",
               this->shape(), " to ", shape);
  }
  if (shape == this->shape()) return *this;
  Tensor out = detail::raw_expand(*this, shape);
  if (autograd::needs_grad({this})) {
    autograd::record("Expand", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  }
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = detail::wrap_dim(start_dim, dim(), "flatten");
  const int64_t e = detail::wrap_dim(end_dim, dim(), "flatten");
  WEFT_CHECK(s <= e, "[flatten] start_dim ", s, " comes after end_dim ", e);
  Shape shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(size(d));
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= size(d);
  shape.push_back(merged);
  for (int64_t d = e + 1; d < dim(); ++d) shape.push_back(size(d));
  return reshape(shape);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim_in) {
  WEFT_CHECK(!tensors.empty(), "[cat] expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  const int64_t d = detail::wrap_dim(dim_in, first.dim(), "cat");
  DType dtype = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_defined(t, "cat");
    detail::check_same_device(first, t, "cat");
    WEFT_CHECK(t.dim() == first.dim(), "[cat] tensor ", i, " has ", t.dim(), " dims, expected ", first.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      WEFT_CHECK(k == d || t.size(k) == first.size(k), "[cat] sizes must match except in dimension ", d,
                 ": tensor 0 has shape ", first.shape(), ", tensor ", i, " has shape ", t.shape());
    dtype = promote_types(dtype, t.dtype());
    total += t.size(d);
  }
  Shape shape = first.shape();
  shape[static_cast<size_t>(d)] = total;
  Tensor out = detail::make_tensor(shape, dtype, first.device());
  std::vector<int64_t> sizes;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    Tensor region = out.detach().narrow(d, offset, t.size(d));
    detail::backend(out.device()).copy(detail::raw_cast(t, dtype), region);
    sizes.push_back(t.size(d));
    offset += t.size(d);
  }
  if (autograd::needs_grad(tensors)) {
    autograd::record("Cat", out, tensors, [sizes, d](const Tensor& g) { return split(g, sizes, d); });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  WEFT_CHECK(!tensors.empty(), "[stack] expected a non-empty list of tensors");
  const int64_t nd = tensors[0].dim();
  WEFT_CHECK(dim >= -nd - 1 && dim <= nd, "[stack] dimension out of range: expected in [", -nd - 1, ", ", nd,
             "], got ", dim);
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    WEFT_CHECK(tensors[i].shape() == tensors[0].shape(), "[stack] expects tensors of equal shape: tensor 0 has ",
               tensors[0].shape(), ", tensor ", i, " has ", tensors[i].shape());
    expanded.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(expanded, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim_in) {
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "split");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  WEFT_CHECK(total == x.size(d), "[split] sizes ", Shape(sizes), " sum to ", total, " but dimension ", d,
             " has size ", x.size(d));
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    WEFT_CHECK(s >= 0, "[split] sizes must be non-negative, got ", Shape(sizes));
    parts.push_back(x.narrow(d, offset, s));
    offset += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim_in) {
  WEFT_CHECK(split_size > 0, "[split] split_size must be positive, got ", split_size);
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t left = x.size(d); left > 0; left -= split_size) sizes.push_back(std::min(left, split_size));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim_in) {
  WEFT_CHECK(chunks > 0, "[chunk] chunks must be positive, got ", chunks);
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "chunk");
  const int64_t n = x.size(d);
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), d);
}

Tensor index_select(const Tensor& x, int64_t dim_in, const Tensor& index_in) {
  detail::check_defined(x, "index_select");
  const Tensor index = index_as_int64(index_in, "index_select");
  WEFT_CHECK(index.dim() <= 1, "[index_select] expected a 1-D index, got shape ", index.shape());
  detail::check_same_device(x, index, "index_select");
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "index_select");
  Shape shape = x.shape();
  if (x.dim() > 0) shape[static_cast<size_t>(d)] = index.numel();
  Tensor out = detail::make_tensor(shape, x.dtype(), x.device());
  detail::backend(x.device()).index_select(as_3d(x.detach().contiguous(), d), index.contiguous(), as_3d(out.detach(), d));
  // Scattered straight into the zeros or a waiting gradient (tensor/autograd_region.h): index_add
  // would copy them first (an embedding's whole table, 154 MB for GPT-2's, once per step).
  autograd::record_scatter("IndexSelect", out, x, [d, index](const Tensor& g, Tensor& input_grad) {
    detail::backend(g.device()).index_add(as_3d(input_grad, d), index.contiguous(), as_3d(g.contiguous(), d));
  });
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim_in, const Tensor& index_in, const Tensor& src) {
  detail::check_defined(x, "index_add");
  detail::check_defined(src, "index_add", "source");
  const Tensor index = index_as_int64(index_in, "index_add");
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "index_add");
  Shape expected = x.shape();
  if (x.dim() > 0) expected[static_cast<size_t>(d)] = index.numel();
  WEFT_CHECK(src.shape() == expected, "[index_add] expected a source of shape ", expected, ", got ", src.shape());
  Tensor out = x.detach().clone();
  detail::backend(x.device()).index_add(as_3d(out, d), index.contiguous(), as_3d(detail::raw_cast(src.detach(), x.dtype()).contiguous(), d));
  if (autograd::needs_grad({&x, &src})) {
    autograd::record("IndexAdd", out, {x, src}, [d, index](const Tensor& g) {
      return std::vector<Tensor>{g, index_select(g, d, index)};
    });
  }
  return out;
}

namespace {

// Gather and scatter_add index positions of x with an index tensor of the same rank whose sizes
// may be smaller outside `dim`; x is narrowed to the index's extent there.
Tensor narrowed_to_index(const Tensor& x, const Tensor& index, int64_t d, const char* op) {
  WEFT_CHECK(index.dim() == x.dim(), "[", op, "] index must have as many dims as the input: ", index.shape(),
             " vs ", x.shape());
  Tensor v = x;
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k == d) continue;
    WEFT_CHECK(index.size(k) <= x.size(k), "[", op, "] index shape ", index.shape(), " exceeds input shape ",
               x.shape(), " in dimension ", k);
    v = v.narrow(k, 0, index.size(k));
  }
  return v;
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim_in, const Tensor& index_in) {
  detail::check_defined(x, "gather");
  const Tensor index = index_as_int64(index_in, "gather");
  detail::check_same_device(x, index, "gather");
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "gather");
  const Tensor source = narrowed_to_index(x.detach(), index, d, "gather").contiguous();
  Tensor out = detail::make_tensor(index.shape(), x.dtype(), x.device());
  detail::backend(x.device()).gather(as_3d(source, d), as_3d(index.contiguous(), d), as_3d(out.detach(), d));
  if (autograd::needs_grad({&x})) {
    autograd::record("Gather", out, {x}, [shape = x.shape(), d, index](const Tensor& g) {
      return std::vector<Tensor>{scatter_add(zeros(shape, TensorOptions(g.dtype()).device(g.device())), d, index, g)};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim_in, const Tensor& index_in, const Tensor& src) {
  detail::check_defined(x, "scatter_add");
  detail::check_defined(src, "scatter_add", "source");
  const Tensor index = index_as_int64(index_in, "scatter_add");
  const int64_t d = detail::wrap_dim(dim_in, x.dim(), "scatter_add");
  WEFT_CHECK(src.shape() == index.shape(), "[scatter_add] expected a source of the index's shape ", index.shape(),
             ", got ", src.shape());
  Tensor out = x.detach().clone();
  // Writes go through a narrowed view when the index is smaller than x outside dim.
  Tensor region = narrowed_to_index(out, index, d, "scatter_add");
  Tensor staging = region.contiguous();
  detail::backend(x.device()).scatter_add(as_3d(staging, d), as_3d(index.contiguous(), d),
                                          as_3d(detail::raw_cast(src.detach(), x.dtype()).contiguous(), d));
  if (!staging.is_same(region)) detail::backend(x.device()).copy(staging, region);
  if (autograd::needs_grad({&x, &src})) {
    autograd::record("ScatterAdd", out, {x, src}, [d, index](const Tensor& g) {
      return std::vector<Tensor>{g, gather(g, d, index)};
    });
  }
  return out;
}

}  // namespace weft
