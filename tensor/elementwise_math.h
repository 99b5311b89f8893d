// The arithmetic of every elementwise op, one scalar at a time, as WEFT_HD functions that the CPU
// kernels (tensor/cpu/elementwise.cpp) and the CUDA kernels (tensor/cuda/elementwise.cu) share,
// so both compute each op with the same formula in the same compute type.
//
// T is a compute type: double, float (narrow floats are computed in float), an integer type or
// bool. kUnarySupports / kBinarySupports say which (op, T) pairs exist; a dispatcher instantiates
// only those and reports the rest as an internal error (the op front-ends never ask for them:
// floating ops get floating inputs, and bool has no subtraction or division).
#pragma once

#include <cmath>
#include <numbers>
#include <type_traits>

#include "tensor/host_device.h"
#include "tensor/op_kinds.h"

namespace weft::detail {

template <UnaryOp OP>
inline constexpr bool kUnaryFloatingOnly = !(OP == UnaryOp::LogicalNot || OP == UnaryOp::IsFinite ||
                                             OP == UnaryOp::Neg || OP == UnaryOp::Abs || OP == UnaryOp::Sign ||
                                             OP == UnaryOp::Relu || OP == UnaryOp::Clamp);

template <UnaryOp OP, class T>
inline constexpr bool kUnarySupports = std::is_floating_point_v<T> || !kUnaryFloatingOnly<OP>;

template <BinaryOp OP>
inline constexpr bool kBinaryAnyType = OP == BinaryOp::Add || OP == BinaryOp::Sub || OP == BinaryOp::Mul ||
                                       OP == BinaryOp::Maximum || OP == BinaryOp::Minimum || OP == BinaryOp::Eq ||
                                       OP == BinaryOp::Ne || OP == BinaryOp::Lt || OP == BinaryOp::Le ||
                                       OP == BinaryOp::Gt || OP == BinaryOp::Ge;

template <BinaryOp OP, class T>
inline constexpr bool kBinarySupports =
    std::is_floating_point_v<T> || (kBinaryAnyType<OP> && !(std::is_same_v<T, bool> && OP == BinaryOp::Sub));

template <class T>
WEFT_HD T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
inline constexpr double kGeluCubic = 0.044715;

template <UnaryOp OP, class T>
WEFT_HD auto unary_scalar(T x, double p0, double p1) {
  static_assert(kUnarySupports<OP, T>, "a floating op on a non-floating compute type");
  if constexpr (OP == UnaryOp::LogicalNot) {
    return !static_cast<bool>(x);
  } else if constexpr (OP == UnaryOp::IsFinite) {
    if constexpr (std::is_floating_point_v<T>) return static_cast<bool>(std::isfinite(x)); else return true;
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
    // NaN stays NaN; bounds are applied in double, as min(max(v, low), high).
    const double v = static_cast<double>(x);
    if (v != v) return x;
    const double raised = v < p0 ? p0 : v;
    return static_cast<T>(p1 < raised ? p1 : raised);
  } else if constexpr (OP == UnaryOp::Exp) {
    return std::exp(x);
  } else if constexpr (OP == UnaryOp::Log) {
    return std::log(x);
  } else if constexpr (OP == UnaryOp::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (OP == UnaryOp::Rsqrt) {
    return T(1) / std::sqrt(x);
  } else if constexpr (OP == UnaryOp::Sigmoid) {
    return sigmoid_of(x);
  } else if constexpr (OP == UnaryOp::Tanh) {
    return std::tanh(x);
  } else if constexpr (OP == UnaryOp::Silu) {
    return x * sigmoid_of(x);
  } else if constexpr (OP == UnaryOp::Gelu) {
    return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
  } else if constexpr (OP == UnaryOp::GeluTanh) {
    return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  } else {
    static_assert(OP == UnaryOp::PowScalar);
    (void)p1;
    return static_cast<T>(std::pow(x, static_cast<T>(p0)));
  }
}

template <BinaryOp OP, class T>
WEFT_HD auto binary_scalar(T a, T b) {
  static_assert(kBinarySupports<OP, T>, "an op the compute type does not have");
  if constexpr (OP == BinaryOp::Eq) return a == b;
  else if constexpr (OP == BinaryOp::Ne) return a != b;
  else if constexpr (OP == BinaryOp::Lt) return a < b;
  else if constexpr (OP == BinaryOp::Le) return a <= b;
  else if constexpr (OP == BinaryOp::Gt) return a > b;
  else if constexpr (OP == BinaryOp::Ge) return a >= b;
  else if constexpr (std::is_same_v<T, bool>) {
    // bool arithmetic: add is or, mul is and (as PyTorch).
    if constexpr (OP == BinaryOp::Add || OP == BinaryOp::Maximum) return a || b;
    else return a && b;  // Mul, Minimum
  } else if constexpr (OP == BinaryOp::Add) return static_cast<T>(a + b);
  else if constexpr (OP == BinaryOp::Sub) return static_cast<T>(a - b);
  else if constexpr (OP == BinaryOp::Mul) return static_cast<T>(a * b);
  else if constexpr (OP == BinaryOp::Maximum) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a || b != b) return a + b; }
    return a > b ? a : b;
  } else if constexpr (OP == BinaryOp::Minimum) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a || b != b) return a + b; }
    return a < b ? a : b;
  }
  else if constexpr (OP == BinaryOp::Div) return a / b;
  else if constexpr (OP == BinaryOp::Pow) return std::pow(a, b);
  else if constexpr (OP == BinaryOp::ReluBackward) return b > T(0) ? a : T(0);
  else if constexpr (OP == BinaryOp::SigmoidBackward) return a * b * (T(1) - b);
  else if constexpr (OP == BinaryOp::TanhBackward) return a * (T(1) - b * b);
  else if constexpr (OP == BinaryOp::SiluBackward) {
    const T s = sigmoid_of(b);
    return a * s * (T(1) + b * (T(1) - s));
  } else if constexpr (OP == BinaryOp::GeluBackward) {
    const T cdf = T(0.5) * (T(1) + std::erf(b * T(std::numbers::sqrt2 / 2)));
    const T pdf = std::exp(T(-0.5) * b * b) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    return a * (cdf + b * pdf);
  } else {
    static_assert(OP == BinaryOp::GeluTanhBackward);
    const T inner = T(kSqrt2OverPi) * (b + T(kGeluCubic) * b * b * b);
    const T t = std::tanh(inner);
    const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * b * b);
    return a * (T(0.5) * (T(1) + t) + T(0.5) * b * (T(1) - t * t) * d_inner);
  }
}

}  // namespace weft::detail
