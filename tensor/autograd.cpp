// The autograd engine: graph recording, the backward pass, gradient accumulation into leaves.
//
// run_backward first counts, for every Node reachable from the root, how many edges lead into
// it; a Node runs only once all of them have delivered their gradient (Kahn's algorithm), so
// each Node runs exactly once with the full sum. Rules run with grad mode off: weft does not
// build graphs of graphs (no double backward). They also run with autocast off, so a rule's
// products keep the dtypes the forward saved instead of being re-cast.
#include "tensor/autograd.h"

#include <unordered_map>

#include "tensor/autograd_region.h"
#include "tensor/backend.h"

#include "tensor/autocast_state.h"
#include "tensor/ops.h"

namespace weft::autograd {
namespace {

// Note [Thread-local state] in tensor/init_context.h.
thread_local bool grad_enabled = true;
// The callbacks of the backward pass running on this thread (null outside one); Note
// [Thread-local state] in tensor/init_context.h.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

// Installs a fresh callback list for one backward pass and restores the outer one (a backward
// run from inside a hook) when the pass ends, normally or not.
class CallbackScope {
 public:
  CallbackScope() : previous_(t_callbacks) { t_callbacks = &callbacks_; }
  ~CallbackScope() { t_callbacks = previous_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

  void run_all() {
    for (size_t i = 0; i < callbacks_.size(); ++i) {
      auto callback = std::move(callbacks_[i]);  // callbacks_ may grow while it runs
      callback();
    }
  }

 private:
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::function<void()>>* previous_;
};

// A closure-backed Node: what record() attaches.
class FunctionNode final : public Node {
 public:
  FunctionNode(const char* name, BackwardFn fn) : name_(name), fn_(std::move(fn)) {}

  std::vector<Tensor> apply(const Tensor& grad_output) override {
    WEFT_CHECK(fn_ != nullptr, "[backward] trying to backward through the graph a second time (",
               name(), " already freed its saved tensors); pass retain_graph=true to the first backward");
    return fn_(grad_output);
  }
  std::string name() const override { return std::string(name_) + "Backward"; }
  void release_saved() override { fn_ = nullptr; }

 private:
  const char* name_;
  BackwardFn fn_;
};

// A region view's Node (tensor/autograd_region.h).
class RegionViewNode final : public Node {
 public:
  RegionViewNode(const char* name, std::function<Tensor(const Tensor&)> region)
      : name_(name), region_(std::move(region)) {}

  // The gradient of the whole input: zeros, with the view's gradient in its region.
  std::vector<Tensor> apply(const Tensor& grad_output) override {
    Tensor input_grad = zeros(inputs[0].shape, TensorOptions(grad_output.dtype()).device(grad_output.device()));
    Tensor target = region_(input_grad);
    detail::backend(grad_output.device()).copy(grad_output, target);
    return {input_grad};
  }
  bool add_into(const Tensor& grad_output, Tensor& input_grad) const override {
    region_(input_grad).add_(grad_output);
    return true;
  }

  std::string name() const override { return std::string(name_) + "Backward"; }

 private:
  const char* name_;
  std::function<Tensor(const Tensor&)> region_;
};

// A scatter's Node (tensor/autograd_region.h): the input's gradient is the output's added into
// zeros shaped like the input, or into a gradient of the input the engine already holds.
class ScatterNode final : public Node {
 public:
  ScatterNode(const char* name, ScatterFn add) : name_(name), add_(std::move(add)) {}

  std::vector<Tensor> apply(const Tensor& grad_output) override {
    Tensor input_grad = zeros(inputs[0].shape, TensorOptions(grad_output.dtype()).device(grad_output.device()));
    add_(grad_output, input_grad);
    return {input_grad};
  }
  bool add_into(const Tensor& grad_output, Tensor& input_grad) const override {
    add_(grad_output, input_grad);
    return true;
  }
  std::string name() const override { return std::string(name_) + "Backward"; }
  void release_saved() override { add_ = nullptr; }

