// Elementwise op front-ends: broadcasting, type promotion, and each op's backward rule beside
// its forward. In-place variants compute out of place and write the result back (see
// write_in_place), which keeps every rule in one spot. Under autocast exp, log and pow run in
// float32 (tensor/autocast_state.h); the other ops keep their ordinary promotion.
#include <cmath>
#include <limits>

#include "tensor/autocast_state.h"
#include "tensor/fused_kernels.h"
#include "tensor/init_context.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

using autograd::SavedTensor;
using detail::BinaryOp;
using detail::UnaryOp;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    WEFT_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes cannot be broadcast together: ", a,
               " and ", b);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// The dtype a double takes next to tensor t (PyTorch's "wrapped number" rule): it never widens a
// floating tensor; a fractional value next to an integer tensor gives the default float dtype.
DType scalar_dtype(double v, const Tensor& t) {
  const DType d = t.dtype();
  if (is_floating(d)) return d;
  if (v != std::trunc(v) || !std::isfinite(v)) return default_dtype();
  if (d == DType::Bool && v != 0.0 && v != 1.0) return DType::Int64;
  return d;
}

Tensor scalar_like(double v, const Tensor& t) {
  Tensor s = detail::make_tensor({}, scalar_dtype(v, t), t.device());
  detail::backend(t.device()).fill(s, v);
  return s;
}

// Runs a binary kernel: broadcast, cast both inputs to `compute`, write `out_dtype`.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype,
                     const char* name) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = detail::make_tensor(shape, out_dtype, a.device());
  detail::backend(a.device())
      .binary(op, detail::raw_expand(detail::raw_cast(a, compute), shape),
              detail::raw_expand(detail::raw_cast(b, compute), shape), out);
  return out;
}

Tensor unary_kernel(UnaryOp op, const Tensor& x, DType out_dtype, double p0 = 0, double p1 = 0) {
  Tensor out = detail::make_tensor(x.shape(), out_dtype, x.device());
  detail::backend(x.device()).unary(op, x, out, p0, p1);
  return out;
}

// The dtype a binary op computes in; checks first that both inputs exist, naming the op.
// PyTorch's result_type: a 0-d tensor next to a tensor with dims only decides the dtype when it is
// of a higher category (bool < integer < floating), so `x_f16 * scale_f32_0d` stays float16.
DType combine_categories(DType higher, DType lower) {
  if (is_floating(higher)) return higher;
  if (higher == DType::Bool || is_floating(lower)) return promote_types(higher, lower);
  return higher;
}

DType promoted(const Tensor& a, const Tensor& b, const char* name) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  const bool a_scalar = a.dim() == 0, b_scalar = b.dim() == 0;
  if (a_scalar == b_scalar) return promote_types(a.dtype(), b.dtype());
  return a_scalar ? combine_categories(b.dtype(), a.dtype()) : combine_categories(a.dtype(), b.dtype());
}

// Integer inputs of ops that only make sense on reals (exp, sqrt, true division) compute in the
// default floating dtype, as PyTorch does.
Tensor as_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(default_dtype()); }

// The dtype a true division computes in: integers divide as the default floating dtype.
DType division_dtype(const Tensor& a, const Tensor& b) {
  const DType d = promoted(a, b, "div");
  return is_floating(d) ? d : default_dtype();
}

// A floating unary op whose backward is `rule(grad, saved input, saved output)`. Errors name
// `user_op`, the function called; `name` is the autograd node's.
template <class Rule>
Tensor floating_unary(UnaryOp op, const Tensor& x_in, const char* user_op, const char* name, Rule rule,
                      double p0 = 0, double p1 = 0) {
  detail::check_defined(x_in, user_op);
  const Tensor x = as_floating(x_in);
  Tensor out = unary_kernel(op, x, x.dtype(), p0, p1);
  if (autograd::needs_grad({&x})) {
    autograd::record(name, out, {x}, [sx = SavedTensor(x), so = SavedTensor(out), rule](const Tensor& g) {
      return std::vector<Tensor>{rule(g, sx.unpack(), so.unpack())};
    });
  }
  return out;
}

