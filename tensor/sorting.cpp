// sort, argsort and topk. The front-ends check and shape; the kernels (tensor/selection_kernels.h)
// only find positions, in the order of Note [Order of values]; the values are then gathered from
// the input with gather(), whose backward scatters the values' gradient back to the positions
// they came from. The int64 positions are not differentiable.
//
// PyTorch semantics: NaN sorts above every number (last ascending, first descending); a 0-d input
// is one element, at position 0 (dim must be 0 or -1). The CPU sort is always stable, so `stable`
// changes nothing; topk's ties go to the lower position and topk(sorted=false) returns its
// elements in increasing position (PyTorch leaves both unspecified). Every dtype sorts, float8
// too (PyTorch has no float8 sort); topk refuses bool, as PyTorch does.
#include "tensor/op_helpers.h"
#include "tensor/ops.h"
#include "tensor/selection_kernels.h"

namespace weft {

namespace detail {

KernelRegistry<SortKernel>& sort_kernels() {
  static KernelRegistry<SortKernel> registry("sort", &cpu_sort, nullptr);
  return registry;
}

KernelRegistry<TopkKernel>& topk_kernels() {
  static KernelRegistry<TopkKernel> registry("topk", &cpu_topk, nullptr);
  return registry;
}

}  // namespace detail

namespace {

// The int64 positions that sort x along dim.
Tensor sort_indices(const Tensor& x, int64_t dim, bool descending) {
  auto& kernel = detail::sort_kernels().at(x.device());
  Tensor indices = detail::make_tensor(x.shape(), kInt64, x.device());
  if (x.numel() > 0)
    kernel({detail::lines_view(x.detach().contiguous(), dim), detail::lines_view(indices, dim), descending});
  return indices;
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim_in, bool descending, bool /*stable: always*/) {
  detail::check_defined(x, "sort");
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), "sort");
  Tensor indices = sort_indices(x, dim, descending);
  return {gather(x, dim, indices), indices};
}

Tensor argsort(const Tensor& x, int64_t dim_in, bool descending, bool /*stable: always*/) {
  detail::check_defined(x, "argsort");
  return sort_indices(x, detail::wrap_dim(dim_in, x.dim(), "argsort"), descending);
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim_in, bool largest, bool sorted) {
  detail::check_defined(x, "topk");
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), "topk");
  WEFT_CHECK(x.dtype() != kBool, "[topk] is not implemented for bool tensors, as in PyTorch; convert with .to(dtype)");
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  WEFT_CHECK(k >= 0 && k <= n, "[topk] selected index k out of range: k = ", k, " for dimension ", dim_in,
             " of size ", n);
  auto& kernel = detail::topk_kernels().at(x.device());
  // A 0-d input has its one element whatever k (0 or 1) is, as PyTorch.
  Shape shape = x.shape();
  if (x.dim() > 0) shape[static_cast<size_t>(dim)] = k;
  Tensor indices = detail::make_tensor(shape, kInt64, x.device());
  if (indices.numel() > 0)
    kernel({detail::lines_view(x.detach().contiguous(), dim), detail::lines_view(indices, dim), largest, sorted});
  return {gather(x, dim, indices), indices};
}

}  // namespace weft
