// The non-template half of the optimizer base: zero_grad, the state dict's key parsing (Note
// [Optimizer state dict] in optim/optimizer.h), and the checks shared by every optimizer.
#include "optim/optimizer.h"

#include <cmath>

#include "tensor/autograd.h"
#include "tensor/ops.h"

namespace weft::optim {

void Optimizer::zero_grad(bool set_to_none) {
  for (size_t g = 0; g < num_param_groups(); ++g) {
    for (Tensor p : params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad(Tensor());
      else
        grad.zero_();
    }
  }
}

namespace detail {

void check_new_param(const std::string& op, const Tensor& param,
                     const std::vector<std::vector<Tensor>>& existing_groups) {
  WEFT_CHECK(param.defined(), "[", op, "] expected defined parameter tensors, got an undefined one");
  const DType dtype = param.dtype();
  WEFT_CHECK(dtype == kFloat64 || dtype == kFloat32 || dtype == kFloat16 || dtype == kBFloat16, "[", op,
             "] parameters must be float64, float32, float16 or bfloat16, got ", dtype);
  WEFT_CHECK(param.is_leaf(), "[", op, "] can only optimize leaf tensors; got one produced by ",
             param.grad_fn() ? param.grad_fn()->name() : std::string("an op"));
  for (const auto& group : existing_groups)
    for (const Tensor& other : group)
      WEFT_CHECK(!param.is_same(other), "[", op, "] some parameters appear in more than one parameter group");
}

void check_finite_scalar(const std::string& op, const std::string& key, double value) {
  WEFT_CHECK(std::isfinite(value), "[", op, "] '", key, "' must be a finite number, got ", value);
}

void check_finite_scalar(const std::string& op, const std::string& key, const std::pair<double, double>& value) {
  check_finite_scalar(op, key, value.first);
  check_finite_scalar(op, key, value.second);
}

DType state_dtype(const Tensor& param) { return param.dtype() == kFloat64 ? kFloat64 : kFloat32; }

Tensor adopt_state_tensor(const std::string& op, const std::string& key, const Tensor& value,
                          const Tensor& param) {
  WEFT_CHECK(!param.is_uninitialized(), "[", op, "] '", key,
             "' belongs to a parameter that is not initialized yet; run a forward pass before loading");
  WEFT_CHECK(value.defined(), "[", op, "] '", key, "' is an undefined tensor");
  WEFT_CHECK(value.shape() == param.shape(), "[", op, "] '", key, "' has shape ", value.shape(),
             ", but its parameter has shape ", param.shape());
  WEFT_CHECK(value.is_floating_point(), "[", op, "] '", key, "' must be floating point, got ", value.dtype());
  const Tensor source = value.detach();
  const Tensor adopted = source.to(param.device()).to(state_dtype(param));
  const int64_t non_finite = sum(logical_not(isfinite(adopted)).to(kInt64)).item<int64_t>();
  WEFT_CHECK(non_finite == 0, "[", op, "] '", key, "' holds ", non_finite, " inf or NaN value(s); a step from it "
             "would write NaN into its parameter");
  // Never alias the caller's tensor: the optimizer updates its state in place.
  return adopted.is_same(source) ? source.clone() : adopted.contiguous();
}

namespace {

// Parses a non-negative decimal index; nullopt when `text` is not one.
std::optional<int64_t> parse_index(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

std::optional<std::pair<int64_t, std::string>> split_state_key(const std::string& key) {
  if (key.rfind("state.", 0) != 0) return std::nullopt;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos || dot + 1 == key.size()) return std::nullopt;
  auto index = parse_index(key.substr(6, dot - 6));
  if (!index) return std::nullopt;
  return std::make_pair(*index, key.substr(dot + 1));
}

std::vector<GroupKeys> split_group_keys(const std::string& op, const OptimizerState& state) {
  std::map<int64_t, GroupKeys> groups;
  const std::string prefix = "param_groups.";
  for (const auto& [key, text] : state.scalars) {
    if (key == "optimizer" || key.rfind("state.", 0) == 0) continue;
    WEFT_CHECK(key.rfind(prefix, 0) == 0, "[", op, "] unexpected key '", key, "'");
    const size_t dot = key.find('.', prefix.size());
    auto index = dot == std::string::npos ? std::nullopt
                                          : parse_index(key.substr(prefix.size(), dot - prefix.size()));
    WEFT_CHECK(index.has_value() && dot + 1 < key.size(), "[", op, "] malformed key '", key,
               "'; expected param_groups.<group>.<option>");
    GroupKeys& group = groups[*index];
    const std::string field = key.substr(dot + 1);
    if (field == "params") {
      size_t begin = 0;
      while (begin < text.size()) {
        size_t end = text.find(',', begin);
        if (end == std::string::npos) end = text.size();
        auto param = parse_index(text.substr(begin, end - begin));
        WEFT_CHECK(param.has_value(), "[", op, "] '", key, "': expected comma-separated parameter indices, got '",
                   text, "'");
        group.params.push_back(*param);
        begin = end + 1;
      }
    } else if (field == "initial_lr") {
      double value = 0;
      parse_scalar(key, text, value);
      group.initial_lr = value;
    } else {
      group.options[field] = text;
    }
  }
  std::vector<GroupKeys> out;
  for (auto& [index, group] : groups) {
    WEFT_CHECK(index == static_cast<int64_t>(out.size()), "[", op, "] the state dict's parameter groups are not "
               "numbered 0, 1, ...: group ", out.size(), " is missing");
    out.push_back(std::move(group));
  }
  return out;
}

}  // namespace detail
}  // namespace weft::optim
