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

// The per-element functions are forced inline into the kernels' loops: a call left in a loop keeps
// the compiler from vectorising it.
#if defined(__CUDACC__)
#define WEFT_HD_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define WEFT_HD_INLINE inline __attribute__((always_inline))
#else
#define WEFT_HD_INLINE inline
#endif

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

// exp(−y) for y ≥ 0 in float32 from arithmetic alone, as the factor exp(−r) it returns and the
// power 2^−k it leaves in k (exp(−y) = exp(−r)·2^−k): k = round(y·log2 e), r = y − k·ln 2 (ln 2 in
// two parts, the first exact in float) within ±0.35, exp(−r) by its Taylor series to r⁷ (truncation
// error < 0.35⁸/8! ≈ 6e-9). The arithmetic functions below make 2^−k each their own way.
WEFT_HD_INLINE float exp_neg_reduced(float y, int& k) {
  k = static_cast<int>(y * 1.44269504f + 0.5f);
  const float kf = static_cast<float>(k);
  const float r = (y - kf * 0.693145752f) - kf * 1.42860677e-6f;
  const float m = -r;
  return 1.0f + m * (1.0f + m * (0.5f + m * (1.0f / 6 + m * (1.0f / 24 + m * (1.0f / 120 + m * (1.0f / 720 + m * (1.0f / 5040)))))));
}

// The logistic sigmoid in float32 from arithmetic alone, for the reason tanh_arith (below) is:
// a libm expf call per element kept SiLU's loops scalar (a Llama MLP's 128 × 5632 SiLU on one
// thread: 3.2 -> 2.1 ns per float32 value, 3.1 -> 2.4 per bfloat16 value, at the baseline ISA).
// Relative error < 4e-7 (tests/tensor/test_sigmoid_arith.cpp), to the smallest denormal; NaN stays NaN.
//   σ(x) = 1 / (1 + e) for x ≥ 0, e / (1 + e) below, with e = exp(−|x|) ≤ 1, |x| clamped to 110
//   (e is 0 in float from 103.3); exp_neg_reduced, k ∈ [0, 159], and 2^−k as two powers
//   2^−⌊k/2⌋ · 2^−⌈k/2⌉ made from their exponent bits (each a normal float; their product with
//   exp(−r) rounds once into the denormals where it must).
WEFT_HD_INLINE float sigmoid_arith(float x) {
  // min(|x|, 110) on the bit patterns (NaN's, above every finite one, becomes 110's): tanh_arith
  // says why not a float select.
  const uint32_t magnitude = float_bits(x) & 0x7fffffffu, most = 0x42dc0000u;
  int k = 0;
  const float p = exp_neg_reduced(bits_float(magnitude < most ? magnitude : most), k);
  const int half = k >> 1;
  const float e = p * bits_float(static_cast<uint32_t>(127 - half) << 23) * bits_float(static_cast<uint32_t>(127 - (k - half)) << 23);
  // The numerator 1 or e, and NaN passed through, chosen on bit patterns with masks: a float
  // select here became a branch, which keeps the loop scalar.
  const uint32_t negative = 0u - (float_bits(x) >> 31), one = float_bits(1.0f);
  const float s = bits_float(one ^ ((one ^ float_bits(e)) & negative)) / (1.0f + e);
  const uint32_t nan = 0u - static_cast<uint32_t>(magnitude > 0x7f800000u);
  return bits_float(float_bits(s) ^ ((float_bits(s) ^ float_bits(x)) & nan));
}

template <class T>
WEFT_HD_INLINE T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>) return sigmoid_arith(x);
  else return T(1) / (T(1) + std::exp(-x));
}

inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
inline constexpr double kGeluCubic = 0.044715;

// tanh in float32 from arithmetic alone, so the compiler vectorises the loops that call it (a libm
// tanhf call per element made the tanh GELU the slowest op of a GPT step). Absolute error < 1.5e-7
// (tests/tensor/test_gelu_tanh.cpp) — what GELU's 0.5·x·(1 + tanh) needs; the relative error near
// 0 is larger, so the Tanh op itself keeps std::tanh. NaN gives ±1 here; GELU still returns NaN
// for NaN, through its factor x.
//   tanh|u| = (1 − e) / (1 + e), e = exp(−2|u|), |u| clamped to 9 (tanh 9 is 1 − 3e-8);
//   exp_neg_reduced, k ∈ [0, 26]; 2^−k by multiplying the powers 2^−1, 2^−2, ..., 2^−16 of k's bits.
WEFT_HD_INLINE float tanh_arith(float u) {
  // min(|u|, 9) on the bit patterns, which order non-negative floats as their values (NaN, above
  // every finite pattern, becomes 9): a float select here, followed by a conversion that may trap,
  // keeps GCC from vectorising the loop.
  const uint32_t magnitude = float_bits(u) & 0x7fffffffu, nine = 0x41100000u;
  int k = 0;
  const float p = exp_neg_reduced(2.0f * bits_float(magnitude < nine ? magnitude : nine), k);
  // Bit b of k contributes 2^−(2^b): 1 − (1 − 2^−(2^b))·bit, exact in float, no branch.
  const float scale = (1.0f - 0.5f * static_cast<float>(k & 1)) * (1.0f - 0.75f * static_cast<float>((k >> 1) & 1)) *
                      (1.0f - 0.9375f * static_cast<float>((k >> 2) & 1)) *
                      (1.0f - 0.99609375f * static_cast<float>((k >> 3) & 1)) *
                      (1.0f - 0.999984741f * static_cast<float>((k >> 4) & 1));
  const float e = p * scale;
  return std::copysign((1.0f - e) / (1.0f + e), u);
}

// The tanh of the tanh GELU: tanh_arith in float, std::tanh in double (gradient checks need it).
template <class T>
WEFT_HD_INLINE T gelu_tanh_of(T u) {
  if constexpr (std::is_same_v<T, float>) return tanh_arith(u); else return std::tanh(u);
}

template <UnaryOp OP, class T>
WEFT_HD_INLINE auto unary_scalar(T x, double p0, double p1) {
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
    return T(0.5) * x * (T(1) + gelu_tanh_of(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  } else {
    static_assert(OP == UnaryOp::PowScalar);
    (void)p1;
    return static_cast<T>(std::pow(x, static_cast<T>(p0)));
  }
}

template <BinaryOp OP, class T>
WEFT_HD_INLINE auto binary_scalar(T a, T b) {
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
    const T t = gelu_tanh_of(inner);
    const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * b * b);
    return a * (T(0.5) * (T(1) + t) + T(0.5) * b * (T(1) - t * t) * d_inner);
  }
}

}  // namespace weft::detail
