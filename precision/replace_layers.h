// Layer replacement after construction: the convert_module half of the plugins that swap layers
// (quantized int8/NF4/FP4 Linear, FP8 Linear/LayerNorm). The construction-time half is a module
// frame pushed by the plugin's module_init_context() (nn/module_init_context.h).
//
// replace_layers walks the tree below `root` and, for each child that is exactly a built-in
// nn::LinearImpl or nn::LayerNormImpl, asks the matching converter for a replacement (built from
// the old layer, usually copying or quantizing its weights); a null answer leaves the layer. A
// layer that is already a replacement (a subclass) is never converted again, and nothing inside a
// replaced layer is visited. The root itself is never replaced: wrap a bare layer in a container.
//
// ignore_modules are dotted names: a layer is skipped when its dotted name equals one of them or
// lies below it ("l2" skips "l2" and "l2.fc", not "l20"). Lightning's bitsandbytes plugin uses a
// plain string prefix ("l2" would also skip "l20"); matching whole name components is deliberate.
//
// A layer with a parameter that another module outside it also holds (weight tying: an LM head
// whose weight is the token embedding's) is kept as it is: a replacement stores its weight in its
// own form (packed NF4, FP8 with scales), which would cut the tie. It keeps the model's floating
// dtype, which convert_module's to(dtype) changes for both uses at once. (Hugging Face's
// quantizers likewise leave tied weights unquantized.)
//
// A module reachable under several names (a shared layer) is converted once and the same
// replacement is put under every name, so sharing survives. Children are swapped with
// Module::replace_module, whose note applies: handles to the old layers held elsewhere (a user
// module's `fc1` member, an optimizer) keep referring to the old layers, so convert before
// building the optimizer, and give the model a forward that goes through its registered children
// (containers do).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace weft::precision {

struct LayerConverters {
  // old layer, its dotted name -> replacement (or nullptr to keep it). Unset: that kind is kept.
  std::function<std::shared_ptr<nn::Module>(const std::shared_ptr<nn::LinearImpl>&, const std::string&)> linear;
  std::function<std::shared_ptr<nn::Module>(const std::shared_ptr<nn::LayerNormImpl>&, const std::string&)>
      layer_norm;
};

// True when `name` is `prefix` or lies below it in the dotted-name tree.
bool is_under_module(const std::string& name, const std::string& prefix);

// Returns the dotted names replaced, in pre-order.
std::vector<std::string> replace_layers(nn::Module& root, const LayerConverters& converters,
                                        const std::vector<std::string>& ignore_modules = {});

}  // namespace weft::precision
