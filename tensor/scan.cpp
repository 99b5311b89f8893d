// cumsum, tril and triu.
//
// cumsum converts its input to the result dtype first (the given one, else the input's floating
// dtype, else int64, as PyTorch), then runs the scan kernel (tensor/scan_kernels.h). Its backward
// is the reverse running sum of the gradient, the same kernel run from the other end, recorded in
// turn so that it has a gradient of its own.
//
// tril and triu are masked_fill with the triangle's complement, a (rows, cols) mask built from two
// aranges on the input's device; the gradient comes from masked_fill (the same mask on the
// gradient), and they run wherever masked_fill does.
#include "tensor/op_helpers.h"
#include "tensor/ops.h"
#include "tensor/scan_kernels.h"

namespace weft {

namespace detail {

KernelRegistry<CumsumKernel>& cumsum_kernels() {
  static KernelRegistry<CumsumKernel> registry("cumsum", &cpu_cumsum, nullptr);
  return registry;
}

}  // namespace detail

namespace {

// The running sum of x along dim (from the end when `reverse`), in x's dtype.
Tensor scan(const Tensor& x, int64_t dim, bool reverse) {
  auto& kernel = detail::cumsum_kernels().at(x.device());
  Tensor out = detail::make_tensor(x.shape(), x.dtype(), x.device());
  kernel({detail::lines_view(x.detach().contiguous(), dim), detail::lines_view(out, dim), reverse});
  if (autograd::needs_grad({&x})) {
    autograd::record(reverse ? "ReverseCumsum" : "Cumsum", out, {x}, [dim, reverse](const Tensor& g) {
      return std::vector<Tensor>{scan(g, dim, !reverse)};
    });
  }
  return out;
}

Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  detail::check_defined(x, op);
  WEFT_CHECK(x.dim() >= 2, "[", op, "] expected an input with at least 2 dimensions, got shape ", x.shape());
  const TensorOptions positions = TensorOptions(kInt64).device(x.device());
  // offset[i, j] = j − i: 0 on the main diagonal, > 0 above it.
  const Tensor offset = sub(arange(static_cast<double>(x.size(-1)), positions).unsqueeze(0),
                            arange(static_cast<double>(x.size(-2)), positions).unsqueeze(1));
  const auto edge = static_cast<double>(diagonal);
  return masked_fill(x, lower ? gt(offset, edge) : lt(offset, edge), 0.0);
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim_in, std::optional<DType> dtype) {
  detail::check_defined(x, "cumsum");
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), "cumsum");
  const DType out_dtype = dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : kInt64);
  WEFT_CHECK(out_dtype != kBool, "[cumsum] cannot sum into a bool result, as PyTorch cannot; leave dtype unset for int64");
  // A floating conversion is recorded (its gradient converts back); an integer result has none.
  return scan(is_floating(out_dtype) ? x.to(out_dtype) : detail::raw_cast(x.detach(), out_dtype), dim, false);
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace weft
