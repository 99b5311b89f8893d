// Module registries, tree walks, conversions, state dicts and printing.
#include "nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <set>
#include <typeinfo>
#include <unordered_set>

#include "tensor/autograd.h"

namespace weft::nn {
namespace {

// Note [Thread-local state] in tensor/init_context.h.
thread_local detail::AdoptionScope* current_adoption = nullptr;

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Indents every line but the first, so a child's multi-line repr nests under its "(name): ".
std::string indent_tail(const std::string& text, int spaces) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<size_t>(spaces), ' ');
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out;
}

}  // namespace

Module::Module() {
  if (current_adoption != nullptr && current_adoption->owner_ == nullptr) current_adoption->owner_ = this;
}

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                    std::free);
  std::string name = status == 0 ? demangled.get() : mangled;
  const size_t scope = name.rfind("::", name.find('<'));
  if (scope != std::string::npos) name = name.substr(scope + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.resize(name.size() - 4);
  return name;
}

Tensor Module::forward(const Tensor&) {
  WEFT_FAIL("[forward] ", type_name(), " has no forward(Tensor); call the forward it defines");
}

// ---- registration ----

void Module::check_new_name(const std::string& name, const char* what) const {
  WEFT_CHECK(!name.empty(), "[", what, "] the name must not be empty");
  WEFT_CHECK(name.find('.') == std::string::npos, "[", what, "] the name must not contain '.', got '", name,
             "'");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  auto slot_taken = [&](const std::vector<Slot>& list) {
    for (const auto& slot : list)
      if (slot.name == name) return true;
    return false;
  };
  WEFT_CHECK(!slot_taken(parameters_) && !slot_taken(buffers_) && !taken(children_), "[", what, "] ",
             type_name(), " already has a parameter, buffer or module named '", name, "'");
}

Tensor Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (!tensor.defined()) return tensor;
  WEFT_CHECK(tensor.is_leaf(), "[register_parameter] '", name, "' must be a leaf tensor; detach() it first");
  Tensor adopted = current_adoption ? current_adoption->adopt(this, name, tensor, false) : Tensor();
  if (adopted.defined()) {
    tensor = adopted;
  } else {
    tensor.requires_grad_(requires_grad);
  }
  parameters_.push_back({std::move(name), tensor, true});
  return tensor;
}

Tensor Module::register_buffer(std::string name, Tensor tensor, bool persistent, bool keep_dtype) {
  check_new_name(name, "register_buffer");
  if (!tensor.defined()) return tensor;
  Tensor adopted = current_adoption ? current_adoption->adopt(this, name, tensor, true) : Tensor();
  if (adopted.defined()) tensor = adopted;
  buffers_.push_back({std::move(name), tensor, persistent, keep_dtype});
  return tensor;
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  WEFT_CHECK(module != nullptr, "[replace_module] the replacement for '", name, "' is null");
  WEFT_CHECK(module.get() != this, "[replace_module] a module cannot be its own child");
  for (auto& [child_name, child] : children_) {
    if (child_name != name) continue;
    child = module;
    on_child_replaced(name, module);
    return;
  }
  WEFT_FAIL("[replace_module] expected a child named '", name, "' in ", type_name(), ", there is none");
}

std::shared_ptr<Module> Module::register_module(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  WEFT_CHECK(module != nullptr, "[register_module] module '", name, "' is null");
  WEFT_CHECK(module.get() != this, "[register_module] a module cannot be its own child");
  children_.emplace_back(std::move(name), module);
  return module;
}

void Module::adopt_registrations(const Module& other) {
  parameters_ = other.parameters_;
  buffers_ = other.buffers_;
  children_ = other.children_;
}

// ---- walks ----

std::shared_ptr<Module> Module::self() const {
  auto* me = const_cast<Module*>(this);
  if (auto owned = me->weak_from_this().lock()) return owned;
  // Not owned by a shared_ptr (a module on the stack): a non-owning handle to it.
  return std::shared_ptr<Module>(std::shared_ptr<Module>(), me);
}

