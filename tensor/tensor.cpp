// Tensor handle methods: metadata, data access, conversions, and the method forms of ops.
#include "tensor/tensor.h"

#include "tensor/autograd.h"
#include "tensor/backend.h"
#include "tensor/enum_check.h"
#include "tensor/ops.h"

namespace weft {
namespace detail {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  WEFT_CHECK(dim >= lo && dim <= hi, "[", op, "] dimension out of range: expected in [", lo, ", ",
             hi, "], got ", dim);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  // Checked before any product is formed: counting with max(size, 1) bounds every partial
  // product of shape_numel and contiguous_strides, so neither can overflow; a non-empty tensor
  // must also have a byte size that fits.
  int64_t bound = 1;
  bool empty = false;
  for (int64_t s : shape) {
    WEFT_CHECK(s >= 0, "[empty] sizes must be non-negative, got ", shape);
    WEFT_CHECK(std::max<int64_t>(s, 1) <= INT64_MAX / bound, "[empty] shape ", shape, " is too large to address");
    bound *= std::max<int64_t>(s, 1);
    empty |= s == 0;
  }
  WEFT_CHECK(empty || bound <= INT64_MAX / static_cast<int64_t>(itemsize(dtype)), "[empty] shape ", shape,
             " is too large to address");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * itemsize(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->is_view = true;
  return Tensor(std::move(impl));
}

Tensor make_uninitialized(DType dtype, Device device, bool requires_grad) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->device = device;
  impl->uninitialized = true;
  impl->requires_grad = requires_grad;
  return Tensor(std::move(impl));
}

}  // namespace detail

namespace {

const detail::TensorImpl& checked(const std::shared_ptr<detail::TensorImpl>& impl, const char* what) {
  WEFT_CHECK(impl != nullptr, "[", what, "] called on an undefined tensor");
  return *impl;
}

const detail::TensorImpl& initialized(const std::shared_ptr<detail::TensorImpl>& impl, const char* what) {
  const auto& t = checked(impl, what);
  WEFT_CHECK(!t.uninitialized, "[", what,
             "] the tensor is an uninitialized parameter (a lazy module before its first forward); "
             "run a forward pass or load_state_dict to give it a shape");
  return t;
}

}  // namespace

