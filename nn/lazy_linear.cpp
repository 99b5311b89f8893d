// LazyLinear: capture the construction frames, then build and adopt the eager twin.
#include "nn/lazy_linear.h"

#include "tensor/init_context.h"

namespace weft::nn {

LazyLinearImpl::LazyLinearImpl(int64_t out_features_, bool bias_)
    : LinearImpl(Uninitialized{}, out_features_, bias_),
      skip_init_(weft::skip_init()),
      module_frame_(current_module_frame()) {}

void LazyLinearImpl::materialize(int64_t in_features_) {
  WEFT_CHECK(twin_ == nullptr, "[LazyLinear] already materialised with in_features=", in_features);
  WEFT_CHECK(in_features_ >= 0, "[LazyLinear] in_features must be non-negative, got ", in_features_);
  const TensorFrameGuard tensors(TensorFrame{weight.dtype(), weight.device(), skip_init_});
  const ModuleFrameGuard modules(module_frame_);
  const detail::AdoptionScope adoption(named_parameters(false), named_buffers(false));
  std::shared_ptr<LinearImpl> twin = make_linear(in_features_, out_features, bias.defined());
  WEFT_CHECK(adoption.owner() == twin.get(),
             "[LazyLinear] the module frame's Linear factory must return the first module it constructs "
             "(that module adopts the lazy parameters)");
  twin->train(is_training());
  weight = twin->weight;
  bias = twin->bias;
  in_features = twin->in_features;
  adopt_registrations(*twin);
  twin_ = std::move(twin);
}

Tensor LazyLinearImpl::forward(const Tensor& input) {
  if (twin_ == nullptr) {
    WEFT_CHECK(input.dim() >= 1, "[LazyLinear] expected an input with at least 1 dimension, got a scalar");
    materialize(input.size(-1));
  }
  return twin_->forward(input);
}

void LazyLinearImpl::reset_parameters() {
  if (twin_ != nullptr) twin_->reset_parameters();
}

std::string LazyLinearImpl::type_name() const { return twin_ ? twin_->type_name() : "LazyLinear"; }

std::string LazyLinearImpl::extra_repr() const {
  return twin_ ? twin_->extra_repr() : LinearImpl::extra_repr();
}

Module& LazyLinearImpl::train(bool on) {
  LinearImpl::train(on);
  if (twin_ != nullptr) twin_->train(on);
  return *this;
}

void LazyLinearImpl::save_own_state(const std::string& prefix, TensorDict& out) const {
  if (twin_ != nullptr) {
    twin_->save_own_state(prefix, out);
  } else {
    LinearImpl::save_own_state(prefix, out);
  }
}

void LazyLinearImpl::load_own_state(StateLoader& loader, const std::string& prefix) {
  if (twin_ != nullptr) {
    twin_->load_own_state(loader, prefix);
  } else {
    LinearImpl::load_own_state(loader, prefix);
  }
}

void LazyLinearImpl::before_load_state_dict(const TensorDict& state, const std::string& prefix) {
  if (twin_ != nullptr) return;
  const Tensor* incoming = state.find(prefix + "weight");
  // Anything that does not fit is left for load_state_dict's checks to report by name.
  if (incoming == nullptr || incoming->is_uninitialized() || incoming->dim() != 2 ||
      incoming->size(0) != out_features)
    return;
  materialize(incoming->size(1));
}

}  // namespace weft::nn
