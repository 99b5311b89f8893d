// Containers: Sequential (a chain of one-tensor modules), ModuleList (an indexed list) and
// ModuleDict (an ordered name -> module map). Each registers what it holds as children, so
// parameters, state_dict keys ("0.weight") and printing follow the order of insertion.
//
// Modules go in as holders (`nn::Linear(4, 2)`) or shared_ptrs; the same module added twice is
// one module with two names (its parameters are listed once).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

namespace detail {
// Fetches a container entry as M, naming the container and the entry when it is something else.
template <class M>
std::shared_ptr<M> cast_entry(const std::shared_ptr<Module>& module, const std::string& container,
                              const std::string& name) {
  auto typed = std::dynamic_pointer_cast<M>(module);
  WEFT_CHECK(typed != nullptr, "[", container, "] entry '", name, "' is a ", module->type_name(),
             ", not the requested type");
  return typed;
}
}  // namespace detail

class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  template <class... Modules>
  explicit SequentialImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }

  template <class M>
  void push_back(M&& module) {
    append(detail::as_module(std::forward<M>(module)));
  }
  // Runs the modules in order, each on the previous one's output.
  Tensor forward(const Tensor& input) override;

  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  template <class M>
  std::shared_ptr<M> at(size_t index) const {
    return detail::cast_entry<M>((*this)[index], "Sequential", std::to_string(index));
  }

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;

 private:
  void append(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  template <class... Modules>
  explicit ModuleListImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }

  template <class M>
  void push_back(M&& module) {
    append(detail::as_module(std::forward<M>(module)));
  }

  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  template <class M>
  std::shared_ptr<M> at(size_t index) const {
    return detail::cast_entry<M>((*this)[index], "ModuleList", std::to_string(index));
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const;
  std::vector<std::shared_ptr<Module>>::const_iterator end() const;

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<Module>& module) override;

 private:
  void append(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() = default;

  template <class M>
  void insert(std::string name, M&& module) {
    register_module(std::move(name), detail::as_module(std::forward<M>(module)));
  }

  size_t size() const { return named_children().size(); }
  bool contains(const std::string& name) const;
  std::vector<std::string> keys() const;
  std::shared_ptr<Module> operator[](const std::string& name) const;
  template <class M>
  std::shared_ptr<M> at(const std::string& name) const {
    return detail::cast_entry<M>((*this)[name], "ModuleDict", name);
  }
};

WEFT_MODULE(Sequential);
WEFT_MODULE(ModuleList);
WEFT_MODULE(ModuleDict);

}  // namespace weft::nn
