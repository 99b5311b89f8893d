// Tensor: a cheap handle (one shared pointer) to a TensorImpl, which is a strided view
// (shape, strides, offset, dtype) into a shared Storage, plus the autograd fields.
//
// Copying a Tensor copies the handle, never the data: `Tensor b = a;` makes b the same tensor.
// View ops (view, transpose, narrow, ...) make a new TensorImpl over the same Storage, so an
// in-place write through one view is seen by all of them and bumps the storage's version.
//
// A tensor may be *uninitialized* (a lazy module's parameter before its first forward): it knows
// the dtype and device it will have but not its shape; asking for shape or data throws until
// materialize_() gives it one. See nn/lazy.h.
//
// Most ops are free functions in tensor/ops.h; the methods here forward to them so code reads
// like PyTorch (`x.matmul(w).relu().sum()`).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace weft {

using Shape = std::vector<int64_t>;

namespace autograd {
class Node;
}
namespace detail {
struct TensorImpl;
}

// Optional dtype / device / requires_grad for factories. Unset fields come from the innermost
// init-context frame (tensor/init_context.h). Converts implicitly from a DType or a Device.
struct TensorOptions {
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}      // NOLINT: implicit by design
  TensorOptions(Device d) : device_(d) {}    // NOLINT
  TensorOptions(const char* d) : device_(Device(d)) {}  // NOLINT
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

class Tensor {
 public:
  using PostAccumulateGradHook = std::function<void(Tensor&)>;

  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  detail::TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const { return impl_; }
  // True when both handles name the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- metadata ----
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_uninitialized() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(dtype()); }
  const std::shared_ptr<Storage>& storage() const;

  // ---- data access (CPU tensors) ----
  void* data_ptr() const;  // first element of this view
  template <class T>
  T* data() const {
    WEFT_CHECK(DTypeOf<T>::value == dtype(), "[data] requested ", DTypeOf<T>::value,
               " pointer from a ", dtype(), " tensor");
    return static_cast<T*>(data_ptr());
  }
  // The single element of a one-element tensor, converted to T.
  template <class T = double>
  T item() const;
  // All elements in row-major order, converted to T (copies to the CPU if needed).
  template <class T>
  std::vector<T> to_vector() const;

  // ---- conversion and copies ----
  Tensor to(DType dtype) const;  // returns *this when already of that dtype
  Tensor to(Device device) const;
  Tensor clone() const;
  Tensor contiguous() const;  // returns *this when already contiguous
  Tensor& copy_(const Tensor& src);  // broadcasting, converting copy into this tensor
  // Replaces this tensor's data with other's (shape, dtype, storage); handles stay valid.
  // Used by Module::to and by lazy materialisation. Not recorded by autograd.
  void set_data(const Tensor& other);
  // Gives an uninitialized tensor its shape and fresh (uninitialized) memory.
  void materialize_(const Shape& shape);

  // ---- views (share storage) ----
  Tensor view(Shape shape) const;  // one dimension may be -1
  // The same bytes as another dtype (PyTorch's view(dtype), never requiring grad); the last dim
  // scales by the item-size ratio, needing stride 1. view({}) lands here: use view(Shape{}).
  Tensor view(DType dtype) const;
  Tensor reshape(Shape shape) const;  // a view when strides allow, else a copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // 2-D transpose
  Tensor permute(Shape dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(Shape shape) const;  // -1 keeps a size
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor grad() const;  // undefined Tensor when none
  void set_grad(const Tensor& grad);  // pass Tensor() to set it to none
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  // Computes gradients of this tensor w.r.t. the graph's leaves. `gradient` may be omitted only
  // for one-element tensors.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same data, no history
  uint64_t version() const { return storage()->version(); }
  // Runs after a gradient has been accumulated into this leaf's .grad (data parallel uses it).
  void register_post_accumulate_grad_hook(PostAccumulateGradHook hook);

  // ---- ops as methods (see tensor/ops.h for the full set) ----
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor pow(double exponent) const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor matmul(const Tensor& other) const;
  Tensor sum() const;
  Tensor sum(Shape dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(Shape dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;

  // In-place: bump the version counter; refuse leaves that require grad while grad mode is on.
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double value);
  Tensor& sub_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double value);
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& clamp_(std::optional<double> min, std::optional<double> max);
  Tensor& uniform_(double low, double high);
  Tensor& normal_(double mean = 0.0, double std = 1.0);

  std::string to_string() const;  // PyTorch-style printing

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

namespace detail {

// Note [Tensor fields]: metadata and autograd fields live together because weft has one kind of
// tensor. `is_view` marks tensors made by a view op, so in-place autograd can refuse the cases
// it does not track.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  Device device;  // where an uninitialized tensor will live; equals storage->device() otherwise
  bool is_view = false;
  bool uninitialized = false;

  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::weak_ptr<autograd::Node> grad_accumulator;
  std::vector<Tensor::PostAccumulateGradHook> post_accumulate_grad_hooks;
};

// Row-major strides for a shape.
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); names `op` in the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// A new tensor over fresh, uninitialized memory.
Tensor make_tensor(const Shape& shape, DType dtype, Device device);
// A view of base's storage with new geometry (marks it as a view).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// A tensor that knows its dtype and device but not its shape (see lazy modules).
Tensor make_uninitialized(DType dtype, Device device, bool requires_grad);

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace weft
