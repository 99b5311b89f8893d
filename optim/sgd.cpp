// SGD's option checks and its fused update (formulas in optim/sgd.h). Scalars are rounded to the
// compute type once, as PyTorch rounds a Python float to the tensor's dtype, and each line below
// is one PyTorch op of _single_tensor_sgd, in the same order.
#include "optim/sgd.h"

#include "optim/fused_update.h"

namespace weft::optim {

void SGDOptions::validate() const {
  WEFT_CHECK(lr >= 0.0, "[SGD] invalid learning rate: ", lr, "; expected lr >= 0");
  WEFT_CHECK(momentum >= 0.0, "[SGD] invalid momentum value: ", momentum, "; expected momentum >= 0");
  WEFT_CHECK(weight_decay >= 0.0, "[SGD] invalid weight_decay value: ", weight_decay,
             "; expected weight_decay >= 0");
  WEFT_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0),
             "[SGD] Nesterov momentum requires a momentum and zero dampening; got momentum ", momentum,
             ", dampening ", dampening);
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : TypedOptimizer("SGD", std::move(params), options) {}

namespace {

using detail::Block;
using detail::ConstBlock;

template <class P, class G>
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& buffer, bool first_step,
                const SGDOptions& o) {
  using C = detail::ComputeType<P>;
  C* buffer_data = buffer.defined() ? buffer.data<C>() : nullptr;
  const C weight_decay = static_cast<C>(o.weight_decay);
  const C momentum = static_cast<C>(o.momentum);
  const C one_minus_dampening = static_cast<C>(1.0 - o.dampening);
  const C neg_lr = static_cast<C>(-o.lr);
  const bool decay = o.weight_decay != 0.0;
  detail::for_each_param_block(param.data<P>(), grad.data<G>(), param.numel(),
                               [&](int64_t offset, int64_t length, C* p_data, const C* g_data) {
    Block<C> p(p_data, length);
    alignas(64) C d_data[detail::kBlock];
    Block<C> d(d_data, length);
    if (decay)
      d = ConstBlock<C>(g_data, length) + weight_decay * p;
    else
      d = ConstBlock<C>(g_data, length);
    if (buffer_data) {
      Block<C> buf(buffer_data + offset, length);
      if (first_step)
        buf = d;
      else
        buf = buf * momentum + one_minus_dampening * d;
      if (o.nesterov)
        d = d + momentum * buf;
      else
        d = buf;
    }
    p = p + neg_lr * d;
  });
}

}  // namespace

void SGD::step() {
  for (Group& group : groups_) {
    const SGDOptions& o = group.options;
    for (const Tensor& param : group.params) {
      if (!param.grad().defined()) continue;
      const Tensor grad = detail::fused_update_grad("SGD", param);
      Tensor buffer;
      bool first_step = false;
      if (o.momentum != 0.0) {
        SGDParamState& state = state_for(param);
        first_step = !state.momentum_buffer.defined();
        if (first_step) state.momentum_buffer = detail::zero_state(param);
        buffer = state.momentum_buffer;
      }
      detail::dispatch_param_grad_dtype(param.dtype(), grad.dtype(), "SGD", [&](auto p, auto g) {
        sgd_update<decltype(p), decltype(g)>(param, grad, buffer, first_step, o);
      });
      detail::mark_updated(param);
    }
  }
}

}  // namespace weft::optim
