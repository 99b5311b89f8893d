// CPU elementwise kernels: unary, binary (incl. fused activation backward rules) and where.
//
// Each op is a small scalar function; `run_unary` / `run_binary` apply it over strided runs,
// with a tight loop for the contiguous case (which the compiler vectorises) and a strided loop
// otherwise. The op is a template argument so the switch happens once per call, not per element.
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

template <class T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T x_positive(T grad, T x) {
  return x > T(0) ? grad : T(0);
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
constexpr double kGeluCubic = 0.044715;

template <UnaryOp OP, class T>
auto unary_scalar(T x, double p0, double p1) {
  if constexpr (OP == UnaryOp::LogicalNot) {
    return !static_cast<bool>(x);
  } else if constexpr (OP == UnaryOp::IsFinite) {
    if constexpr (std::is_floating_point_v<T>) return std::isfinite(x); else return true;
  } else if constexpr (OP == UnaryOp::Neg) {
    if constexpr (std::is_same_v<T, bool>) return x; else return static_cast<T>(-x);
  } else if constexpr (OP == UnaryOp::Abs) {
    if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) return x;
    else return static_cast<T>(x < 0 ? -x : x);
  } else if constexpr (OP == UnaryOp::Sign) {
    return static_cast<T>((T(0) < x) - (x < T(0)));
  } else if constexpr (OP == UnaryOp::Relu) {
    return x > T(0) ? x : T(0);
  } else if constexpr (OP == UnaryOp::Clamp) {
    // NaN stays NaN; bounds are applied in the compute type.
    const double v = static_cast<double>(x);
    if (v != v) return x;
    return static_cast<T>(std::min(std::max(v, p0), p1));
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (OP == UnaryOp::Exp) return std::exp(x);
    else if constexpr (OP == UnaryOp::Log) return std::log(x);
    else if constexpr (OP == UnaryOp::Sqrt) return std::sqrt(x);
    else if constexpr (OP == UnaryOp::Rsqrt) return T(1) / std::sqrt(x);
    else if constexpr (OP == UnaryOp::Sigmoid) return sigmoid_of(x);
    else if constexpr (OP == UnaryOp::Tanh) return std::tanh(x);
    else if constexpr (OP == UnaryOp::Silu) return x * sigmoid_of(x);
    else if constexpr (OP == UnaryOp::Gelu) return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
    else if constexpr (OP == UnaryOp::GeluTanh) {
      return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
    }
    else if constexpr (OP == UnaryOp::PowScalar) return static_cast<T>(std::pow(x, static_cast<T>(p0)));
    else return x;  // unreachable: every floating op is listed above
  } else {
    (void)p1;
    WEFT_FAIL("[cpu] internal: unary op needs a floating input");
    return x;
  }
}

