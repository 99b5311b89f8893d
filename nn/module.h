// Module: the base of every layer. A module owns named parameters, buffers and child modules, kept
// in registration order, and everything that walks the tree (parameters(), state_dict(), to(),
// printing) derives from those three registries.
//
// Invariants:
// - Names are unique within a module across parameters, buffers and children, and contain no '.'.
//   Dotted names ("encoder.fc1.bias") are built by the walks, pre-order, a module's own tensors
//   before its children's, as PyTorch orders them.
// - Tensors are handles: the registry and a layer's member (`weight`) share one TensorImpl. Code
//   that changes a registered tensor's data goes through Tensor::set_data, so every handle —
//   including those an optimizer took from parameters() — sees the change. Never rebind a
//   registered member to a new tensor.
// - A tensor shared by several modules (weight tying) appears once in parameters() and
//   named_parameters(), under its first name; state_dict() lists it under every name.
//
// Layers are used through a ModuleHolder (nn/module_holder.h), so `nn::Linear fc(4, 2); fc(x)`
// reads naturally; the Impl classes hold the state.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/state_loader.h"
#include "nn/tensor_dict.h"
#include "tensor/tensor.h"

namespace weft::nn {

class Module;
using NamedTensor = std::pair<std::string, Tensor>;
using NamedModule = std::pair<std::string, std::shared_ptr<Module>>;

// What a non-strict load_state_dict() could not match, by dotted name.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     // in the module, not in the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, not in the module
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module();
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name shown when printing ("Linear"). The default derives it from the C++ type,
  // dropping namespaces and an "Impl" suffix, so user modules need not override it.
  virtual std::string type_name() const;
  // The text inside the parentheses when printing ("in_features=4, out_features=2, bias=true").
  virtual std::string extra_repr() const { return {}; }
  // The one-tensor forward that containers such as Sequential call. Layers with other
  // signatures define their own forward instead.
  virtual Tensor forward(const Tensor& input);

  // ---- forward hooks ----
  // Note [Forward hooks]: a module is run through call() (ModuleHolder's operator() and the
  // containers do this): the pre-forward hooks, forward, then the forward hooks, each of which may
  // replace the output. Calling forward() directly skips them, as in PyTorch. Sharded data
  // parallelism uses them to gather a unit's parameters just before its forward and free them
  // after. Hooks run in the order registered; the id removes one.
  using ForwardPreHook = std::function<void(Module& module)>;
  using ForwardHook = std::function<Tensor(Module& module, const Tensor& output)>;
  size_t register_forward_pre_hook(ForwardPreHook hook);
  size_t register_forward_hook(ForwardHook hook);
  void remove_forward_hook(size_t id);
  bool has_forward_hooks() const { return !pre_hooks_.empty() || !post_hooks_.empty(); }
  Tensor call(const Tensor& input);
  // The two halves of call(), for forwards with other signatures (ModuleHolder uses them); a
  // forward that does not return one Tensor passes an undefined one to the hooks.
  void run_forward_pre_hooks();
  Tensor run_forward_hooks(const Tensor& output);

  // ---- walking the tree ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<NamedTensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<NamedTensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<NamedModule> named_children() const;
  // This module (named "") and all its descendants, pre-order, each module once.
  std::vector<std::shared_ptr<Module>> modules() const;
  std::vector<NamedModule> named_modules() const;
  // Calls fn on every descendant, then on this module (children first, as PyTorch).
  Module& apply(const std::function<void(Module&)>& fn);

  // ---- modes and conversions ----
  virtual Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Converts floating parameters and buffers (and their gradients) to `dtype`, in place;
  // integer buffers and keep_dtype buffers keep their dtype. Uninitialized parameters change
  // the dtype they will get.
  Module& to(DType dtype);
  // Moves every parameter and buffer (integer ones too) to `device`, in place.
  Module& to(Device device);
  void zero_grad(bool set_to_none = true);
  // Sets requires_grad on every parameter; requires_grad_(false) freezes the module.
  Module& requires_grad_(bool requires_grad = true);

  // Puts `module` in the place of the direct child `name` (a precision plugin swapping a Linear for
  // a quantized one). Only the tree changes: a handle to the old child held elsewhere (a layer's
  // member such as `fc1`, an optimizer's parameters) still refers to the old module, which is no
  // longer in the tree. So a module whose forward calls its members directly keeps calling the
  // old layer; containers (Sequential, ModuleList) follow the swap.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // ---- state ----
  // Parameters and persistent buffers under dotted names; the tensors are detached aliases of
  // the module's (same memory). An uninitialized parameter appears as an uninitialized tensor.
  TensorDict state_dict() const;
  // Copies `state` into this module's tensors (converting dtype and device). Any shape mismatch,
  // and with `strict` any missing or unexpected key, fails before anything is copied, with one
  // error naming every offending key. Lazy modules materialise from the incoming shapes.
  IncompatibleKeys load_state_dict(const TensorDict& state, bool strict = true);
  // Throws the error load_state_dict would throw for `state`, changing nothing. An uninitialized
  // (lazy) parameter fits any shape here, as load_state_dict materialises it from the incoming one.
  void check_state_dict(const TensorDict& state, bool strict = true) const;