 private:
  const char* name_;
  ScatterFn add_;
};

// Whether the engine's gradient buffer for an input may be added to in place: the engine holds
// the only reference to it and to its memory, and it has the input's geometry (a rule may return
// one tensor for two inputs, as add does, or a saved tensor's storage; those are left alone).
bool owned_buffer(const Tensor& buffer, const Node::Input& input) {
  return buffer.impl_ptr().use_count() == 1 && buffer.storage().use_count() == 1 && buffer.is_contiguous() &&
         !buffer.requires_grad() && buffer.shape() == input.shape && buffer.dtype() == input.dtype;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  auto* impl = t.impl();
  auto acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return acc;
}

// Note [Gradient shape and dtype]: rules return gradients in the geometry of the op's output;
// here they are summed back over broadcast dims and cast to the input's dtype.
Tensor adapt_gradient(Tensor g, const Node::Input& input, const Node& node) {
  if (g.shape() != input.shape) {
    WEFT_CHECK(static_cast<int64_t>(g.numel()) >= detail::shape_numel(input.shape) || g.numel() == 1,
               "[backward] ", node.name(), " returned a gradient of shape ", g.shape(),
               " for an input of shape ", input.shape);
    g = sum_to(g, input.shape);
  }
  if (g.dtype() != input.dtype) g = g.to(input.dtype);
  return g;
}

}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> orphans;
  for (auto& in : inputs)
    if (in.next) orphans.push_back(std::move(in.next));
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    // The last owner takes over n's edges before n dies, so n's own destructor has none to follow.
    if (n.use_count() == 1)
      for (auto& in : n->inputs)
        if (in.next) orphans.push_back(std::move(in.next));
  }
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  auto leaf_impl = leaf_.lock();
  if (!leaf_impl) return {};
  Tensor leaf(leaf_impl);
  Tensor existing = leaf.grad();
  if (existing.defined()) {
    existing.add_(grad_output);  // in place: optimizers hold on to .grad between steps
  } else if (grad_output.impl_ptr().use_count() == 1 && grad_output.storage().use_count() == 1 &&
             grad_output.is_contiguous() && !grad_output.requires_grad()) {
    // Nothing else holds this gradient or its memory (the engine drops it after this call):
    // it becomes .grad as it is, with no copy.
    leaf.set_grad(grad_output);
  } else {
    // A fresh contiguous copy: the incoming gradient may alias another leaf's or be expanded.
    leaf.set_grad(grad_output.clone());
  }
  for (auto& hook : leaf_impl->post_accumulate_grad_hooks) hook(leaf);
  return {};
}

SavedTensor::SavedTensor(const Tensor& tensor) : tensor_(tensor.detach()), version_(tensor.version()) {}

const Tensor& SavedTensor::unpack() const {
  WEFT_CHECK(tensor_.version() == version_,
             "[autograd] one of the tensors needed for gradient computation has been modified by an "
             "in-place operation: it was saved at version ", version_, " and is now at version ",
             tensor_.version(), "; clone it before modifying it, or modify it after backward");
  return tensor_;
}

bool grad_mode_enabled() { return grad_enabled; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Node::Input in{gradient_edge(t), {}, DType::Float32};
    if (in.next) {
      in.shape = t.shape();
      in.dtype = t.dtype();
    }
    node->inputs.push_back(std::move(in));
  }
  auto* impl = output.impl();
  impl->grad_fn = std::move(node);
  impl->requires_grad = true;
}

namespace {

// Makes `node`, whose one input is `input`, the grad_fn of `output`.
void attach_one_input(std::shared_ptr<Node> node, Tensor& output, const Tensor& input) {
  node->inputs.push_back(Node::Input{gradient_edge(input), input.shape(), input.dtype()});
  auto* impl = output.impl();
  impl->grad_fn = std::move(node);
  impl->requires_grad = true;
}

}  // namespace

