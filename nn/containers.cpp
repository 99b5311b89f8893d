// Containers.
#include "nn/containers.h"

namespace weft::nn {

void SequentialImpl::append(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& module : modules_) x = module->call(x);
  return x;
}

std::shared_ptr<Module> SequentialImpl::operator[](size_t index) const {
  WEFT_CHECK(index < modules_.size(), "[Sequential] index ", index, " is out of range for ", modules_.size(),
             " modules");
  return modules_[index];
}

void ModuleListImpl::append(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t index) const {
  WEFT_CHECK(index < modules_.size(), "[ModuleList] index ", index, " is out of range for ", modules_.size(),
             " modules");
  return modules_[index];
}

std::vector<std::shared_ptr<Module>>::const_iterator ModuleListImpl::begin() const { return modules_.begin(); }
std::vector<std::shared_ptr<Module>>::const_iterator ModuleListImpl::end() const { return modules_.end(); }

bool ModuleDictImpl::contains(const std::string& name) const {
  for (const auto& [key, module] : named_children())
    if (key == name) return true;
  return false;
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, module] : named_children()) out.push_back(key);
  return out;
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& name) const {
  for (const auto& [key, module] : named_children())
    if (key == name) return module;
  WEFT_FAIL("[ModuleDict] no module named '", name, "'");
}

// The registry names entries by index, so the index is the name.
void SequentialImpl::on_child_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  modules_.at(std::stoul(name)) = module;
}

void ModuleListImpl::on_child_replaced(const std::string& name, const std::shared_ptr<Module>& module) {
  modules_.at(std::stoul(name)) = module;
}

}  // namespace weft::nn