void Module::walk(bool dedup, const Visitor& visit) const {
  std::unordered_set<const Module*> seen;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> go =
      [&](const std::string& p, const std::shared_ptr<Module>& m) {
        if (dedup && !seen.insert(m.get()).second) return;
        visit(p, m);
        for (const auto& [name, child] : m->children_) go(join(p, name), child);
      };
  go("", self());
}

std::vector<NamedTensor> Module::named_tensors(bool buffers, bool recurse) const {
  std::vector<NamedTensor> out;
  std::unordered_set<const weft::detail::TensorImpl*> seen;
  auto collect = [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
    for (const Slot& slot : buffers ? m->buffers_ : m->parameters_)
      if (seen.insert(slot.tensor.impl()).second) out.emplace_back(join(prefix, slot.name), slot.tensor);
  };
  if (recurse) {
    walk(true, collect);
  } else {
    collect("", self());
  }
  return out;
}

std::vector<NamedTensor> Module::named_parameters(bool recurse) const { return named_tensors(false, recurse); }
std::vector<NamedTensor> Module::named_buffers(bool recurse) const { return named_tensors(true, recurse); }

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<NamedModule> Module::named_children() const { return children_; }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<NamedModule> Module::named_modules() const {
  std::vector<NamedModule> out;
  walk(true, [&](const std::string& prefix, const std::shared_ptr<Module>& m) { out.emplace_back(prefix, m); });
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
  return *this;
}

// ---- modes and conversions ----

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
  return *this;
}

Module& Module::to(DType dtype) {
  WEFT_CHECK(is_floating(dtype), "[Module::to] expected a floating dtype, got ", dtype);
  auto convert = [dtype](Tensor t) {
    if (!t.is_floating_point() || t.dtype() == dtype) return;
    if (t.is_uninitialized()) {
      t.set_data(weft::detail::make_uninitialized(dtype, t.device(), false));
      return;
    }
    t.set_data(t.detach().to(dtype));
    if (t.grad().defined()) t.set_grad(t.grad().detach().to(dtype));
  };
  for (const Tensor& p : parameters()) convert(p);
  walk(true, [&](const std::string&, const std::shared_ptr<Module>& m) {
    for (const Slot& slot : m->buffers_)
      if (!slot.keep_dtype) convert(slot.tensor);
  });
  return *this;
}

Module& Module::to(Device device) {
  auto move = [device](Tensor t) {
    if (t.device() == device) return;
    if (t.is_uninitialized()) {
      t.set_data(weft::detail::make_uninitialized(t.dtype(), device, false));
      return;
    }
    t.set_data(t.detach().to(device));
    if (t.grad().defined()) t.set_grad(t.grad().detach().to(device));
  };
  for (const Tensor& p : parameters()) move(p);
  for (const Tensor& b : buffers()) move(b);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      p.grad().zero_();
    }
  }
}

Module& Module::requires_grad_(bool requires_grad) {
  for (Tensor p : parameters()) p.requires_grad_(requires_grad);
  return *this;
}

// ---- state ----

std::vector<NamedTensor> Module::state_entries() const {
  std::vector<NamedTensor> out;
  walk(false, [&](const std::string& p, const std::shared_ptr<Module>& m) {
    for (const Slot& slot : m->parameters_) out.emplace_back(join(p, slot.name), slot.tensor);
    for (const Slot& slot : m->buffers_)
      if (slot.persistent) out.emplace_back(join(p, slot.name), slot.tensor);
  });
  return out;
}

TensorDict Module::state_dict() const {
  const std::vector<NamedTensor> entries = state_entries();
  TensorDict out;
  for (auto& [name, t] : entries)
    out.insert(name, t.is_uninitialized() ? weft::detail::make_uninitialized(t.dtype(), t.device(), false)
                                          : t.detach());
  return out;
}

void Module::before_load_state_dict(const TensorDict&, const std::string&) {}

