// Walking a module tree and swapping built-in Linear / LayerNorm children for replacements.
#include "precision/replace_layers.h"

#include <map>
#include <set>
#include <typeinfo>

namespace weft::precision {
namespace {

struct Walk {
  const LayerConverters& converters;
  const std::vector<std::string>& ignore;
  std::map<const nn::Module*, std::shared_ptr<nn::Module>> done;  // old layer -> its replacement
  std::vector<std::string> replaced;
  std::map<const weft::detail::TensorImpl*, std::vector<const nn::Module*>> users;  // parameter -> its modules

  Walk(nn::Module& root, const LayerConverters& c, const std::vector<std::string>& ignore_modules)
      : converters(c), ignore(ignore_modules) {
    for (const auto& m : root.modules())
      for (const auto& p : m->parameters(false)) users[p.impl()].push_back(m.get());
  }

  // True when a parameter of `layer` is also a parameter of a module outside it (weight tying).
  bool tied_outside(const nn::Module& layer) {
    std::set<const nn::Module*> inside;
    for (const auto& m : layer.modules()) inside.insert(m.get());
    for (const auto& p : layer.parameters())
      for (const nn::Module* user : users[p.impl()])
        if (!inside.count(user)) return true;
    return false;
  }

  bool ignored(const std::string& name) const {
    for (const std::string& prefix : ignore)
      if (is_under_module(name, prefix)) return true;
    return false;
  }

  // The replacement of `child` (named `name`), or null to keep it and look inside.
  std::shared_ptr<nn::Module> convert(const std::shared_ptr<nn::Module>& child, const std::string& name) {
    if (ignored(name)) return nullptr;
    if (auto it = done.find(child.get()); it != done.end()) return it->second;
    std::shared_ptr<nn::Module> replacement;
    const nn::Module& module = *child;  // typeid of a named object: no call inside typeid
    const std::type_info& kind = typeid(module);
    const bool linear = converters.linear && kind == typeid(nn::LinearImpl);
    const bool layer_norm = converters.layer_norm && kind == typeid(nn::LayerNormImpl);
    if ((linear || layer_norm) && tied_outside(module)) return nullptr;
    if (linear)
      replacement = converters.linear(std::static_pointer_cast<nn::LinearImpl>(child), name);
    else if (layer_norm)
      replacement = converters.layer_norm(std::static_pointer_cast<nn::LayerNormImpl>(child), name);
    if (replacement) done.emplace(child.get(), replacement);
    return replacement;
  }

  void visit(nn::Module& module, const std::string& prefix) {
    for (const auto& [name, child] : module.named_children()) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      if (auto replacement = convert(child, full)) {
        module.replace_module(name, replacement);
        replaced.push_back(full);
      } else if (!done.count(child.get())) {
        visit(*child, full);
      }
    }
  }
};

}  // namespace

bool is_under_module(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || name[prefix.size()] == '.';
}

std::vector<std::string> replace_layers(nn::Module& root, const LayerConverters& converters,
                                        const std::vector<std::string>& ignore_modules) {
  Walk walk(root, converters, ignore_modules);
  walk.visit(root, "");
  return walk.replaced;
}

}  // namespace weft::precision