// A fused backward kernel: grad_input = op(grad, saved).
Tensor fused_backward(BinaryOp op, const Tensor& g, const Tensor& saved) {
  const DType d = promote_types(g.dtype(), saved.dtype());
  return binary_kernel(op, g, saved, d, d, "backward");
}

Tensor compare(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  return binary_kernel(op, a, b, promoted(a, b, name), DType::Bool, name);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  const DType d = promoted(a, b, "add");
  Tensor out = alpha == 1.0 ? binary_kernel(BinaryOp::Add, a, b, d, d, "add")
                            : binary_kernel(BinaryOp::Add, a, mul(b.detach(), alpha), d, d, "add");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Add", out, {a, b}, [alpha](const Tensor& g) {
      return std::vector<Tensor>{g, alpha == 1.0 ? g : mul(g, alpha)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  const DType d = promoted(a, b, "sub");
  WEFT_CHECK(a.dtype() != DType::Bool || b.dtype() != DType::Bool,
             "[sub] subtraction of two bool tensors is not supported; use logical_not or ne");
  Tensor out = alpha == 1.0 ? binary_kernel(BinaryOp::Sub, a, b, d, d, "sub")
                            : binary_kernel(BinaryOp::Sub, a, mul(b.detach(), alpha), d, d, "sub");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Sub", out, {a, b}, [alpha](const Tensor& g) {
      return std::vector<Tensor>{g, mul(g, -alpha)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType d = promoted(a, b, "mul");
  Tensor out = binary_kernel(BinaryOp::Mul, a, b, d, d, "mul");
  if (autograd::needs_grad({&a, &b})) {
    // Each side is saved only when the other side's gradient needs it, so y.mul_(c) by a
    // constant does not invalidate its own backward by overwriting y.
    const bool grad_a = a.requires_grad(), grad_b = b.requires_grad();
    autograd::record("Mul", out, {a, b},
                     [sa = grad_b ? SavedTensor(a) : SavedTensor(), sb = grad_a ? SavedTensor(b) : SavedTensor()](
                         const Tensor& g) {
                       return std::vector<Tensor>{sb.defined() ? mul(g, sb.unpack()) : Tensor(),
                                                  sa.defined() ? mul(g, sa.unpack()) : Tensor()};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  const DType d = division_dtype(a, b);
  Tensor out = binary_kernel(BinaryOp::Div, a, b, d, d, "div");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Div", out, {a, b}, [sb = SavedTensor(b), so = SavedTensor(out)](const Tensor& g) {
      const Tensor& bv = sb.unpack();
      return std::vector<Tensor>{div(g, bv), neg(div(mul(g, so.unpack()), bv))};
    });
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Tensor& e_in) {
  const auto [a, e] = autocast_inputs(AutocastOp::Pow, {a_in, e_in});
  DType d = promoted(a, e, "pow");
  if (!is_floating(d)) d = default_dtype();
  Tensor out = binary_kernel(BinaryOp::Pow, a, e, d, d, "pow");
  if (autograd::needs_grad({&a, &e})) {
    autograd::record("Pow", out, {a, e},
                     [sa = SavedTensor(a), se = SavedTensor(e), so = SavedTensor(out)](const Tensor& g) {
                       const Tensor& av = sa.unpack();
                       const Tensor& ev = se.unpack();
                       const Tensor ga = mul(g, mul(ev, pow(av, sub(ev, 1.0))));
                       // d/de a^e = a^e·log a, taken as 0 where a == 0 (the limit for e > 0).
                       const Tensor ge = where(eq(av, 0.0), zeros_like(g), mul(g, mul(so.unpack(), log(av))));
                       return std::vector<Tensor>{ga, ge};
                     });
  }
  return out;
}

Tensor pow(const Tensor& a_in, double exponent) {
  const auto [a] = autocast_inputs(AutocastOp::Pow, {a_in});
  return floating_unary(UnaryOp::PowScalar, a, "pow", "Pow",
                        [exponent](const Tensor& g, const Tensor& x, const Tensor&) {
                          if (exponent == 0.0) return zeros_like(g);
                          return mul(g, mul(pow(x, exponent - 1.0), exponent));
                        },
                        exponent);
}

namespace {
// Where the two inputs tie, each gets half the gradient (as PyTorch).
Tensor extremum(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  const DType d = promoted(a, b, name);
  Tensor out = binary_kernel(op, a, b, d, d, name);
  if (autograd::needs_grad({&a, &b})) {
    const bool is_max = op == BinaryOp::Maximum;
    autograd::record(name, out, {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b), is_max](const Tensor& g) {
      const Tensor& av = sa.unpack();
      const Tensor& bv = sb.unpack();
      const Tensor a_wins = is_max ? gt(av, bv) : lt(av, bv);
      const Tensor share = where(a_wins, ones_like(g), where(eq(av, bv), full_like(g, 0.5), zeros_like(g)));
      return std::vector<Tensor>{mul(g, share), mul(g, rsub(share, 1.0))};
    });
  }
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::Maximum, a, b, "Maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::Minimum, a, b, "Minimum"); }

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor rsub(const Tensor& a, double b) { return sub(scalar_like(b, a), a); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor rdiv(const Tensor& a, double b) { return div(scalar_like(b, a), a); }

Tensor neg(const Tensor& x) {
  detail::check_defined(x, "neg");
  WEFT_CHECK(x.dtype() != DType::Bool, "[neg] negation of a bool tensor is not supported; use logical_not");
  Tensor out = unary_kernel(UnaryOp::Neg, x, x.dtype());
  if (autograd::needs_grad({&x})) {
    autograd::record("Neg", out, {x}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
  }
  return out;
}

Tensor abs(const Tensor& x) {
  detail::check_defined(x, "abs");
  Tensor out = unary_kernel(UnaryOp::Abs, x, x.dtype());
  if (autograd::needs_grad({&x})) {
    autograd::record("Abs", out, {x}, [sx = SavedTensor(x)](const Tensor& g) {
      return std::vector<Tensor>{mul(g, sign(sx.unpack()))};
    });
  }
  return out;
}

Tensor sign(const Tensor& x) {
  detail::check_defined(x, "sign");
  Tensor out = unary_kernel(UnaryOp::Sign, x, x.dtype());
  if (autograd::needs_grad({&x})) {
    autograd::record("Sign", out, {x}, [](const Tensor& g) { return std::vector<Tensor>{zeros_like(g)}; });
  }
  return out;
}

Tensor exp(const Tensor& x_in) {
  const auto [x] = autocast_inputs(AutocastOp::Exp, {x_in});
  return floating_unary(UnaryOp::Exp, x, "exp", "Exp",
                        [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}
Tensor log(const Tensor& x_in) {
  const auto [x] = autocast_inputs(AutocastOp::Log, {x_in});
  return floating_unary(UnaryOp::Log, x, "log", "Log",
                        [](const Tensor& g, const Tensor& v, const Tensor&) { return div(g, v); });
}
Tensor sqrt(const Tensor& x) {
  return floating_unary(UnaryOp::Sqrt, x, "sqrt", "Sqrt",
                        [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& x) {
  return floating_unary(UnaryOp::Rsqrt, x, "rsqrt", "Rsqrt", [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, mul(pow(y, 3.0), -0.5));
  });
}
Tensor relu(const Tensor& x) {
  detail::check_defined(x, "relu");
  Tensor out = unary_kernel(UnaryOp::Relu, x, x.dtype());
  if (autograd::needs_grad({&x})) {
    autograd::record("Relu", out, {x}, [so = SavedTensor(out)](const Tensor& g) {
      return std::vector<Tensor>{fused_backward(BinaryOp::ReluBackward, g, so.unpack())};
    });
  }
  return out;
}
namespace {

// Whether a fused activation kernel takes x (and grad, when defined): float32 or bfloat16,
// contiguous, the two of one dtype and shape.
bool fused_activation_takes(const Tensor& x, const Tensor& grad) {
  return (x.dtype() == DType::Float32 || x.dtype() == DType::BFloat16) && x.is_contiguous() &&
         (!grad.defined() || (grad.dtype() == x.dtype() && grad.shape() == x.shape() && grad.is_contiguous()));
}

// The tanh GELU's forward (grad undefined) or gradient on the device's fused kernel
// (tensor/fused_kernels.h) when it has one for these tensors; an undefined tensor otherwise.
// `tanh` (float32, x's shape), when defined, receives the formula's tanh in the forward and gives
// it to the gradient.
Tensor fused_gelu_tanh(const Tensor& x, const Tensor& grad, const Tensor& tanh = Tensor()) {
  detail::GeluTanhKernel* kernel = detail::gelu_tanh_kernels().find(x.device().type);
  if (!kernel || !fused_activation_takes(x, grad)) return Tensor();
  Tensor out = detail::make_tensor(x.shape(), x.dtype(), x.device());
  kernel({x.detach(), grad.defined() ? grad.detach() : Tensor(), out, tanh});
  return out;
}

// SiLU's forward (grad undefined) or gradient on the device's fused kernel when it has one for
// these tensors; an undefined tensor otherwise.
Tensor fused_silu(const Tensor& x, const Tensor& grad) {
  detail::SiluKernel* kernel = detail::silu_kernels().find(x.device().type);
  if (!kernel || !fused_activation_takes(x, grad)) return Tensor();
  Tensor out = detail::make_tensor(x.shape(), x.dtype(), x.device());
  kernel({x.detach(), grad.defined() ? grad.detach() : Tensor(), out});
  return out;
}

}  // namespace

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  const auto op = tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::Gelu;
  const auto rule = tanh_approximation ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward;
  auto backward = [rule](const Tensor& g, const Tensor& v, const Tensor&) {
    if (rule == BinaryOp::GeluTanhBackward)
      if (Tensor fused = fused_gelu_tanh(v, g); fused.defined()) return fused;
    return fused_backward(rule, g, v);
  };
  detail::check_defined(x, "gelu");
  if (tanh_approximation) {
    // Under autograd the fused forward keeps its tanh (float32) for the gradient, which then
    // skips computing it again: most of the gradient's work, for memory of the input's size.
    const bool records = autograd::needs_grad({&x});
    const Tensor t = records ? detail::make_tensor(x.shape(), DType::Float32, x.device()) : Tensor();
    if (Tensor fused = fused_gelu_tanh(x, Tensor(), t); fused.defined()) {
      if (records) {
        autograd::record("Gelu", fused, {x}, [sx = SavedTensor(x), st = SavedTensor(t)](const Tensor& g) {
          const Tensor v = sx.unpack();
          Tensor dx = fused_gelu_tanh(v, g, st.unpack());
          return std::vector<Tensor>{dx.defined() ? dx : fused_backward(BinaryOp::GeluTanhBackward, g, v)};
        });
      }
      return fused;
    }
  }
  return floating_unary(op, x, "gelu", "Gelu", backward);
}

Tensor silu(const Tensor& x) {
  auto backward = [](const Tensor& g, const Tensor& v, const Tensor&) {
    if (Tensor fused = fused_silu(v, g); fused.defined()) return fused;
    return fused_backward(BinaryOp::SiluBackward, g, v);
  };
  detail::check_defined(x, "silu");
  if (Tensor fused = fused_silu(x, Tensor()); fused.defined()) {
    if (autograd::needs_grad({&x}))
      autograd::record("Silu", fused, {x}, [sx = SavedTensor(x), backward](const Tensor& g) {
        return std::vector<Tensor>{backward(g, sx.unpack(), Tensor())};
      });
    return fused;
  }
  return floating_unary(UnaryOp::Silu, x, "silu", "Silu", backward);
}
Tensor sigmoid(const Tensor& x) {
  return floating_unary(UnaryOp::Sigmoid, x, "sigmoid", "Sigmoid", [](const Tensor& g, const Tensor&, const Tensor& y) {
    return fused_backward(BinaryOp::SigmoidBackward, g, y);
  });
}
Tensor tanh(const Tensor& x) {
  return floating_unary(UnaryOp::Tanh, x, "tanh", "Tanh", [](const Tensor& g, const Tensor&, const Tensor& y) {
    return fused_backward(BinaryOp::TanhBackward, g, y);
  });
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  detail::check_defined(x, "clamp");
  WEFT_CHECK(min || max, "[clamp] at least one of min and max must be given");
  const double lo = min.value_or(-std::numeric_limits<double>::infinity());
  const double hi = max.value_or(std::numeric_limits<double>::infinity());
  Tensor out = unary_kernel(UnaryOp::Clamp, x, x.dtype(), lo, hi);
  if (autograd::needs_grad({&x})) {
    // The rule needs only where x was inside the bounds; saving that mask rather than x keeps
    // clamp_ (which overwrites x) differentiable.
    const Tensor inside = mul(ge(x, lo), le(x, hi));  // bool · bool is logical and
    autograd::record("Clamp", out, {x}, [inside](const Tensor& g) {
      return std::vector<Tensor>{where(inside, g, zeros_like(g))};
    });
  }
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ge, a, b, "ge"); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(b, a)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(b, a)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }

Tensor logical_not(const Tensor& x) {
  detail::check_defined(x, "logical_not");
  return unary_kernel(UnaryOp::LogicalNot, x, DType::Bool);
}

Tensor isfinite(const Tensor& x) {
  detail::check_defined(x, "isfinite");
  return unary_kernel(UnaryOp::IsFinite, x, DType::Bool);
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  detail::check_defined(condition, "where", "condition");
  WEFT_CHECK(condition.dtype() == DType::Bool, "[where] expected a bool condition, got ", condition.dtype());
  const DType d = promoted(a, b, "where");
  detail::check_same_device(condition, a, "where");
  detail::check_same_device(a, b, "where");
  const Shape shape = broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = detail::make_tensor(shape, d, a.device());
  detail::backend(a.device())
      .where(detail::raw_expand(condition, shape), detail::raw_expand(detail::raw_cast(a, d), shape),
             detail::raw_expand(detail::raw_cast(b, d), shape), out);
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Where", out, {a, b}, [sc = SavedTensor(condition)](const Tensor& g) {
      const Tensor& c = sc.unpack();
      const Tensor z = zeros_like(g);
      return std::vector<Tensor>{where(c, g, z), where(c, z, g)};
    });
  }
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, double b) { return where(condition, a, scalar_like(b, a)); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  detail::check_defined(mask, "masked_fill", "mask");
  WEFT_CHECK(mask.dtype() == DType::Bool, "[masked_fill] expected a bool mask, got ", mask.dtype());
  // The value is converted to x's dtype, never promoted: masked_fill keeps x's dtype, as PyTorch.
  return where(mask, full({}, value, TensorOptions(x.dtype()).device(x.device())), x);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  WEFT_CHECK(a.shape() == b.shape(), "[allclose] shapes differ: ", a.shape(), " and ", b.shape());
  NoGradGuard no_grad;
  const auto av = a.to_vector<double>();
  const auto bv = b.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) || std::isnan(bv[i])) {
      if (equal_nan && std::isnan(av[i]) && std::isnan(bv[i])) continue;
      return false;
    }
    if (av[i] == bv[i]) continue;  // equal infinities
    if (!(std::fabs(av[i] - bv[i]) <= atol + rtol * std::fabs(bv[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  NoGradGuard no_grad;
  return a.to_vector<double>() == b.to_vector<double>();
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& x) { return neg(x); }

// ---- in-place ops ----

namespace {

// Writes `result` (computed out of place) into `self`. Under grad mode a non-view tensor takes
// over the result's history; leaves that require grad and views are refused, since their
// history cannot be rewritten safely.
Tensor& write_in_place(Tensor& self, const Tensor& result, const char* op) {
  WEFT_CHECK(result.shape() == self.shape(), "[", op, "] the result has shape ", result.shape(),
             ", which cannot be written into a tensor of shape ", self.shape());
  WEFT_CHECK(is_floating(self.dtype()) || !is_floating(result.dtype()), "[", op, "] result type ",
             result.dtype(), " cannot be written into a ", self.dtype(), " tensor");
  const bool track = result.requires_grad() && autograd::grad_mode_enabled();
  if (track) {
    WEFT_CHECK(!(self.is_leaf() && self.requires_grad()), "[", op,
               "] a leaf tensor that requires grad is used in an in-place operation; "
               "wrap the update in NoGradGuard");
    WEFT_CHECK(!self.impl()->is_view, "[", op,
               "] in-place operation on a view of a tensor that is tracked by autograd is not supported; "
               "use the out-of-place op");
  }
  detail::backend(self.device()).copy(result, self);
  self.storage()->bump_version();
  if (track) {
    self.impl()->grad_fn = result.grad_fn();
    self.impl()->requires_grad = true;
  }
  return self;
}

// Note [In place without a copy]: where autograd records nothing, an op writes straight
// into `self`: no temporary as large as self, and one pass over memory instead of two (dividing a
// fresh 188 MB tensor in place took 267 ms through a temporary, most of it page faults, and
// takes 8 ms so). It runs the out-of-place op's kernel in the same compute dtype, so the bits are the
// same. Only where that is safe: the op computes in self's dtype (no narrowing copy), `other`
// broadcasts to self's shape, self is contiguous (an expanded view would take one element's
// write many times), and `other` is self itself or shares none of its memory (a shifted view of
// self would be read after its elements were overwritten). Everything else goes through
// write_in_place. Returns whether it ran.
bool binary_into_self(BinaryOp op, Tensor& self, const Tensor& other, double alpha, DType compute, const char* name) {
  if (autograd::grad_mode_enabled() && (self.requires_grad() || other.requires_grad())) return false;
  if (compute != self.dtype() || !self.is_contiguous() || self.device() != other.device()) return false;
  if (broadcast_shapes(self.shape(), other.shape(), name) != self.shape()) return false;
  const bool same_memory = other.storage() == self.storage();
  const bool is_self = same_memory && other.data_ptr() == self.data_ptr() && other.shape() == self.shape() &&
                       other.strides() == self.strides();
  if (same_memory && !is_self) return false;
  const Tensor b = alpha == 1.0 ? other : mul(other, alpha);
  detail::backend(self.device()).binary(op, self, detail::raw_expand(detail::raw_cast(b, compute), self.shape()), self);
  self.storage()->bump_version();
  return true;
}

// The same for a unary op that keeps self's dtype (clamp_): self contiguous, nothing to record.
bool unary_into_self(UnaryOp op, Tensor& self, double p0, double p1) {
  if ((autograd::grad_mode_enabled() && self.requires_grad()) || !self.is_contiguous()) return false;
  detail::backend(self.device()).unary(op, self, self, p0, p1);
  self.storage()->bump_version();
  return true;
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  if (binary_into_self(BinaryOp::Add, *this, other, alpha, promoted(*this, other, "add"), "add")) return *this;
  return write_in_place(*this, weft::add(*this, other, alpha), "add_");
}
Tensor& Tensor::add_(double value) { return add_(scalar_like(value, *this)); }
Tensor& Tensor::sub_(const Tensor& other) {
  if (dtype() != DType::Bool &&
      binary_into_self(BinaryOp::Sub, *this, other, 1.0, promoted(*this, other, "sub"), "sub"))
    return *this;
  return write_in_place(*this, weft::sub(*this, other), "sub_");
}
Tensor& Tensor::mul_(const Tensor& other) {
  if (binary_into_self(BinaryOp::Mul, *this, other, 1.0, promoted(*this, other, "mul"), "mul")) return *this;
  return write_in_place(*this, weft::mul(*this, other), "mul_");
}
Tensor& Tensor::mul_(double value) { return mul_(scalar_like(value, *this)); }
Tensor& Tensor::div_(const Tensor& other) {
  if (binary_into_self(BinaryOp::Div, *this, other, 1.0, division_dtype(*this, other), "div")) return *this;
  return write_in_place(*this, weft::div(*this, other), "div_");
}
Tensor& Tensor::div_(double value) { return div_(scalar_like(value, *this)); }
Tensor& Tensor::clamp_(std::optional<double> lo, std::optional<double> hi) {
  detail::check_defined(*this, "clamp");
  if ((lo || hi) && unary_into_self(UnaryOp::Clamp, *this, lo.value_or(-std::numeric_limits<double>::infinity()),
                                    hi.value_or(std::numeric_limits<double>::infinity())))
    return *this;
  return write_in_place(*this, weft::clamp(*this, lo, hi), "clamp_");
}

Tensor& Tensor::fill_(double value) {
  WEFT_CHECK(!(autograd::grad_mode_enabled() && is_leaf() && requires_grad()),
             "[fill_] a leaf tensor that requires grad is used in an in-place operation; "
             "wrap the update in NoGradGuard");
  detail::backend(device()).fill(*this, value);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

}  // namespace weft
