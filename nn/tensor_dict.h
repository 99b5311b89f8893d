// TensorDict: an ordered map from dotted names to tensors, the shape of every state_dict.
//
// Insertion order is kept (a checkpoint lists parameters in module order, as PyTorch's
// OrderedDict does); lookups are by name. Names are unique: inserting an existing name fails.
// Invariant: `index_` maps every name in `items_` to its position there, so insert and find are
// constant time and building a dict of n tensors (a checkpoint of a million) is linear.
#pragma once

#include <string>
#include <unordered_map>
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
    try {
      index_.emplace(items_.back().first, items_.size() - 1);
    } catch (...) {  // keep the two in step when the index cannot grow
      items_.pop_back();
      throw;
    }
  }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const Tensor* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &items_[it->second].second;
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
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace weft::nn