IncompatibleKeys Module::load_state_dict(const TensorDict& state, bool strict) {
  walk(false, [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
    m->before_load_state_dict(state, prefix.empty() ? prefix : prefix + ".");
  });

  const std::vector<NamedTensor> entries = state_entries();
  IncompatibleKeys result;
  std::vector<std::string> errors;
  std::set<std::string> expected;
  for (const auto& [name, local] : entries) {
    expected.insert(name);
    const Tensor* incoming = state.find(name);
    if (incoming == nullptr) {
      result.missing_keys.push_back(name);
    } else if (incoming->is_uninitialized() && !local.is_uninitialized()) {
      errors.push_back("'" + name +
                       "' is uninitialized in the state dict (it comes from a lazy module that has not run "
                       "forward); run a forward pass on the source module first");
    } else if (!incoming->is_uninitialized() && local.is_uninitialized()) {
      errors.push_back(weft::detail::cat("'", name, "' is uninitialized in the module and its shape could not be ",
                                         "inferred from the state dict's ", incoming->shape()));
    } else if (!local.is_uninitialized() && incoming->shape() != local.shape()) {
      errors.push_back(weft::detail::cat("shape mismatch for '", name, "': the module has ", local.shape(),
                                         ", the state dict has ", incoming->shape()));
    }
  }
  for (const auto& [name, t] : state)
    if (!expected.contains(name)) result.unexpected_keys.push_back(name);

  if (strict && !result.unexpected_keys.empty())
    errors.insert(errors.begin(), "unexpected keys: " + quoted_list(result.unexpected_keys));
  if (strict && !result.missing_keys.empty())
    errors.insert(errors.begin(), "missing keys: " + quoted_list(result.missing_keys));
  if (!errors.empty()) {
    std::string message = "[load_state_dict] cannot load the state dict into " + type_name() + ":";
    for (const auto& e : errors) message += "\n  " + e;
    throw Error(message);
  }

  NoGradGuard no_grad;
  for (const auto& [name, local] : entries) {
    const Tensor* incoming = state.find(name);
    if (incoming != nullptr && !incoming->is_uninitialized()) Tensor(local).copy_(*incoming);
  }
  return result;
}

// ---- printing ----

std::string Module::to_string() const {
  std::vector<std::string> lines;
  const std::string extra = extra_repr();
  size_t extra_lines = 0;
  for (size_t start = 0; !extra.empty() && start <= extra.size();) {
    const size_t end = std::min(extra.find('\n', start), extra.size());
    lines.push_back(extra.substr(start, end - start));
    ++extra_lines;
    start = end + 1;
  }
  for (const auto& [name, child] : children_)
    lines.push_back("(" + name + "): " + indent_tail(child->to_string(), 2));

  std::string out = type_name() + "(";
  if (lines.size() == 1 && extra_lines == 1) {
    out += lines[0];
  } else if (!lines.empty()) {
    for (const auto& line : lines) out += "\n  " + line;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.to_string(); }

// ---- Note [Lazy adoption] ----

namespace detail {

AdoptionScope::AdoptionScope(const std::vector<NamedTensor>& parameters, const std::vector<NamedTensor>& buffers)
    : parameters_(parameters), buffers_(buffers), previous_(current_adoption) {
  current_adoption = this;
}

AdoptionScope::~AdoptionScope() { current_adoption = previous_; }

Tensor AdoptionScope::adopt(const Module* module, const std::string& name, const Tensor& fresh, bool buffer) {
  if (module != owner_) return {};
  auto& held = buffer ? buffers_ : parameters_;
  for (auto it = held.begin(); it != held.end(); ++it) {
    if (it->first != name) continue;
    Tensor handle = it->second;
    held.erase(it);
    handle.set_data(fresh);
    if (!fresh.is_floating_point()) handle.requires_grad_(false);
    return handle;
  }
  return {};
}

}  // namespace detail
}  // namespace weft::nn
