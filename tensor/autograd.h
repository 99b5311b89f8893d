// Define-by-run reverse-mode autograd.
//
// Every op that produces a tensor from inputs that require grad records one Node: the backward
// rule (a closure over what it saved) and, per input, the Node that input's gradient flows to
// next (its grad_fn, or an AccumulateGrad for a leaf). backward() walks that graph from the root
// in dependency order, summing the gradients that meet at a Node before running it.
//
// The engine, not each rule, adapts a gradient to its input (Note [Gradient shape and dtype]):
// a gradient whose shape is the broadcast shape is summed back to the input's shape, and one of
// another dtype (autocast ran the op in bfloat16, the weight is float32) is cast to the input's
// dtype. Rules therefore return gradients in the op's own output geometry.
//
// Note [Saved tensors versions]: a rule that needs an input or output saves it as a SavedTensor,
// which remembers the storage version at save time. If the tensor is modified in place before
// backward, unpacking raises instead of silently using the new values.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace weft::autograd {

class Node {
 public:
  struct Input {
    std::shared_ptr<Node> next;  // null when that input needs no gradient
    Shape shape;
    DType dtype;
  };

  // Releases the graph behind this node iteratively: a chain of many thousand nodes would
  // otherwise be freed by one nested destructor call per node and overflow the stack.
  virtual ~Node();
  // One gradient per input (undefined where an input gets none).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  // Frees what the rule saved, after a backward without retain_graph.
  virtual void release_saved() {}
  // For a node of one input whose gradient is grad_output placed into zeros shaped like the input
  // (tensor/autograd_region.h: a view's region, index_select's rows): adds it instead into
  // `input_grad`, a gradient of the whole input that only the engine holds. False where the node
  // cannot (the engine then calls apply).
  virtual bool add_into(const Tensor& /*grad_output*/, Tensor& /*input_grad*/) const { return false; }

  std::vector<Input> inputs;
};

// Accumulates into a leaf's .grad and runs its post-accumulate hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<detail::TensorImpl>& leaf) : leaf_(leaf) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::weak_ptr<detail::TensorImpl> leaf_;
};

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  // Returns the saved tensor; throws if it was modified in place since it was saved.
  const Tensor& unpack() const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;  // detached alias: same storage, no grad_fn (so no reference cycles)
  uint64_t version_ = 0;
};

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// True when grad mode is on and any input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Attaches a Node named `name` (printed as `<name>Backward`) to `output`.
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward);

// The engine. `gradient` has the root's shape.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// Runs `callback` once the backward pass running on this thread has finished its last node,
// before backward() returns (PyTorch's queue_callback). Data-parallel wrappers finish their
// gradient reductions here. Callbacks run in the order queued, and may queue more; a backward
// that throws drops them. Only valid inside a backward pass (from a rule or a hook).
void queue_callback(std::function<void()> callback);

bool grad_mode_enabled();

// Disables graph recording in a scope (optimizer steps, evaluation, inside backward rules).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Re-enables recording inside a NoGradGuard scope.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace weft::autograd

namespace weft {
using autograd::NoGradGuard;
}
