// Weight initialisers. Random values are drawn as float64 on the CPU and copied into the tensor,
// exactly as Tensor::uniform_ / normal_ draw them.
#include "nn/init.h"

#include <cmath>

#include "tensor/autograd.h"
#include "tensor/enum_check.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::nn::init {
namespace {

constexpr int kNumNonlinearities = 7;  // Linear, Identity, Sigmoid, Tanh, ReLU, LeakyReLU, SELU
constexpr int kNumFanModes = 2;         // FanIn, FanOut

double fan(const Tensor& tensor, FanMode mode) {
  weft::detail::check_enum(mode, kNumFanModes, "nn.init", "FanMode");
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  return static_cast<double>(mode == FanMode::FanIn ? fans.fan_in : fans.fan_out);
}

// a is the negative slope of LeakyReLU and means nothing to the other nonlinearities.
double kaiming_std(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  const double gain = nonlinearity == Nonlinearity::LeakyReLU ? calculate_gain(nonlinearity, a)
                                                              : calculate_gain(nonlinearity);
  return gain / std::sqrt(fan(tensor, mode));
}

// Copies float64 values into `tensor`, in place and outside autograd.
Tensor& fill_from(Tensor& tensor, const Tensor& values) {
  NoGradGuard no_grad;
  tensor.copy_(values);
  return tensor;
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  weft::detail::check_enum(nonlinearity, kNumNonlinearities, "calculate_gain", "Nonlinearity");
  WEFT_CHECK(!param || nonlinearity == Nonlinearity::LeakyReLU,
             "[calculate_gain] only LeakyReLU takes a parameter (its negative slope)");
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Identity:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  WEFT_FAIL("[calculate_gain] unknown nonlinearity");
}

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) {
  WEFT_CHECK(tensor.dim() >= 2,
             "[calculate_fan_in_and_fan_out] fan in and fan out need a tensor of 2 or more dimensions, got shape ",
             tensor.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor& uniform_(Tensor& tensor, double low, double high, Generator* gen) {
  WEFT_CHECK(low <= high, "[uniform_] expected low <= high, got low ", low, " and high ", high);
  if (skip_init()) return tensor;
  return fill_from(tensor, rand(tensor.shape(), TensorOptions(kFloat64).device(kCPU), gen) * (high - low) + low);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* gen) {
  WEFT_CHECK(std >= 0.0, "[normal_] expected std >= 0, got ", std);
  if (skip_init()) return tensor;
  return fill_from(tensor, randn(tensor.shape(), TensorOptions(kFloat64).device(kCPU), gen) * std + mean);
}

Tensor& constant_(Tensor& tensor, double value) {
  if (skip_init()) return tensor;
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& kaiming_uniform_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  if (tensor.numel() == 0) return tensor;
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return uniform_(tensor, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  if (tensor.numel() == 0) return tensor;
  return normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity), gen);
}

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* gen) {
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  const double sigma = gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
  const double bound = std::sqrt(3.0) * sigma;
  return uniform_(tensor, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* gen) {
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  const double sigma = gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
  return normal_(tensor, 0.0, sigma, gen);
}

}  // namespace weft::nn::init
