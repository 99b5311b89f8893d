// ModuleHolder: the value-semantics handle through which layers are used, as in libtorch's C++
// frontend. `nn::Linear fc(784, 512)` is a holder of a std::shared_ptr<LinearImpl>; `fc->weight`
// reaches the Impl, `fc(x)` calls its forward, and copying the holder shares the module (so the
// same layer can sit in a Sequential and in a member).
//
// A holder is never silently empty: it is built from the Impl's constructor arguments, from an
// existing std::shared_ptr<Impl>, or explicitly from nullptr (`nn::Linear fc{nullptr};`, to be
// assigned later); using an empty holder throws.
//
// WEFT_MODULE(Name) declares the holder `Name` for a class `NameImpl`. Layers whose construction
// goes through a factory (Linear, LayerNorm: see nn/module_init_context.h) write their holder by
// hand instead, so that no constructor can bypass the factory.
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "nn/module.h"

namespace weft::nn {

template <class Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;

  // Builds Impl with no arguments (only where Impl has a default constructor).
  ModuleHolder()
    requires std::is_default_constructible_v<Impl>
      : impl_(std::make_shared<Impl>()) {}
  ModuleHolder(std::nullptr_t) {}  // NOLINT: an empty holder, assigned later
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT: implicit by design

  // Builds Impl from the arguments. A single holder of the same kind is a copy, not an argument.
  template <class Head, class... Tail>
    requires(std::is_constructible_v<Impl, Head, Tail...> &&
             !(sizeof...(Tail) == 0 && std::is_base_of_v<ModuleHolder, std::decay_t<Head>>))
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Impl>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    WEFT_CHECK(impl_ != nullptr, "[ModuleHolder] the module holder is empty (built from nullptr)");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  // Calls the module's forward with the given arguments, between its forward hooks (Note
  // [Forward hooks] in nn/module.h).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    Impl* m = get();
    using Result = decltype(m->forward(std::forward<Args>(args)...));
    if (!m->has_forward_hooks()) return m->forward(std::forward<Args>(args)...);
    m->run_forward_pre_hooks();
    if constexpr (std::is_same_v<std::decay_t<Result>, Tensor>) {
      return Result(m->run_forward_hooks(m->forward(std::forward<Args>(args)...)));
    } else {
      Result out = m->forward(std::forward<Args>(args)...);
      m->run_forward_hooks(Tensor());
      return out;
    }
  }

 private:
  std::shared_ptr<Impl> impl_;
};

template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& holder) {
  return os << *holder;
}

namespace detail {

// The module behind a holder or a shared_ptr, as the base type containers store.
template <class Impl>
std::shared_ptr<Module> as_module(const ModuleHolder<Impl>& holder) {
  WEFT_CHECK(!holder.is_empty(), "[ModuleHolder] cannot add an empty module holder");
  return holder.ptr();
}
template <class M>
  requires std::is_base_of_v<Module, M>
std::shared_ptr<Module> as_module(std::shared_ptr<M> module) {
  return module;
}

}  // namespace detail
}  // namespace weft::nn

#define WEFT_MODULE(Name)                                             \
  class Name : public ::weft::nn::ModuleHolder<Name##Impl> {          \
   public:                                                            \
    using ::weft::nn::ModuleHolder<Name##Impl>::ModuleHolder;         \
  }
