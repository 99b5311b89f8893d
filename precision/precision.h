// Precision: the base of every precision plugin, and the plugin for "32-true" (plain float32).
//
// A plugin is the one object that decides, for a training loop, in which dtype modules are
// stored (convert_module, module_init_context), tensors are created (tensor_init_context), the
// forward runs (forward_context, convert_input, convert_output), and how backward and the
// optimizer step are done (loss scaling). Every hook has the reference default (§2): identity,
// an empty Context, a plain backward and step, an empty state. Subclasses override what differs.
//
// Note [Init contexts]: tensor_init_context() pushes only a tensor frame (dtype/device of new
// tensors); module_init_context() pushes the tensor frame and, for plugins that replace layers, a
// module frame (nn/module_init_context.h). So under tensor_init_context an nn::Linear is always
// the built-in Linear, under module_init_context it may be the plugin's layer — Lightning's
// #18703 split.
//
// convert_input / convert_output walk nested containers (precision/convert.h) and call the
// per-tensor virtuals, so plugins override one function per direction.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "nn/tensor_dict.h"
#include "precision/context.h"
#include "precision/convert.h"
#include "precision/precision_mode.h"
#include "tensor/tensor.h"

namespace weft::precision {

class Precision {
 public:
  Precision() = default;
  virtual ~Precision() = default;
  Precision(const Precision&) = delete;
  Precision& operator=(const Precision&) = delete;

  // The precision this plugin implements, and the string the reference's `.precision` attribute
  // reads ("32-true"): the mode's name, except where a plugin class says otherwise (the
  // transformer-engine plugin reads "transformer-engine" for float16 weights too).
  virtual PrecisionMode mode() const { return PrecisionMode::Fp32True; }
  virtual std::string precision() const { return std::string(precision_name(mode())); }

  // Casts or rewrites `module` in place for this precision.
  virtual void convert_module(nn::Module& module);
  // How plain tensors are created (dtype, device). Never changes which layers are built.
  virtual Context tensor_init_context();
  // How modules are created: the tensor frame, plus layer replacement where the plugin has one.
  virtual Context module_init_context();
  // Wraps the model's forward (and Fabric::autocast).
  virtual Context forward_context();

  virtual Tensor convert_input_tensor(const Tensor& tensor) { return tensor; }
  virtual Tensor convert_output_tensor(const Tensor& tensor) { return tensor; }
  template <class T>
  T convert_input(const T& data) {
    return apply_to_tensors(data, [this](const Tensor& t) { return convert_input_tensor(t); });
  }
  template <class T>
  T convert_output(const T& data) {
    return apply_to_tensors(data, [this](const Tensor& t) { return convert_output_tensor(t); });
  }

  // `module` may be null (a loss not tied to one model).
  virtual void pre_backward(const Tensor& tensor, nn::Module* module);
  virtual void backward(const Tensor& tensor, nn::Module* module);
  virtual void post_backward(const Tensor& tensor, nn::Module* module);
  // True when backward must go through the plugin (it scales the loss or otherwise changes
  // backward), so a plain tensor.backward() on a model output is an error (reference §5.4).
  virtual bool requires_plugin_backward() const { return false; }

  // Steps `optimizer`; returns whether it stepped (a loss-scaling plugin skips steps with inf
  // gradients).
  virtual bool optimizer_step(optim::Optimizer& optimizer);
  // The parameters the optimizer updates, group by group, in order, not de-duplicated.
  virtual std::vector<Tensor> main_params(const optim::Optimizer& optimizer) const;
  // Brings the gradients to their true scale before clipping; a no-op without loss scaling.
  virtual void unscale_gradients(optim::Optimizer& optimizer);

  virtual nn::TensorDict state_dict() const { return {}; }
  virtual void load_state_dict(const nn::TensorDict& state);
  virtual void teardown() {}
};

}  // namespace weft::precision
