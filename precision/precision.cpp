// The base plugin's hooks: the defaults of reference §2.
#include "precision/precision.h"

namespace weft::precision {

void Precision::convert_module(nn::Module&) {}
Context Precision::tensor_init_context() { return {}; }
Context Precision::module_init_context() { return {}; }
Context Precision::forward_context() { return {}; }

void Precision::pre_backward(const Tensor&, nn::Module*) {}
void Precision::backward(const Tensor& tensor, nn::Module*) { tensor.backward(); }
void Precision::post_backward(const Tensor&, nn::Module*) {}

bool Precision::optimizer_step(optim::Optimizer& optimizer) {
  optimizer.step();
  return true;
}

std::vector<Tensor> Precision::main_params(const optim::Optimizer& optimizer) const {
  std::vector<Tensor> params;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    for (const Tensor& p : optimizer.params(g)) params.push_back(p);
  return params;
}

void Precision::unscale_gradients(optim::Optimizer&) {}
void Precision::load_state_dict(const nn::TensorDict&) {}

}  // namespace weft::precision
