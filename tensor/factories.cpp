// Tensor creation. Every factory resolves its dtype and device the same way (resolve()): what the
// caller gave, else the innermost init-context frame. Random values are drawn on the CPU from a
// Generator, so a seed gives the same tensor on every device.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/enum_check.h"
#include "tensor/init_context.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {
namespace {

struct Resolved {
  DType dtype;
  Device device;
};

Resolved resolve(const TensorOptions& o, DType natural) {
  const Resolved r{o.dtype_.value_or(natural), o.device_.value_or(default_device())};
  detail::check_enum(r.dtype, kNumDTypes, "tensor factory", "DType");
  detail::check_enum(r.device.type, kNumDeviceTypes, "tensor factory", "DeviceType");
  return r;
}

Resolved resolve(const TensorOptions& o) { return resolve(o, default_dtype()); }

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

// Builds a CPU float64 tensor with `fill(i)` and converts it to the requested dtype and device.
template <class Fill>
Tensor generated(const Shape& shape, Resolved r, const TensorOptions& o, Fill fill) {
  Tensor cpu = detail::make_tensor(shape, DType::Float64, kCPU);
  double* p = cpu.data<double>();
  for (int64_t i = 0; i < cpu.numel(); ++i) p[i] = fill(i);
  Tensor out = detail::make_tensor(shape, r.dtype, r.device);
  if (r.device.is_cpu()) {
    detail::backend(kCPU).copy(cpu, out);
  } else {
    detail::backend(r.device).copy(detail::raw_cast(cpu, r.dtype), out);
  }
  return finish(out, o);
}

Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

bool is_whole(double v) { return std::trunc(v) == v; }

}  // namespace

Tensor empty(const Shape& shape, TensorOptions o) {
  const auto r = resolve(o);
  return finish(detail::make_tensor(shape, r.dtype, r.device), o);
}

Tensor full(const Shape& shape, double value, TensorOptions o) {
  const auto r = resolve(o);
  Tensor t = detail::make_tensor(shape, r.dtype, r.device);
  detail::backend(r.device).fill(t, value);
  return finish(t, o);
}

Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor scalar_tensor(double value, TensorOptions o) { return full({}, value, o); }

