// The op kinds the Backend's elementwise and reduction kernels take (tensor/backend.h), in a
// header of their own so that device code (tensor/elementwise_math.h, the CUDA kernels) can name
// them without the Tensor headers.
#pragma once

#include <cstdint>

namespace weft::detail {

enum class UnaryOp : uint8_t {
  Neg, Abs, Sign, Exp, Log, Sqrt, Rsqrt, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh,
  Clamp,       // params: (low, high); ±inf for an open side
  PowScalar,   // params: (exponent)
  LogicalNot,  // out is bool
  IsFinite,    // out is bool
};

enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // out is bool
  // Fused backward rules: (grad, saved) -> grad_input.
  ReluBackward,      // saved = input
  GeluBackward,      // saved = input
  GeluTanhBackward,  // saved = input
  SiluBackward,      // saved = input
  SigmoidBackward,   // saved = output
  TanhBackward,      // saved = output
};

enum class ReduceOp : uint8_t { Sum, Max, Min, ArgMax, ArgMin };

}  // namespace weft::detail
