// Fabric: the facade a training loop talks to, after Lightning Fabric (reference §5). It owns the
// precision plugin and routes every precision-relevant step through it:
//
//   fabric::Fabric fabric({.precision = "bf16-mixed"});
//   auto [model, optimizer] = fabric.setup(net, adamw);     // convert_module, then wrap
//   Tensor loss = cross_entropy(model(x), y);               // convert_input → autocast → convert_output
//   fabric.backward(loss);                                  // loss scaling under 16-mixed
//   fabric.clip_gradients(model, optimizer, std::nullopt, 1.0);  // by norm; unscales first
//   optimizer.step();                                       // the plugin's step (skips on inf)
//
// Scope of this build: one CPU device, strategy "auto" / "single_device". "cuda" fails because
// the build has no CUDA backend; multi-device and sharded strategies fail until they exist.
//
// Note [Backward guard]: when the plugin owns backward (requires_plugin_backward), every output
// of a FabricModule that requires grad passes through an identity autograd node whose backward
// fails unless Fabric::backward is running on this thread. So `loss.backward()` under 16-mixed or
// bf16-mixed is the reference's error at the first backward, instead of an unscaled loss that
// surfaces as a GradScaler assertion at step time (Lightning issue #18510).
//
// Checkpoints (save/load) hold the model, the optimizer and the plugin's state in one safetensors
// file (io/checkpoint.h). The plugin's state goes into the metadata as "__precision__.<key>"
// numbers, with "__precision__" naming the plugin's precision; loading always restores it, so a
// 16-mixed run resumes with its loss scale, and loading a file saved without scaler state into a
// 16-mixed plugin fails as GradScaler::load_state_dict does. Loading is all or nothing: a load
// that fails leaves the model, the optimizer and the plugin as they were.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "nn/module.h"
#include "nn/module_holder.h"
#include "optim/optimizer.h"
#include "io/safetensors.h"
#include "precision/context.h"
#include "precision/precision.h"
#include "precision/precision_input.h"

namespace weft::fabric {

struct FabricOptions {
  std::string accelerator = "cpu";  // "cpu" or "auto" (the cpu here); "cuda" needs a CUDA build
  int64_t devices = 1;
  std::string strategy = "auto";  // "auto" or "single_device"
  // At most one of these; neither means "32-true".
  std::optional<precision::PrecisionInput> precision;
  std::shared_ptr<precision::Precision> plugin;
};

class Fabric;

// A model set up by Fabric: calling it runs convert_input → forward_context → forward →
// convert_output. state_dict and everything else go to the module itself (module()).
class FabricModule {
 public:
  Tensor operator()(const Tensor& input) const;
  Tensor forward(const Tensor& input) const { return (*this)(input); }
  const std::shared_ptr<nn::Module>& module() const { return module_; }
  nn::Module* operator->() const { return module_.get(); }

 private:
  friend class Fabric;
  FabricModule(std::shared_ptr<nn::Module> module, std::shared_ptr<precision::Precision> plugin)
      : module_(std::move(module)), plugin_(std::move(plugin)) {}
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<precision::Precision> plugin_;
};

// An optimizer set up by Fabric: step() is the plugin's optimizer_step (which may skip).
class FabricOptimizer {
 public:
  // Returns whether the optimizer stepped.
  bool step() const { return plugin_->optimizer_step(*optimizer_); }
  void zero_grad(bool set_to_none = true) const { optimizer_->zero_grad(set_to_none); }
  optim::Optimizer& optimizer() const { return *optimizer_; }

 private:
  friend class Fabric;
  FabricOptimizer(optim::Optimizer& optimizer, std::shared_ptr<precision::Precision> plugin)
      : optimizer_(&optimizer), plugin_(std::move(plugin)) {}
  optim::Optimizer* optimizer_;
  std::shared_ptr<precision::Precision> plugin_;
};

class Fabric {
 public:
  explicit Fabric(FabricOptions options = {});

  precision::Precision& precision() const { return *plugin_; }
  const std::string& accelerator() const { return accelerator_; }

  // Applies the plugin's convert_module, then wraps. Set a model up once: a layer-replacing plugin
  // swaps layers, so build the optimizer from the converted model (setup_module first) when it does.
  FabricModule setup_module(std::shared_ptr<nn::Module> module);
  template <class Impl>
  FabricModule setup_module(const nn::ModuleHolder<Impl>& holder) {
    return setup_module(std::static_pointer_cast<nn::Module>(holder.ptr()));
  }
  FabricOptimizer setup_optimizer(optim::Optimizer& optimizer) { return FabricOptimizer(optimizer, plugin_); }
  template <class Model>
  std::pair<FabricModule, FabricOptimizer> setup(const Model& model, optim::Optimizer& optimizer) {
    FabricModule wrapped = setup_module(model);
    return {std::move(wrapped), setup_optimizer(optimizer)};
  }

  // pre_backward → the plugin's backward (loss scaling) → post_backward.
  void backward(const Tensor& loss, const FabricModule* model = nullptr);
  // Unscales the gradients, then clips them by value (returns nullopt) or by total norm (returns
  // the norm before clipping).
  // Exactly one of clip_val / max_norm. error_if_nonfinite defaults to true, as Fabric's (torch's is
  // false): a non-finite total norm throws instead of scaling the gradients by it.
  std::optional<double> clip_gradients(const FabricModule& model, const FabricOptimizer& optimizer,
                                       std::optional<double> clip_val = std::nullopt,
                                       std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                                       bool error_if_nonfinite = true);

  precision::Context autocast() { return plugin_->forward_context(); }
  precision::Context init_tensor();
  // empty_init: parameters are allocated but not initialised (nn::init skips them).
  precision::Context init_module(std::optional<bool> empty_init = std::nullopt);

  void save(const std::filesystem::path& path, const FabricModule& model, const FabricOptimizer* optimizer,
            const io::SafetensorsMetadata& metadata = {}) const;
  // Restores model, optimizer and plugin state, all or nothing; returns the caller's metadata.
  io::SafetensorsMetadata load(const std::filesystem::path& path, const FabricModule& model,
                               const FabricOptimizer* optimizer) const;

  static void seed_everything(uint64_t seed);

 private:
  std::string accelerator_;
  std::shared_ptr<precision::Precision> plugin_;
};

namespace detail {
// True while Fabric::backward runs on this thread (Note [Backward guard]).
bool in_fabric_backward();
}  // namespace detail

}  // namespace weft::fabric