void record_region_view(const char* name, Tensor& output, const Tensor& input,
                        std::function<Tensor(const Tensor&)> region) {
  if (needs_grad({&input})) attach_one_input(std::make_shared<RegionViewNode>(name, std::move(region)), output, input);
}

void record_scatter(const char* name, Tensor& output, const Tensor& input, ScatterFn add) {
  if (needs_grad({&input})) attach_one_input(std::make_shared<ScatterNode>(name, std::move(add)), output, input);
}

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  WEFT_CHECK(root.defined(), "[backward] called on an undefined tensor");
  WEFT_CHECK(root.requires_grad(),
             "[backward] the tensor does not require grad and has no grad_fn: nothing to differentiate");
  Tensor seed = gradient;
  if (!seed.defined()) {
    WEFT_CHECK(root.numel() == 1, "[backward] grad can be implicitly created only for one-element "
               "outputs; got shape ", root.shape(), ", pass a gradient of that shape");
    seed = ones_like(root);
  } else {
    WEFT_CHECK(seed.shape() == root.shape(), "[backward] expected a gradient of shape ", root.shape(),
               ", got ", seed.shape());
  }

  NoGradGuard no_grad;
  detail::AutocastOffGuard autocast_off;
  CallbackScope callbacks;
  const std::shared_ptr<Node> start = gradient_edge(root);

  // Count the edges into every reachable node.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack{start.get()};
  pending[start.get()] = 0;
  std::vector<Node*> visited;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    visited.push_back(n);
    for (const auto& in : n->inputs) {
      if (!in.next) continue;
      auto [it, inserted] = pending.try_emplace(in.next.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(in.next.get());
    }
  }

  std::unordered_map<Node*, Tensor> buffers;
  buffers[start.get()] = seed.dtype() == root.dtype() ? seed : seed.to(root.dtype());
  std::vector<Node*> ready{start.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor grad = std::move(buffers[n]);
    buffers.erase(n);
    std::vector<Tensor> grads;
    const bool one_input = n->inputs.size() == 1 && n->inputs[0].next;
    const auto waiting = one_input ? buffers.find(n->inputs[0].next.get()) : buffers.end();
    const bool added = waiting != buffers.end() && owned_buffer(waiting->second, n->inputs[0]) &&
                       grad.dtype() == n->inputs[0].dtype && n->add_into(grad, waiting->second);
    if (!added) grads = n->apply(grad);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const auto& in = n->inputs[i];
      if (!in.next) continue;
      Node* next = in.next.get();
      if (i < grads.size() && grads[i].defined()) {
        Tensor g = adapt_gradient(grads[i], in, *n);
        auto it = buffers.find(next);
        if (it == buffers.end()) buffers.emplace(next, std::move(g));
        else if (owned_buffer(it->second, in) && g.shape() == in.shape && g.dtype() == in.dtype) it->second.add_(g);
        else it->second = add(it->second, g);
      }
      if (--pending[next] == 0) {
        if (buffers.count(next)) ready.push_back(next);
        else {
          // No gradient reached it: its own inputs will not get one through it either.
          std::vector<Node*> skip{next};
          while (!skip.empty()) {
            Node* s = skip.back();
            skip.pop_back();
            for (const auto& sin : s->inputs)
              if (sin.next && --pending[sin.next.get()] == 0) {
                if (buffers.count(sin.next.get())) ready.push_back(sin.next.get());
                else skip.push_back(sin.next.get());
              }
          }
        }
      }
    }
  }
  if (!retain_graph)
    for (Node* n : visited) n->release_saved();
  callbacks.run_all();
}

void queue_callback(std::function<void()> callback) {
  WEFT_CHECK(t_callbacks != nullptr, "[queue_callback] can only be called during a backward pass");
  t_callbacks->push_back(std::move(callback));
}

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(grad_enabled) { grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { grad_enabled = previous_; }

}  // namespace weft::autograd
