// nn::init: the weight initialisers, with PyTorch's names, formulas and defaults.
//
// Every function fills its tensor in place (no autograd history, so it works on parameters that
// require grad) and returns it. While the innermost tensor frame sets skip_init (a precision
// plugin's module_init_context with empty_init, see tensor/init_context.h) every filling function
// returns its tensor untouched and draws no random numbers, like Lightning's _EmptyInit: layers
// call these functions unconditionally and stay uninitialised when construction is meant to be
// followed by a checkpoint load.
//
// Random draws come from `gen`, or the default generator when it is null, in the same order as
// Tensor::uniform_ / normal_, so a seed gives the same weights either way.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace weft::nn::init {

enum class Nonlinearity { Linear, Identity, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity: 1 for Linear/Identity/Sigmoid, 5/3 for Tanh, √2 for
// ReLU, √(2 / (1 + slope²)) for LeakyReLU (slope = param, default 0.01), 3/4 for SELU.
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
// For a weight of shape (out, in, k...): fan_in = in·∏k, fan_out = out·∏k. Needs 2 or more dims.
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor& uniform_(Tensor& tensor, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);

// U(−b, b) with b = gain·√(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* gen = nullptr);
// N(0, σ²) with σ = gain / √fan.
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* gen = nullptr);
// U(−b, b) with b = gain·√(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);
// N(0, σ²) with σ = gain·√(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);

}  // namespace weft::nn::init