Tensor empty_like(const Tensor& t) { return detail::make_tensor(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, TensorOptions(t.dtype()).device(t.device()));
}
Tensor zeros_like(const Tensor& t) { return full_like(t, 0.0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1.0); }

Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  WEFT_CHECK(step != 0.0, "[arange] step must be nonzero");
  WEFT_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "[arange] bounds must be finite");
  WEFT_CHECK((end - start) / step >= 0.0, "[arange] upper bound and step sign are inconsistent: start ", start,
             ", end ", end, ", step ", step);
  const bool integral = is_whole(start) && is_whole(end) && is_whole(step);
  const auto r = resolve(o, integral ? DType::Int64 : default_dtype());
  // Counted in double and checked before the conversion: a count beyond int64 would otherwise
  // convert to garbage (undefined behaviour) and surface as a negative size.
  const double count = std::ceil((end - start) / step);
  WEFT_CHECK(count * static_cast<double>(itemsize(r.dtype)) < 0x1p63, "[arange] the range from ", start, " to ", end,
             " in steps of ", step, " has ", count, " values, more than a tensor can hold");
  const auto n = static_cast<int64_t>(count);
  return generated({n}, r, o, [=](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  WEFT_CHECK(steps >= 0, "[linspace] number of steps must be non-negative, got ", steps);
  const auto r = resolve(o);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Filled from both ends, as PyTorch does, so the last value is exactly `end`; a single step
  // is `start`.
  const int64_t halfway = std::max<int64_t>(steps / 2, 1);
  return generated({steps}, r, o, [=](int64_t i) {
    return i < halfway ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  });
}

Tensor eye(int64_t n, std::optional<int64_t> m_in, TensorOptions o) {
  const int64_t m = m_in.value_or(n);
  WEFT_CHECK(n >= 0 && m >= 0, "[eye] sizes must be non-negative, got ", n, " and ", m);
  const auto r = resolve(o);
  return generated({n, m}, r, o, [m](int64_t i) { return i / m == i % m ? 1.0 : 0.0; });
}

Tensor rand(const Shape& shape, TensorOptions o, Generator* gen) {
  const auto r = resolve(o);
  WEFT_CHECK(is_floating(r.dtype), "[rand] expected a floating dtype, got ", r.dtype);
  Generator::Draws g = pick(gen).draws();
  return generated(shape, r, o, [&g](int64_t) { return g.uniform(); });
}

Tensor randn(const Shape& shape, TensorOptions o, Generator* gen) {
  const auto r = resolve(o);
  WEFT_CHECK(is_floating(r.dtype), "[randn] expected a floating dtype, got ", r.dtype);
  Generator::Draws g = pick(gen).draws();
  return generated(shape, r, o, [&g](int64_t) { return g.normal(); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions o, Generator* gen) {
  WEFT_CHECK(low < high, "[randint] expected low < high, got low ", low, " and high ", high);
  const auto r = resolve(o, DType::Int64);
  Generator::Draws g = pick(gen).draws();
  const auto span = static_cast<uint64_t>(high - low);
  // Drawn as int64 directly: float64 would lose integers beyond 2^53.
  Tensor cpu = detail::make_tensor(shape, DType::Int64, kCPU);
  int64_t* p = cpu.data<int64_t>();
  for (int64_t i = 0; i < cpu.numel(); ++i) p[i] = low + static_cast<int64_t>(g.below(span));
  return finish(cpu.to(r.dtype).to(r.device), o);
}

Tensor randperm(int64_t n, Generator* gen) {
  WEFT_CHECK(n >= 0, "[randperm] n must be non-negative, got ", n);
  Generator::Draws g = pick(gen).draws();
  Tensor out = detail::make_tensor({n}, DType::Int64, kCPU);
  int64_t* p = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[static_cast<int64_t>(g.below(static_cast<uint64_t>(i + 1)))]);
  return out.to(default_device());
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  WEFT_CHECK(static_cast<int64_t>(values.size()) == detail::shape_numel(shape), "[from_vector] ", values.size(),
             " values cannot fill shape ", shape);
  const DType natural = std::is_floating_point_v<T> ? default_dtype() : DTypeOf<T>::value;
  const auto r = resolve(o, natural);
  Tensor cpu = detail::make_tensor(shape, DTypeOf<T>::value, kCPU);
  std::copy(values.begin(), values.end(), static_cast<T*>(cpu.data_ptr()));  // std::vector<bool> has no data()
  return finish(detail::raw_cast(cpu, r.dtype).to(r.device), o);
}

#define WEFT_INSTANTIATE_FOR(T) template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);
WEFT_INSTANTIATE_FOR_EACH_DTYPE()
#undef WEFT_INSTANTIATE_FOR

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, o);
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype) {
  WEFT_CHECK(data != nullptr || detail::shape_numel(shape) == 0, "[from_buffer] null data pointer");
  Tensor out = detail::make_tensor(shape, dtype, kCPU);
  if (out.nbytes() > 0) std::memcpy(out.data_ptr(), data, out.nbytes());
  return out;
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  WEFT_CHECK(data != nullptr || detail::shape_numel(shape) == 0, "[from_blob] null data pointer");
  // Memory on a device this build cannot compute on is refused here, not at the first op.
  detail::backend(device);
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = Storage::borrow(data, static_cast<size_t>(detail::shape_numel(shape)) * itemsize(dtype), device);
  impl->shape = shape;
  impl->strides = detail::contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor& Tensor::uniform_(double low, double high) {
  NoGradGuard no_grad;
  return copy_(weft::add(weft::mul(rand(shape(), TensorOptions(kFloat64)), high - low), low));
}

Tensor& Tensor::normal_(double mean, double std) {
  NoGradGuard no_grad;
  return copy_(weft::add(weft::mul(randn(shape(), TensorOptions(kFloat64)), std), mean));
}

}  // namespace weft