template <BinaryOp OP, class T>
auto binary_scalar(T a, T b) {
  if constexpr (OP == BinaryOp::Eq) return a == b;
  else if constexpr (OP == BinaryOp::Ne) return a != b;
  else if constexpr (OP == BinaryOp::Lt) return a < b;
  else if constexpr (OP == BinaryOp::Le) return a <= b;
  else if constexpr (OP == BinaryOp::Gt) return a > b;
  else if constexpr (OP == BinaryOp::Ge) return a >= b;
  else if constexpr (std::is_same_v<T, bool>) {
    // bool arithmetic: add is or, mul is and (as PyTorch).
    if constexpr (OP == BinaryOp::Add || OP == BinaryOp::Maximum) return a || b;
    else if constexpr (OP == BinaryOp::Mul || OP == BinaryOp::Minimum) return a && b;
    else { WEFT_FAIL("[cpu] internal: op not defined for bool"); return a; }
  } else if constexpr (OP == BinaryOp::Add) return static_cast<T>(a + b);
  else if constexpr (OP == BinaryOp::Sub) return static_cast<T>(a - b);
  else if constexpr (OP == BinaryOp::Mul) return static_cast<T>(a * b);
  else if constexpr (OP == BinaryOp::Maximum) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a || b != b) return a + b; }
    return a > b ? a : b;
  } else if constexpr (OP == BinaryOp::Minimum) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a || b != b) return a + b; }
    return a < b ? a : b;
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (OP == BinaryOp::Div) return a / b;
    else if constexpr (OP == BinaryOp::Pow) return std::pow(a, b);
    else if constexpr (OP == BinaryOp::ReluBackward) return x_positive(a, b);
    else if constexpr (OP == BinaryOp::SigmoidBackward) return a * b * (T(1) - b);
    else if constexpr (OP == BinaryOp::TanhBackward) return a * (T(1) - b * b);
    else if constexpr (OP == BinaryOp::SiluBackward) {
      const T s = sigmoid_of(b);
      return a * s * (T(1) + b * (T(1) - s));
    }
    else if constexpr (OP == BinaryOp::GeluBackward) {
      const T cdf = T(0.5) * (T(1) + std::erf(b * T(std::numbers::sqrt2 / 2)));
      const T pdf = std::exp(T(-0.5) * b * b) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return a * (cdf + b * pdf);
    }
    else if constexpr (OP == BinaryOp::GeluTanhBackward) {
      const T inner = T(kSqrt2OverPi) * (b + T(kGeluCubic) * b * b * b);
      const T t = std::tanh(inner);
      const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * b * b);
      return a * (T(0.5) * (T(1) + t) + T(0.5) * b * (T(1) - t * t) * d_inner);
    }
    else return a;  // unreachable: every floating op is listed above
  } else {
    WEFT_FAIL("[cpu] internal: binary op needs floating inputs");
    return a;
  }
}

template <class Out, class In, class Fn>
void elementwise_run(const StridedRun<2>& run, Fn f) {
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In)) {
    Out* o = reinterpret_cast<Out*>(run.ptr[0]);
    const In* x = reinterpret_cast<const In*>(run.ptr[1]);
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(x[i]);
    return;
  }
  for (int64_t i = 0; i < run.n; ++i) {
    In x;
    std::memcpy(&x, run.ptr[1] + i * run.stride[1], sizeof(In));
    const Out r = f(x);
    std::memcpy(run.ptr[0] + i * run.stride[0], &r, sizeof(Out));
  }
}

template <class Out, class In, class Fn>
void elementwise_run(const StridedRun<3>& run, Fn f) {
  Out* o = reinterpret_cast<Out*>(run.ptr[0]);
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In) && run.stride[2] == sizeof(In)) {
    const In* a = reinterpret_cast<const In*>(run.ptr[1]);
    const In* b = reinterpret_cast<const In*>(run.ptr[2]);
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(a[i], b[i]);
    return;
  }
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In) && run.stride[2] == 0) {
    const In* a = reinterpret_cast<const In*>(run.ptr[1]);
    In b;
    std::memcpy(&b, run.ptr[2], sizeof(In));
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(a[i], b);
    return;
  }
  for (int64_t i = 0; i < run.n; ++i) {
    In a, b;
    std::memcpy(&a, run.ptr[1] + i * run.stride[1], sizeof(In));
    std::memcpy(&b, run.ptr[2] + i * run.stride[2], sizeof(In));
    const Out r = f(a, b);
    std::memcpy(run.ptr[0] + i * run.stride[0], &r, sizeof(Out));
  }
}

template <UnaryOp OP>
void run_unary(const Tensor& x, const Tensor& out, double p0, double p1) {
  WEFT_DISPATCH_COMPUTE(x.dtype(), T, {
    using Out = decltype(unary_scalar<OP, T>(T{}, 0.0, 0.0));
    for_each_strided<2>({&out, &x}, [p0, p1](const StridedRun<2>& run) {
      elementwise_run<Out, T>(run, [p0, p1](T v) { return unary_scalar<OP, T>(v, p0, p1); });
    });
  });
}

