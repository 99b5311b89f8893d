// Printing that reads like PyTorch's: `tensor([[ 1.5000, -2.0000], ...], dtype=float64)`.
// Floating values share one format chosen from the whole tensor (fixed with 4 decimals, or
// scientific when magnitudes span too much); large tensors show their first and last 3 entries
// per dimension.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "tensor/autograd.h"
#include "tensor/ops.h"

namespace weft {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Format {
  bool floating;
  bool integral_values;  // floating tensor whose values are all whole: printed as "1."
  bool scientific;
  size_t width;
};

std::string format_value(double v, const Format& f) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (!f.floating) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else if (f.scientific) std::snprintf(buf, sizeof buf, "%.4e", v);
  else if (f.integral_values) std::snprintf(buf, sizeof buf, "%.0f.", v);
  else std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

Format choose_format(const std::vector<double>& values, DType dtype) {
  Format f{is_floating(dtype), true, false, 1};
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::trunc(v)) f.integral_values = false;
    max_abs = std::max(max_abs, std::fabs(v));
    if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
  }
  if (f.floating && (max_abs >= 1e8 || (!f.integral_values && (min_abs < 1e-4 || max_abs / min_abs > 1000))))
    f.scientific = true;
  for (double v : values) f.width = std::max(f.width, format_value(v, f).size());
  return f;
}

void print_dim(std::ostream& os, const std::vector<double>& values, const Shape& shape, const Shape& strides,
               size_t dim, int64_t offset, const Format& f, bool summarize, int indent) {
  if (shape.empty()) {
    os << format_value(values[static_cast<size_t>(offset)], f);
    return;
  }
  const int64_t n = shape[dim];
  const bool last = dim + 1 == shape.size();
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (last ? "..., " : "...,\n" + std::string(static_cast<size_t>(indent + 1), ' '));
      i = n - kEdgeItems;
    }
    if (last) {
      std::string s = format_value(values[static_cast<size_t>(offset + i * strides[dim])], f);
      os << std::string(f.width - s.size(), ' ') << s;
    } else {
      print_dim(os, values, shape, strides, dim + 1, offset + i * strides[dim], f, summarize, indent + 1);
    }
    if (i + 1 < n) os << (last ? ", " : ",\n" + std::string(shape.size() - dim - 1 > 1 ? 1 : 0, '\n') +
                                         std::string(static_cast<size_t>(indent + 1), ' '));
  }
  os << ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  if (is_uninitialized()) return detail::cat("<uninitialized parameter, dtype=", dtype(), ", device=", device(), ">");
  std::vector<double> values;
  {
    NoGradGuard no_grad;
    values = to_vector<double>();
  }
  const Shape strides = detail::contiguous_strides(shape());
  const Format f = choose_format(values, dtype());
  std::ostringstream os;
  os << "tensor(";
  if (numel() == 0) os << "[]";
  else print_dim(os, values, shape(), strides, 0, 0, f, numel() > kSummarizeAbove, 7);
  if (numel() == 0 && dim() != 1) os << ", size=" << detail::cat(shape());
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool) os << ", dtype=" << dtype();
  if (!device().is_cpu()) os << ", device='" << device() << "'";
  if (grad_fn()) os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad()) os << ", requires_grad=True";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace weft
