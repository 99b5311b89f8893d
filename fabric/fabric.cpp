// The Fabric facade: accelerator and strategy checks, setup, the backward guard, clipping,
// init contexts and checkpoints with the precision plugin's state.
#include "fabric/fabric.h"

#include "fabric/accelerator.h"
#include "io/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "precision/bitsandbytes_precision.h"
#include "precision/make_precision.h"
#include "precision/mixed_precision.h"
#include "tensor/autograd.h"
#include "tensor/cuda.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/init_context.h"

namespace weft::fabric {
namespace {

// Note [Thread-local state] in tensor/init_context.h.
thread_local bool t_in_fabric_backward = false;

class FabricBackwardScope {
 public:
  FabricBackwardScope() : previous_(t_in_fabric_backward) { t_in_fabric_backward = true; }
  ~FabricBackwardScope() { t_in_fabric_backward = previous_; }
  FabricBackwardScope(const FabricBackwardScope&) = delete;
  FabricBackwardScope& operator=(const FabricBackwardScope&) = delete;

 private:
  bool previous_;
};

constexpr const char* kPrecisionKey = "__precision__";

std::shared_ptr<precision::Precision> choose_plugin(const FabricOptions& options, const std::string& accelerator) {
  if (options.plugin) {
    WEFT_CHECK(!options.precision, "[Fabric] Received both `precision=", options.precision->str(),
               "` and `plugins=", options.plugin->precision(), " plugin`. Choose one.");
    return options.plugin;
  }
  const precision::PrecisionInput chosen =
      options.precision.value_or(std::string(precision::precision_name(precision::kDefaultPrecision)));
  return precision::make_precision(chosen, accelerator);
}

// Identity whose backward refuses to run outside Fabric::backward (Note [Backward guard]).
Tensor guard_output(const Tensor& output) {
  if (!output.defined() || !output.requires_grad() || !autograd::grad_mode_enabled()) return output;
  Tensor guarded = output.detach();
  autograd::record("FabricBackwardGuard", guarded, {output}, [](const Tensor& grad) {
    WEFT_CHECK(t_in_fabric_backward, "[Fabric] The current strategy and precision selection requires you to call "
               "`fabric.backward(loss)` instead of `loss.backward()`.");
    return std::vector<Tensor>{grad};
  });
  return guarded;
}

// An optimizer that already holds state (it stepped, or loaded a checkpoint, before setup) gets
// it on the parameters' device: loading a state dict adopts every buffer onto its parameter's
// device (Note [Optimizer state dict]), so a save/load round trip moves it. Parameters moved by
// setup_module moved in place, so the optimizer's handles already follow them.
void move_optimizer_state(optim::Optimizer& optimizer, Device device) {
  const optim::OptimizerState state = optimizer.state_dict();
  for (const auto& [name, tensor] : state.tensors)
    if (tensor.device() != device) return optimizer.load_state_dict(state);
}

}  // namespace

namespace detail {
bool in_fabric_backward() { return t_in_fabric_backward; }
}  // namespace detail

Tensor FabricModule::operator()(const Tensor& input) const {
  const Tensor converted = plugin_->convert_input(input);
  Tensor output;
  {
    precision::Context forward = plugin_->forward_context();
    output = wrapped_->call(converted);
  }
  output = plugin_->convert_output(output);
  return plugin_->requires_plugin_backward() ? guard_output(output) : output;
}

Fabric::Fabric(FabricOptions options)
    : accelerator_(resolve_accelerator(options.accelerator, cuda::is_built(), cuda::is_available())),
      device_(accelerator_device(accelerator_)),
      processes_(options.devices * options.num_nodes),
      devices_(options.devices) {
  WEFT_CHECK(options.devices >= 1 && options.num_nodes >= 1, "[Fabric] expected devices >= 1 and num_nodes >= 1, "
             "got ", options.devices, " and ", options.num_nodes);
  WEFT_CHECK(accelerator_ == "cpu" || processes_ == 1, "[Fabric] accelerator 'cuda' trains in one process "
             "(strategy single_device), got devices=", options.devices, " and num_nodes=", options.num_nodes,
             "; several processes run on accelerator='cpu'");
  StrategyOptions so;
  so.name = options.strategy == "auto" ? (processes_ > 1 ? "ddp" : "single_device") : options.strategy;
  WEFT_CHECK(so.name != "single_device" || processes_ == 1, "[Fabric] strategy 'single_device' runs one process, "
             "got devices=", options.devices, " and num_nodes=", options.num_nodes, "; use 'ddp' or 'fsdp'");
  // QLoRA-FSDP: the 4-bit plugin's frozen layers shard as bytes (distributed/fsdp.h), its int8
  // layers do not; with it FSDP keeps every floating parameter in its own dtype (32-true's table).
  const auto* bnb = dynamic_cast<const precision::BitsandbytesPrecision*>(options.plugin.get());
  const bool four_bit = bnb != nullptr && bnb->bnb_mode().rfind("int8", 0) != 0;
  WEFT_CHECK(so.name != "fsdp" || !options.plugin || four_bit, "[Fabric] The FSDP strategy can only work with the "
             "`FSDPPrecision` plugin, found ", options.plugin ? options.plugin->precision() : "", " plugin",
             bnb != nullptr ? " '" + bnb->bnb_mode() + "'" : "", "; pass the precision as a string (its FSDP dtype "
             "table comes from precision::FSDPPrecision), or a 4-bit BitsandbytesPrecision (nf4, nf4-dq, fp4, fp4-dq) "
             "for QLoRA");
  plugin_ = choose_plugin(options, accelerator_);
  // A plugin built by hand for another device type would autocast nothing the model runs.
  if (const auto* mixed = dynamic_cast<const precision::MixedPrecision*>(plugin_.get()))
    WEFT_CHECK(mixed->device_type() == device_.type, "[Fabric] the MixedPrecision plugin autocasts on '",
               mixed->device_type() == DeviceType::CUDA ? "cuda" : "cpu", "' but the accelerator is '", accelerator_,
               "'; construct it with device='", accelerator_, "'");
  so.timeout = options.timeout;
  so.ddp = options.ddp;
  so.sharding_strategy = options.sharding_strategy;
  so.fsdp.auto_wrap_policy = options.auto_wrap_policy;
  so.keep_low_precision_grads = options.keep_low_precision_grads;
  so.state_dict_type = options.state_dict_type;
  strategy_ = make_strategy(std::move(so), std::string(precision::precision_name(plugin_->mode())));
}

void Fabric::require_launched(const char* what) const {
  WEFT_CHECK(launched_ || processes_ == 1, "[Fabric] To use Fabric with more than one device, you must call "
             "`.launch()` before `", what, "`.");
}

FabricModule Fabric::setup_module(std::shared_ptr<nn::Module> module) {
  WEFT_CHECK(module != nullptr, "[Fabric.setup] expected a module, got an empty one");
  require_launched(".setup_module()");
  plugin_->convert_module(*module);
  module->to(device_);
  std::shared_ptr<nn::Module> wrapped = strategy_->connected() ? strategy_->wrap(module) : module;
  wrapped_.push_back(wrapped);
  return FabricModule(std::move(module), std::move(wrapped), plugin_);
}

FabricOptimizer Fabric::wrap_optimizer(std::shared_ptr<optim::Optimizer> optimizer) {
  WEFT_CHECK(optimizer != nullptr, "[Fabric.setup] expected an optimizer, got an empty pointer");
  if (strategy_->connected())
    for (const auto& wrapped : wrapped_) strategy_->check_optimizer(*optimizer, *wrapped);
  move_optimizer_state(*optimizer, device_);
  return FabricOptimizer(std::move(optimizer), plugin_);
}

void Fabric::backward(const Tensor& loss, const FabricModule* model) {
  nn::Module* module = model != nullptr ? model->module().get() : nullptr;
  FabricBackwardScope scope;
  plugin_->pre_backward(loss, module);
  plugin_->backward(loss, module);
  plugin_->post_backward(loss, module);
}

std::optional<double> Fabric::clip_gradients(const FabricModule& model, const FabricOptimizer& optimizer,
                                             std::optional<double> clip_val, std::optional<double> max_norm,
                                             double norm_type, bool error_if_nonfinite) {
  WEFT_CHECK(!(clip_val && max_norm), "[Fabric.clip_gradients] Only one of `clip_val` or `max_norm` can be set as "
             "this specifies the underlying clipping algorithm!");
  WEFT_CHECK(clip_val || max_norm, "[Fabric.clip_gradients] You have to specify either `clip_val` or `max_norm` to "
             "do gradient clipping!");
  plugin_->unscale_gradients(optimizer.optimizer());
  const std::vector<Tensor> params = plugin_->main_params(optimizer.optimizer());
  if (clip_val) {
    strategy_->clip_grad_value(*model.wrapped(), params, *clip_val);
    return std::nullopt;
  }
  return strategy_->clip_grad_norm(*model.wrapped(), params, *max_norm, norm_type, error_if_nonfinite);
}

precision::Context Fabric::init_tensor() {
  precision::Context context;
  context.push<TensorFrameGuard>(TensorFrame{{}, device_, {}});
  return std::move(context.then(plugin_->tensor_init_context()));
}

precision::Context Fabric::init_module(std::optional<bool> empty_init) {
  require_launched(".init_module()");
  precision::Context context;
  context.push<TensorFrameGuard>(TensorFrame{{}, device_, empty_init.value_or(false)});
  return std::move(context.then(plugin_->module_init_context()));
}

void Fabric::save(const std::filesystem::path& path, const FabricModule& model, const FabricOptimizer* optimizer,
                  const io::SafetensorsMetadata& metadata) const {
  const std::string prefix = std::string(kPrecisionKey) + ".";
  io::SafetensorsMetadata meta;
  for (const auto& [key, value] : metadata) {
    WEFT_CHECK(key.rfind(kPrecisionKey, 0) != 0, "[Fabric.save] the metadata key '", key,
               "' uses the reserved prefix ", kPrecisionKey);
    meta[key] = value;
  }
  meta[kPrecisionKey] = precision::precision_name(plugin_->mode());
  for (const auto& [key, value] : plugin_->state_dict()) meta[prefix + key] = optim::format_scalar(value.item<double>());
  strategy_->save(path, *model.module(), *model.wrapped(), optimizer != nullptr ? &optimizer->optimizer() : nullptr,
                  meta);
}

// All or nothing: the precision entries are read and parsed before anything changes. The
// plugin's state goes in first — its load_state_dict validates before it writes (GradScaler does),
// so a file from another precision changes nothing — then the model and optimizer, which the
// strategy loads all or nothing; if they refuse, the plugin gets back the state it had, through
// its own state_dict (a plugin must accept what it saves).
io::SafetensorsMetadata Fabric::load(const std::filesystem::path& path, const FabricModule& model,
                                     const FabricOptimizer* optimizer) const {
  const std::string prefix = std::string(kPrecisionKey) + ".";
  io::SafetensorsMetadata user;
  nn::TensorDict state;
  for (const auto& [key, value] : strategy_->read_metadata(path)) {
    if (key.rfind(prefix, 0) == 0) {
      double number = 0;
      optim::parse_scalar(key, value, number, "[Fabric.load] metadata");
      state.insert(key.substr(prefix.size()), scalar_tensor(number, kFloat64));
    } else if (key != kPrecisionKey) {
      user[key] = value;
    }
  }

  const nn::TensorDict previous = plugin_->state_dict();
  plugin_->load_state_dict(state);
  try {
    strategy_->load(path, *model.module(), *model.wrapped(), optimizer != nullptr ? &optimizer->optimizer() : nullptr);
  } catch (...) {
    plugin_->load_state_dict(previous);
    throw;
  }
  return user;
}

Tensor Fabric::to_device(const Tensor& tensor) const { return tensor.to(device_); }

void Fabric::seed_everything(uint64_t seed) { manual_seed(seed); }

}  // namespace weft::fabric