template <BinaryOp OP>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& out) {
  WEFT_DISPATCH_COMPUTE(a.dtype(), T, {
    using Out = decltype(binary_scalar<OP, T>(T{}, T{}));
    for_each_strided<3>({&out, &a, &b}, [](const StridedRun<3>& run) {
      elementwise_run<Out, T>(run, [](T u, T v) { return binary_scalar<OP, T>(u, v); });
    });
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x_in, const Tensor& out_in, double p0, double p1) {
  const Tensor x = widen_if_narrow(x_in);
  const Tensor out = compute_target(out_in);
  switch (op) {
#define WEFT_UNARY_CASE(NAME) case UnaryOp::NAME: run_unary<UnaryOp::NAME>(x, out, p0, p1); break;
    WEFT_UNARY_CASE(Neg) WEFT_UNARY_CASE(Abs) WEFT_UNARY_CASE(Sign) WEFT_UNARY_CASE(Exp)
    WEFT_UNARY_CASE(Log) WEFT_UNARY_CASE(Sqrt) WEFT_UNARY_CASE(Rsqrt) WEFT_UNARY_CASE(Relu)
    WEFT_UNARY_CASE(Gelu) WEFT_UNARY_CASE(GeluTanh) WEFT_UNARY_CASE(Silu) WEFT_UNARY_CASE(Sigmoid)
    WEFT_UNARY_CASE(Tanh) WEFT_UNARY_CASE(Clamp) WEFT_UNARY_CASE(PowScalar)
    WEFT_UNARY_CASE(LogicalNot) WEFT_UNARY_CASE(IsFinite)
#undef WEFT_UNARY_CASE
  }
  store_from(out, out_in);
}

void CpuBackend::binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, const Tensor& out_in) {
  const Tensor a = widen_if_narrow(a_in);
  const Tensor b = widen_if_narrow(b_in);
  const Tensor out = compute_target(out_in);
  switch (op) {
#define WEFT_BINARY_CASE(NAME) case BinaryOp::NAME: run_binary<BinaryOp::NAME>(a, b, out); break;
    WEFT_BINARY_CASE(Add) WEFT_BINARY_CASE(Sub) WEFT_BINARY_CASE(Mul) WEFT_BINARY_CASE(Div)
    WEFT_BINARY_CASE(Pow) WEFT_BINARY_CASE(Maximum) WEFT_BINARY_CASE(Minimum)
    WEFT_BINARY_CASE(Eq) WEFT_BINARY_CASE(Ne) WEFT_BINARY_CASE(Lt) WEFT_BINARY_CASE(Le)
    WEFT_BINARY_CASE(Gt) WEFT_BINARY_CASE(Ge)
    WEFT_BINARY_CASE(ReluBackward) WEFT_BINARY_CASE(GeluBackward) WEFT_BINARY_CASE(GeluTanhBackward)
    WEFT_BINARY_CASE(SiluBackward) WEFT_BINARY_CASE(SigmoidBackward) WEFT_BINARY_CASE(TanhBackward)
#undef WEFT_BINARY_CASE
  }
  store_from(out, out_in);
}

void CpuBackend::where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in, const Tensor& out_in) {
  const Tensor a = widen_if_narrow(a_in);
  const Tensor b = widen_if_narrow(b_in);
  const Tensor out = compute_target(out_in);
  WEFT_DISPATCH_COMPUTE(a.dtype(), T, {
    for_each_strided<4>({&out, &cond, &a, &b}, [](const StridedRun<4>& run) {
      for (int64_t i = 0; i < run.n; ++i) {
        bool c;
        std::memcpy(&c, run.ptr[1] + i * run.stride[1], 1);
        std::memcpy(run.ptr[0] + i * run.stride[0], run.ptr[c ? 2 : 3] + i * run.stride[c ? 2 : 3], sizeof(T));
      }
    });
  });
  store_from(out, out_in);
}

}  // namespace weft::detail
