// TensorDict: an ordered map from dotted names to tensors, the shape of every state_dict.
//
// Insertion order is kept (a checkpoint lists parameters in module order, as PyTorch's
// OrderedDict does); lookups are by name. Names are unique: inserting an existing name fails.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace weft::nn {

class TensorDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  void insert(std::string name, Tensor tensor) {
    WEFT_CHECK(!contains(name), "[TensorDict] duplicate name '", name, "'");
    items_.emplace_back(std::move(name), std::move(tensor));
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  const Tensor* find(const std::string& name) const {
    for (const auto& item : items_)
      if (item.first == name) return &item.second;
    return nullptr;
  }
  const Tensor& at(const std::string& name) const {
    const Tensor* t = find(name);
    WEFT_CHECK(t != nullptr, "[TensorDict] no tensor named '", name, "'");
    return *t;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
};

}  // namespace weft::nn
