// SGD's option checks, its step (one kernel launch per device and group, optim/fused_kernels.h)
// and the CPU kernel (formulas in optim/sgd.h). Scalars are rounded to the
// compute type once, as PyTorch rounds a Python float to the tensor's dtype, and each line below
// is one PyTorch op of _single_tensor_sgd, in the same order. That loop is also the scalar reference of the AVX2 and AVX-512 kernels (optim/update_avx2.cpp, update_avx512.cpp)
// that float32 blocks take on CPUs that have them, which keep a momentum buffer decayed into
// denormals from costing a microcode assist per operation (Note [Denormal moments]).
#include "optim/sgd.h"

#include <algorithm>
#include <type_traits>

#include "optim/fused_kernels.h"
#include "optim/fused_update.h"
#include "optim/update_kernels.h"
#include "tensor/cpu/isa.h"
#include "tensor/cuda.h"

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

using detail::SgdLaunch;
using detail::SgdParam;
using weft::detail::KernelRegistry;

// Elements [begin, end) of one parameter (begin on a block boundary).
template <class P, class G>
void sgd_update(const SgdParam& a, const SgdLaunch& o, int64_t begin, int64_t end) {
  using C = detail::ComputeType<P>;
  C* buffer_data = a.momentum_buffer.defined() ? a.momentum_buffer.data<C>() : nullptr;
  const bool first_step = a.first_step;
  const C weight_decay = static_cast<C>(o.weight_decay);
  const C momentum = static_cast<C>(o.momentum);
  const C one_minus_dampening = static_cast<C>(1.0 - o.dampening);
  const C neg_lr = static_cast<C>(-o.lr);
  const bool decay = o.weight_decay != 0.0;
  const CpuIsa isa = cpu_isa();
  detail::for_each_param_block(a.param.data<P>(), a.grad.data<G>(), begin, end,
                               [&](int64_t offset, int64_t length, C* p_data, const C* g_data) {
    if constexpr (std::is_same_v<C, float>) {
      if (isa >= CpuIsa::Avx2) {
        const detail::SgdBlockF32 block{p_data, g_data, buffer_data ? buffer_data + offset : nullptr, length,
                                        first_step, o.nesterov, decay, weight_decay, momentum, one_minus_dampening,
                                        neg_lr};
        if (isa >= CpuIsa::Avx512) detail::sgd_block_f32_avx512(block);
        else detail::sgd_block_f32_avx2(block);
        return;
      }
    }
    C* buf = buffer_data ? buffer_data + offset : nullptr;
    for (int64_t i = 0; i < length; ++i) {
      C d = decay ? g_data[i] + weight_decay * p_data[i] : g_data[i];
      if (buf) {
        buf[i] = first_step ? d : buf[i] * momentum + one_minus_dampening * d;
        d = o.nesterov ? d + momentum * buf[i] : buf[i];
      }
      p_data[i] = p_data[i] + neg_lr * d;
    }
  });
}

}  // namespace

void detail::cpu_sgd_kernel(const SgdLaunch& launch) {
  std::vector<int64_t> sizes;
  for (const SgdParam& a : launch.params) sizes.push_back(a.param.numel());
  for_each_param_range(sizes, [&](size_t i, int64_t begin, int64_t end) {
    const SgdParam& a = launch.params[i];
    dispatch_param_grad_dtype(a.param.dtype(), a.grad.dtype(), "SGD",
                              [&](auto p, auto g) { sgd_update<decltype(p), decltype(g)>(a, launch, begin, end); });
  });
}

KernelRegistry<detail::SgdKernel>& detail::sgd_kernels() {
  static KernelRegistry<SgdKernel> registry("SGD", &cpu_sgd_kernel, cuda_sgd_kernel);
  return registry;
}

void SGD::step() {
  for (Group& group : groups_) {
    const SGDOptions& o = group.options;
    // Every parameter is checked before any state changes.
    std::vector<std::pair<Tensor, Tensor>> stepped;
    for (const Tensor& param : group.params)
      if (param.grad().defined()) {
        stepped.emplace_back(param, detail::fused_update_grad("SGD", param));
        // A CUDA graph would zero a buffer created during its capture on every replay.
        const bool creates_buffer_in_capture =
            o.momentum != 0.0 && param.device().is_cuda() && cuda::is_current_stream_capturing() &&
            (state(param) == nullptr || !state(param)->momentum_buffer.defined());
        WEFT_CHECK(!creates_buffer_in_capture, "[SGD] a momentum buffer would be created during a CUDA graph capture, "
                   "and every replay would reset it; run the step eagerly first (cuda::Graph::warm_up)");
      }
    std::vector<std::pair<Device, SgdLaunch>> launches;  // one per device
    for (const auto& [param, grad] : stepped) {
      Tensor buffer;
      bool first_step = false;
      if (o.momentum != 0.0) {
        SGDParamState& state = state_for(param);
        first_step = !state.momentum_buffer.defined();
        if (first_step) state.momentum_buffer = detail::zero_state(param);
        buffer = state.momentum_buffer;
      }
      const Device device = param.device();  // named: clang 14 lets no lambda capture a structured binding
      auto at = std::find_if(launches.begin(), launches.end(), [&](const auto& l) { return l.first == device; });
      if (at == launches.end())
        at = launches.insert(launches.end(), {device, SgdLaunch{{}, o.lr, o.momentum, o.dampening,
                                                                          o.weight_decay, o.nesterov}});
      at->second.params.push_back({param, grad, buffer, first_step});
    }
    for (const auto& [device, launch] : launches) {
      detail::sgd_kernels().at(device)(launch);
      for (const SgdParam& a : launch.params) detail::mark_updated(a.param);
    }
  }
}

}  // namespace weft::optim