const Shape& Tensor::shape() const { return initialized(impl_, "shape").shape; }
const Shape& Tensor::strides() const { return initialized(impl_, "strides").strides; }
int64_t Tensor::offset() const { return initialized(impl_, "offset").offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::size(int64_t d) const { return shape()[detail::wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[detail::wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return detail::shape_numel(initialized(impl_, "numel").shape); }
DType Tensor::dtype() const { return checked(impl_, "dtype").dtype; }
Device Tensor::device() const { return checked(impl_, "device").device; }
bool Tensor::is_uninitialized() const { return checked(impl_, "is_uninitialized").uninitialized; }
const std::shared_ptr<Storage>& Tensor::storage() const { return initialized(impl_, "storage").storage; }

bool Tensor::is_contiguous() const {
  const auto& t = initialized(impl_, "is_contiguous");
  // An empty tensor has no element out of place, whatever its strides (as PyTorch says).
  if (detail::shape_numel(t.shape) == 0) return true;
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  const auto& t = initialized(impl_, "data_ptr");
  // An empty storage has no memory: a view into it (of offset > 0) has no address either.
  char* base = static_cast<char*>(t.storage->data());
  return base == nullptr ? nullptr : base + t.offset * static_cast<int64_t>(itemsize(t.dtype));
}

template <class T>
T Tensor::item() const {
  WEFT_CHECK(numel() == 1, "[item] expected a tensor with one element, got shape ", shape());
  return to_vector<T>()[0];
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor cpu = to(kCPU).to(DTypeOf<T>::value).contiguous();
  const T* p = static_cast<const T*>(cpu.data_ptr());
  return std::vector<T>(p, p + cpu.numel());
}

#define WEFT_INSTANTIATE_FOR(T)               \
  template T Tensor::item<T>() const;         \
  template std::vector<T> Tensor::to_vector<T>() const;
WEFT_INSTANTIATE_FOR_EACH_DTYPE()
#undef WEFT_INSTANTIATE_FOR

// The copy that to(), clone() and contiguous() share: a new contiguous tensor, recorded by
// autograd as an identity (with a cast back when the dtype changes).
static Tensor converted_copy(const Tensor& src, DType dtype, Device device, const char* op) {
  Tensor out = detail::make_tensor(src.shape(), dtype, device);
  if (src.device() == device) {
    detail::backend(device).copy(src, out);
  } else {
    // Across devices the accelerator's backend copies a contiguous tensor of the target dtype.
    const Tensor staged = src.dtype() == dtype && src.is_contiguous()
                              ? src
                              : converted_copy(src.detach(), dtype, src.device(), op);
    detail::backend(device.is_cuda() ? device : src.device()).copy(staged, out);
  }
  if (autograd::needs_grad({&src})) {
    const DType src_dtype = src.dtype();
    const Device src_device = src.device();
    autograd::record(op, out, {src}, [src_dtype, src_device](const Tensor& g) {
      return std::vector<Tensor>{g.to(src_device).to(src_dtype)};
    });
  }
  return out;
}

Tensor Tensor::to(DType dtype) const {
  detail::check_enum(dtype, kNumDTypes, "Tensor.to", "DType");
  if (this->dtype() == dtype) return *this;
  return converted_copy(*this, dtype, device(), "To");
}

Tensor Tensor::to(Device device) const {
  detail::check_enum(device.type, kNumDeviceTypes, "Tensor.to", "DeviceType");
  if (this->device() == device) return *this;
  return converted_copy(*this, dtype(), device, "To");
}

Tensor Tensor::clone() const { return converted_copy(*this, dtype(), device(), "Clone"); }

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return converted_copy(*this, dtype(), device(), "Contiguous");
}

Tensor& Tensor::copy_(const Tensor& src) {
  WEFT_CHECK(!(autograd::grad_mode_enabled() && is_leaf() && requires_grad()),
             "[copy_] a leaf tensor that requires grad is used in an in-place operation; "
             "wrap the update in NoGradGuard");
  WEFT_CHECK(src.device() == device() || src.is_contiguous(),
             "[copy_] cross-device copies need a contiguous source");
  const Tensor expanded = src.expand(shape());
  Tensor staged = expanded;
  if (src.device() != device()) staged = expanded.to(device());
  detail::backend(device()).copy(staged, *this);
  storage()->bump_version();
  return *this;
}

void Tensor::set_data(const Tensor& other) {
  WEFT_CHECK(defined() && other.defined(), "[set_data] both tensors must be defined");
  auto& t = *impl_;
  const auto& o = *other.impl();
  t.storage = o.storage;
  t.shape = o.shape;
  t.strides = o.strides;
  t.offset = o.offset;
  t.dtype = o.dtype;
  t.device = o.device;
  t.uninitialized = o.uninitialized;
}

void Tensor::materialize_(const Shape& shape) {
  WEFT_CHECK(is_uninitialized(), "[materialize_] the tensor already has shape ", this->shape());
  Tensor fresh = detail::make_tensor(shape, dtype(), device());
  set_data(fresh);
}

bool Tensor::requires_grad() const { return checked(impl_, "requires_grad").requires_grad; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  checked(impl_, "requires_grad_");
  WEFT_CHECK(is_leaf() || requires_grad,
             "[requires_grad_] only leaf tensors can stop requiring grad; use detach() instead");
  WEFT_CHECK(!requires_grad || is_floating(dtype()),
             "[requires_grad_] only floating tensors can require gradients, got ", dtype());
  impl_->requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return checked(impl_, "grad").grad; }

void Tensor::set_grad(const Tensor& grad) {
  checked(impl_, "set_grad");
  if (grad.defined()) {
    WEFT_CHECK(grad.shape() == shape(), "[set_grad] expected a gradient of shape ", shape(),
               ", got ", grad.shape());
    WEFT_CHECK(grad.device() == device(), "[set_grad] expected a gradient on ", device(), ", got ",
               grad.device());
  }
  impl_->grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return checked(impl_, "grad_fn").grad_fn; }
bool Tensor::is_leaf() const { return checked(impl_, "is_leaf").grad_fn == nullptr; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  const auto& t = initialized(impl_, "detach");
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = t.storage;
  impl->shape = t.shape;
  impl->strides = t.strides;
  impl->offset = t.offset;
  impl->dtype = t.dtype;
  impl->device = t.device;
  impl->is_view = t.is_view;
  return Tensor(std::move(impl));
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  WEFT_CHECK(is_leaf() && requires_grad(),
             "[register_post_accumulate_grad_hook] expected a leaf tensor that requires grad");
  impl_->post_accumulate_grad_hooks.push_back(std::move(hook));
}

// ---- method forms of ops ----
Tensor Tensor::add(const Tensor& o) const { return weft::add(*this, o); }
Tensor Tensor::sub(const Tensor& o) const { return weft::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return weft::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return weft::div(*this, o); }
Tensor Tensor::neg() const { return weft::neg(*this); }
Tensor Tensor::abs() const { return weft::abs(*this); }
Tensor Tensor::exp() const { return weft::exp(*this); }
Tensor Tensor::log() const { return weft::log(*this); }
Tensor Tensor::sqrt() const { return weft::sqrt(*this); }
Tensor Tensor::rsqrt() const { return weft::rsqrt(*this); }
Tensor Tensor::pow(double e) const { return weft::pow(*this, e); }
Tensor Tensor::relu() const { return weft::relu(*this); }
Tensor Tensor::sigmoid() const { return weft::sigmoid(*this); }
Tensor Tensor::tanh() const { return weft::tanh(*this); }
Tensor Tensor::matmul(const Tensor& o) const { return weft::matmul(*this, o); }
Tensor Tensor::sum() const { return weft::sum(*this); }
Tensor Tensor::sum(Shape dims, bool keepdim) const { return weft::sum(*this, std::move(dims), keepdim); }
Tensor Tensor::mean() const { return weft::mean(*this); }
Tensor Tensor::mean(Shape dims, bool keepdim) const { return weft::mean(*this, std::move(dims), keepdim); }
Tensor Tensor::max() const { return weft::max(*this); }
Tensor Tensor::min() const { return weft::min(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return weft::argmax(*this, dim, keepdim); }
Tensor Tensor::softmax(int64_t dim) const { return weft::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return weft::log_softmax(*this, dim); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const { return weft::clamp(*this, lo, hi); }

}  // namespace weft
