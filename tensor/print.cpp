// Printing that reads like PyTorch's repr: `tensor([[ 1.5000, -2.0000], ...], dtype=float64)`.
//
// The rules are those of torch/_tensor_str.py (PyTorch 1.13), so a weft tensor prints as the same
// torch tensor would, except that dtypes have no `torch.` prefix:
// - One format for the whole tensor, chosen from the elements that are shown (all of them, or
//   the first and last 3 per dimension once there are more than 1000): floating values whose
//   nonzero finite magnitudes are all whole print as `1.`, others with 4 decimals; scientific
//   notation once max/min of those magnitudes exceeds 1000, the max exceeds 1e8, or (for
//   fractional values) the min is below 1e-4.
// - Columns are as wide as the widest nonzero finite value (every integer or bool value);
//   nan / inf print bare. Rows wrap at 80 characters.
// - The dtype is shown unless it is the default dtype, int64 or bool (always for empty tensors
//   other than of the default dtype).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "tensor/autograd.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 80;

enum class Kind { Floating, Integer, Bool };

struct Format {
  Kind kind;
  bool int_mode = true;  // floating values that are all whole: printed as "1."
  bool scientific = false;
  size_t width = 1;
};

// Values keep full precision: doubles for floating tensors, int64 for the rest.
struct Values {
  std::vector<double> floating;
  std::vector<int64_t> integer;
};

std::string format_value(const Values& v, int64_t i, const Format& f) {
  char buf[64];
  const auto k = static_cast<size_t>(i);
  if (f.kind == Kind::Bool) return v.integer[k] ? "True" : "False";
  if (f.kind == Kind::Integer) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.integer[k]));
    return buf;
  }
  const double x = v.floating[k];
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (f.scientific) std::snprintf(buf, sizeof buf, "%.4e", x);
  else if (f.int_mode) std::snprintf(buf, sizeof buf, "%.0f.", x);
  else std::snprintf(buf, sizeof buf, "%.4f", x);
  return buf;
}

std::string padded(const Values& v, int64_t i, const Format& f) {
  const std::string s = format_value(v, i, f);
  return std::string(f.width > s.size() ? f.width - s.size() : 0, ' ') + s;
}

// The flat (row-major) indices of the elements that are printed.
void shown_indices(const Shape& shape, const Shape& strides, size_t dim, int64_t offset, bool summarize,
                   std::vector<int64_t>& out) {
  if (dim == shape.size()) {
    out.push_back(offset);
    return;
  }
  const int64_t n = shape[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    shown_indices(shape, strides, dim + 1, offset + i * strides[dim], summarize, out);
  }
}

Format choose_format(const Values& v, Kind kind, const std::vector<int64_t>& shown) {
  Format f{kind};
  if (kind != Kind::Floating) {
    for (int64_t i : shown) f.width = std::max(f.width, format_value(v, i, f).size());
    return f;
  }
  double max_abs = 0, min_abs = INFINITY;
  bool any = false;
  for (int64_t i : shown) {
    const double x = v.floating[static_cast<size_t>(i)];
    if (!std::isfinite(x) || x == 0) continue;
    any = true;
    if (x != std::ceil(x)) f.int_mode = false;
    max_abs = std::max(max_abs, std::fabs(x));
    min_abs = std::min(min_abs, std::fabs(x));
  }
  if (!any) return f;
  f.scientific = max_abs / min_abs > 1000.0 || max_abs > 1.0e8 || (!f.int_mode && min_abs < 1.0e-4);
  for (int64_t i : shown) {
    const double x = v.floating[static_cast<size_t>(i)];
    if (std::isfinite(x) && x != 0) f.width = std::max(f.width, format_value(v, i, f).size());
  }
  return f;
}

// parts[first, last) joined by separator.
std::string joined(const std::vector<std::string>& parts, size_t first, size_t last, const std::string& separator) {
  std::string out;
  for (size_t i = first; i < last; ++i) {
    if (i > first) out += separator;
    out += parts[i];
  }
  return out;
}

std::string bracketed(const std::string& inner) {
  std::string out = "[";
  out += inner;
  out += ']';
  return out;
}

// What separates two rows: a comma, `newlines` line breaks, and the next row's indentation.
std::string row_break(size_t newlines, size_t indent) {
  std::string out = ",";
  out.append(newlines, '\n');
  out.append(indent, ' ');
  return out;
}

// The last dimension: elements separated by ", ", as many per line as fit in kLineWidth.
std::string vector_str(const Values& v, const Shape& shape, const Shape& strides, int64_t offset, size_t indent,
                       const Format& f, bool summarize) {
  const int64_t n = shape.back();
  std::vector<std::string> data;
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      data.push_back(" ...");
      i = n - kEdgeItems;
    }
    data.push_back(padded(v, offset + i * strides.back(), f));
  }
  const size_t per_line = std::max<size_t>(1, (kLineWidth - std::min(indent, kLineWidth)) / (f.width + 2));
  std::vector<std::string> lines;
  for (size_t i = 0; i < data.size(); i += per_line)
    lines.push_back(joined(data, i, std::min(i + per_line, data.size()), ", "));
  return bracketed(joined(lines, 0, lines.size(), row_break(1, indent + 1)));
}

std::string tensor_str(const Values& v, const Shape& shape, const Shape& strides, size_t dim, int64_t offset,
                       size_t indent, const Format& f, bool summarize) {
  if (dim + 1 == shape.size()) return vector_str(v, shape, strides, offset, indent, f, summarize);
  const int64_t n = shape[dim];
  std::vector<std::string> slices;
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      slices.push_back("...");
      i = n - kEdgeItems;
    }
    slices.push_back(tensor_str(v, shape, strides, dim + 1, offset + i * strides[dim], indent + 1, f, summarize));
  }
  return bracketed(joined(slices, 0, slices.size(), row_break(shape.size() - dim - 1, indent + 1)));
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  if (is_uninitialized()) return detail::cat("<uninitialized parameter, dtype=", dtype(), ", device=", device(), ">");
  const Kind kind = is_floating(dtype()) ? Kind::Floating : dtype() == DType::Bool ? Kind::Bool : Kind::Integer;
  Values values;
  {
    NoGradGuard no_grad;
    if (kind == Kind::Floating) values.floating = to_vector<double>();
    else values.integer = to_vector<int64_t>();
  }
  const Shape strides = detail::contiguous_strides(shape());
  const bool summarize = numel() > kSummarizeAbove;
  std::vector<int64_t> shown;
  if (numel() > 0) shown_indices(shape(), strides, 0, 0, summarize, shown);
  const Format f = choose_format(values, kind, shown);

  const bool default_dtype_shown = dtype() == default_dtype() || dtype() == DType::Int64 || dtype() == DType::Bool;
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back(detail::cat("device='", device(), "'"));
  std::string body;
  if (numel() == 0) {
    body = "[]";
    if (dim() != 1) suffixes.push_back(detail::cat("size=", shape()));
    if (dtype() != default_dtype()) suffixes.push_back(detail::cat("dtype=", dtype()));
  } else {
    body = dim() == 0 ? format_value(values, 0, f) : tensor_str(values, shape(), strides, 0, 0, 7, f, summarize);
    if (!default_dtype_shown) suffixes.push_back(detail::cat("dtype=", dtype()));
  }
  if (grad_fn()) suffixes.push_back("grad_fn=<" + grad_fn()->name() + ">");
  else if (requires_grad()) suffixes.push_back("requires_grad=True");
  std::string out = "tensor(" + body;
  for (const auto& s : suffixes) out += ", " + s;
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace weft
