// Internal helpers shared by the op front-ends: raw (never recorded) casts, expands and
// allocations, and device checks. Backward rules and kernels use these so that they never build
// graphs of their own.
#pragma once

#include <string>

#include "tensor/autograd.h"
#include "tensor/backend.h"
#include "tensor/tensor.h"

namespace weft::detail {

// t converted to dtype without recording autograd (t itself when already of that dtype).
inline Tensor raw_cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = make_tensor(t.shape(), dtype, t.device());
  backend(t.device()).copy(t, out);
  return out;
}

// A stride-0 broadcast view of t to `shape` (which must be broadcast-compatible).
inline Tensor raw_expand(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const int64_t nd = static_cast<int64_t>(shape.size()), td = t.dim();
  Shape strides(shape.size(), 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t d = nd - td + i;
    strides[d] = t.shape()[i] == 1 && shape[d] != 1 ? 0 : t.strides()[i];
  }
  return make_view(t, shape, strides, t.offset());
}

// A contiguous t seen as (outer, size(dim), inner), the geometry of the kernels that work along
// one dim; not recorded. A 0-d t is (1, 1, 1).
inline Tensor lines_view(const Tensor& t, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  const Shape shape{outer, t.dim() == 0 ? 1 : t.size(dim), inner};
  return make_view(t, shape, contiguous_strides(shape), t.offset());
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  WEFT_CHECK(a.device() == b.device(), "[", op, "] expected both tensors on the same device, got ",
             a.device(), " and ", b.device());
}

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  WEFT_CHECK(t.defined(), "[", op, "] the ", what, " tensor is undefined");
}

}  // namespace weft::detail