  // The state-dict hooks (Note [State dict hooks] in nn/state_loader.h): this module's own
  // entries, each key `prefix` + a name. The defaults save and load the registered parameters and
  // persistent buffers with save_tensor / load_tensor.
  virtual void save_own_state(const std::string& prefix, TensorDict& out) const;
  virtual void load_own_state(StateLoader& loader, const std::string& prefix);

  // The module tree, printed as PyTorch prints it.
  std::string to_string() const;

 protected:
  // Registers `tensor` (made to require grad unless requires_grad is false) and returns its
  // handle; an undefined tensor (an absent bias) is not registered and comes back undefined.
  Tensor register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // A non-persistent buffer is moved and converted with the module but left out of state_dict.
  // A keep_dtype buffer is one whose dtype is part of its meaning (an FP8 layer's float32 scales
  // and amax history in a bfloat16 model): to(dtype) leaves it as it is.
  Tensor register_buffer(std::string name, Tensor tensor, bool persistent = true, bool keep_dtype = false);
  std::shared_ptr<Module> register_module(std::string name, std::shared_ptr<Module> module);
  template <class M>
    requires std::is_base_of_v<Module, M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    register_module(std::move(name), std::static_pointer_cast<Module>(module));
    return module;
  }
  // Holders (nn/module_holder.h): `fc = register_module("fc", nn::Linear(4, 2));`
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  Holder register_module(std::string name, Holder holder) {
    register_module(std::move(name), std::static_pointer_cast<Module>(holder.ptr()));
    return holder;
  }

  // The default rules for one registered tensor, for hooks that handle only some of theirs:
  // save_tensor adds a detached alias (an uninitialized tensor stays uninitialized); load_tensor
  // takes `key`, checks it against `local` (shape, initialization) and defers the converting copy.
  static void save_tensor(const std::string& key, const Tensor& local, TensorDict& out);
  static void load_tensor(StateLoader& loader, const std::string& key, const Tensor& local);

  // Runs on every module of the tree before load_state_dict checks keys; `prefix` is this
  // module's dotted name plus '.' (empty for the root). Lazy modules materialise here.
  virtual void before_load_state_dict(const TensorDict& state, const std::string& prefix);

  // Called by replace_module after the registry holds the new child, so a module that keeps its
  // children in its own members too (containers) can follow.
  virtual void on_child_replaced(const std::string& /*name*/, const std::shared_ptr<Module>& /*module*/) {}

  // Makes this module's parameters, buffers and children the very handles of `other`'s (a lazy
  // module taking over its materialised twin's state).
  void adopt_registrations(const Module& other);

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
    bool keep_dtype = false;
  };

  void check_new_name(const std::string& name, const char* what) const;
  using Visitor = std::function<void(const std::string& path, const std::shared_ptr<Module>& module)>;
  // Pre-order walk from this module (path ""); each module once when `dedup`, else every path
  // (state_dict lists a shared module under each of its names).
  void walk(bool dedup, const Visitor& visit) const;
  std::vector<NamedTensor> named_tensors(bool buffers, bool recurse) const;
  std::shared_ptr<Module> self() const;
  // Runs every module's load_own_state hook on `loader` and returns what keeps the load from
  // going ahead, with the incompatible keys in `keys`.
  std::vector<std::string> gather_load(StateLoader& loader, bool strict, IncompatibleKeys& keys) const;
  [[noreturn]] void throw_load_errors(const std::vector<std::string>& errors) const;

  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<NamedModule> children_;
  bool training_ = true;
  std::vector<std::pair<size_t, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<size_t, ForwardHook>> post_hooks_;
  size_t next_hook_id_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

namespace detail {

// Note [Lazy adoption]
// A lazy module materialises by constructing its eager twin through the ordinary factory (so a
// module frame that replaces Linear replaces it here too) and then taking over the twin's
// tensors. Handles taken from the lazy module before its first forward (an optimizer built too
// early, a test holding `lazy->weight`) must end up being the materialised tensors, so the twin
// does not create its parameters afresh: while an AdoptionScope is alive on this thread, the
// first Module constructed (the twin) registers the lazy module's handles in place of the new
// tensors of the same name and kind, after giving them the new tensors' data with set_data. The
// adopted handle keeps its requires_grad flag (a lazy module frozen before materialising stays
// frozen). Initialisation then writes through those handles, drawing the same random numbers as
// an eager construction would.
class AdoptionScope {
 public:
  explicit AdoptionScope(const std::vector<NamedTensor>& parameters,
                         const std::vector<NamedTensor>& buffers);
  ~AdoptionScope();
  AdoptionScope(const AdoptionScope&) = delete;
  AdoptionScope& operator=(const AdoptionScope&) = delete;

  // The module that adopted the handles: the first one constructed in this scope.
  const Module* owner() const { return owner_; }

 private:
  friend class nn::Module;
  Tensor adopt(const Module* module, const std::string& name, const Tensor& fresh, bool buffer);

  std::vector<NamedTensor> parameters_;
  std::vector<NamedTensor> buffers_;
  const Module* owner_ = nullptr;
  AdoptionScope* previous_;
};

}  // namespace detail
}  // namespace weft::nn
