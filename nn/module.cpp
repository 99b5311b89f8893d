// Module registries, tree walks, conversions, state dicts and printing.
#include "nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <typeinfo>
#include <unordered_set>

#include "nn/tied_state.h"
#include "tensor/autograd.h"
#include "tensor/ops.h"

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

size_t Module::register_forward_pre_hook(ForwardPreHook hook) {
  pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

size_t Module::register_forward_hook(ForwardHook hook) {
  post_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_hook(size_t id) {
  std::erase_if(pre_hooks_, [id](const auto& h) { return h.first == id; });
  std::erase_if(post_hooks_, [id](const auto& h) { return h.first == id; });
}

void Module::run_forward_pre_hooks() {
  for (size_t i = 0; i < pre_hooks_.size(); ++i) pre_hooks_[i].second(*this);
}

Tensor Module::run_forward_hooks(const Tensor& output) {
  Tensor out = output;
  for (size_t i = 0; i < post_hooks_.size(); ++i) out = post_hooks_[i].second(*this, out);
  return out;
}

Tensor Module::call(const Tensor& input) {
  if (!has_forward_hooks()) return forward(input);
  run_forward_pre_hooks();
  return run_forward_hooks(forward(input));
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

void Module::save_tensor(const std::string& key, const Tensor& local, TensorDict& out) {
  out.insert(key, local.is_uninitialized() ? weft::detail::make_uninitialized(local.dtype(), local.device(), false)
                                           : local.detach());
}

void Module::load_tensor(StateLoader& loader, const std::string& key, const Tensor& local) {
  const Tensor* incoming = loader.take(key);
  if (incoming == nullptr) {
    loader.missing(key);
  } else if (incoming->is_uninitialized() && !local.is_uninitialized()) {
    loader.error("'" + key +
                 "' is uninitialized in the state dict (it comes from a lazy module that has not run "
                 "forward); run a forward pass on the source module first");
  } else if (!incoming->is_uninitialized() && local.is_uninitialized()) {
    if (!loader.check_only())
      loader.error(weft::detail::cat("'", key, "' is uninitialized in the module and its shape could not be ",
                                     "inferred from the state dict's ", incoming->shape()));
  } else if (!local.is_uninitialized() && incoming->shape() != local.shape()) {
    loader.error(weft::detail::cat("shape mismatch for '", key, "': the module has ", local.shape(),
                                   ", the state dict has ", incoming->shape()));
  } else if (!incoming->is_uninitialized()) {
    const Tensor source = *incoming;
    loader.defer([local, source] { Tensor(local).copy_(source); });
  }
}

void Module::save_own_state(const std::string& prefix, TensorDict& out) const {
  for (const Slot& slot : parameters_) save_tensor(prefix + slot.name, slot.tensor, out);
  for (const Slot& slot : buffers_)
    if (slot.persistent) save_tensor(prefix + slot.name, slot.tensor, out);
}

void Module::load_own_state(StateLoader& loader, const std::string& prefix) {
  for (const Slot& slot : parameters_) load_tensor(loader, prefix + slot.name, slot.tensor);
  for (const Slot& slot : buffers_)
    if (slot.persistent) load_tensor(loader, prefix + slot.name, slot.tensor);
}

TensorDict Module::state_dict() const {
  TensorDict out;
  walk(false, [&](const std::string& path, const std::shared_ptr<Module>& m) {
    m->save_own_state(path.empty() ? path : path + ".", out);
  });
  return out;
}

void Module::before_load_state_dict(const TensorDict&, const std::string&) {}

std::vector<std::string> Module::gather_load(StateLoader& loader, bool strict, IncompatibleKeys& result) const {
  walk(false, [&](const std::string& path, const std::shared_ptr<Module>& m) {
    m->load_own_state(loader, path.empty() ? path : path + ".");
  });
  result = {loader.missing_keys(), loader.unexpected_keys()};
  std::vector<std::string> errors = loader.errors();
  // Names of one tied tensor are loaded one after the other into the same memory; PyTorch keeps
  // whichever comes last. Differing values are refused instead: the result would depend on order.
  const TensorDict& state = loader.state();
  for (const auto& group : tied_groups(state_dict())) {
    const Tensor* first = nullptr;
    std::string first_name;
    for (const std::string& name : group) {
      const Tensor* t = state.find(name);
      if (t == nullptr || t->is_uninitialized()) continue;
      if (first == nullptr) {
        first = t;
        first_name = name;
      } else if (!(t->storage() == first->storage() && t->offset() == first->offset()) &&
                 t->shape() == first->shape() && !allclose(*first, *t, 0.0, 0.0, true)) {
        errors.push_back("'" + first_name + "' and '" + name +
                         "' are one tied tensor in the module, but the state dict gives them different values");
      }
    }
  }
  if (strict && !result.unexpected_keys.empty())
    errors.insert(errors.begin(), "unexpected keys: " + quoted_list(result.unexpected_keys));
  if (strict && !result.missing_keys.empty())
    errors.insert(errors.begin(), "missing keys: " + quoted_list(result.missing_keys));
  return errors;
}

void Module::throw_load_errors(const std::vector<std::string>& errors) const {
  std::string message = "[load_state_dict] cannot load the state dict into " + type_name() + ":";
  for (const auto& e : errors) message += "\n  " + e;
  throw Error(message);
}

void Module::check_state_dict(const TensorDict& state, bool strict) const {
  // The hooks only defer their changes, so running them and dropping the loader changes nothing.
  StateLoader loader(state, StateLoader::Mode::kCheckOnly);
  IncompatibleKeys keys;
  const std::vector<std::string> errors = gather_load(loader, strict, keys);
  if (!errors.empty()) throw_load_errors(errors);
}

IncompatibleKeys Module::load_state_dict(const TensorDict& state, bool strict) {
  walk(false, [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
    m->before_load_state_dict(state, prefix.empty() ? prefix : prefix + ".");
  });

  StateLoader loader(state);
  IncompatibleKeys result;
  const std::vector<std::string> errors = gather_load(loader, strict, result);
  if (!errors.empty()) throw_load_errors(errors);
  NoGradGuard no_grad;
  loader.apply();
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
