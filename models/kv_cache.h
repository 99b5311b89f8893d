// KVCache: the keys and values every attention layer has computed so far, so that generation
// feeds one new token per step instead of the whole sequence again (prefill the prompt once,
// then decode).
//
// Storage is preallocated per layer as (B, H_kv, capacity, head_dim) in the cache's dtype
// (float32 or bfloat16) and written in place; a step's attention reads the views
// [:, :, :length + T, :], so no step allocates or copies what earlier steps stored. Every sequence
// of the batch occupies the same slots: prompts of different lengths are left-padded, and a
// sequence's leading `padding` slots are masked out of every attention and do not count as
// positions (sequence b's token in slot s sits at position s - padding[b]).
//
// A model's forward runs one step as: begin_step(T) (positions and the attention mask of the T
// new slots), then per layer attend(layer, q, k, v) (stores k, v and attends over everything
// stored), then end_step() (the T slots become part of length()).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/ops.h"

namespace weft::models {

struct KVCacheShape {
  int64_t n_layer = 0;
  int64_t batch = 1;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;  // slots per sequence, padding included
};

class KVCache {
 public:
  // `dtype`: float32, or bfloat16 to halve the cache's memory (values rounded when stored).
  explicit KVCache(const KVCacheShape& shape, DType dtype = kFloat32, Device device = kCPU);

  const KVCacheShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t length() const { return length_; }  // slots filled, padding included
  size_t nbytes() const;

  // Leading slots of each sequence that hold padding; all zero unless set. Set before the first
  // step; each entry in [0, capacity).
  void set_padding(std::vector<int64_t> padding);
  const std::vector<int64_t>& padding() const { return padding_; }
  // Empties the cache (same storage, padding cleared).
  void reset();

  // Starts a step of T new slots: errors when they do not fit in the capacity.
  void begin_step(int64_t tokens);
  // Positions of the step's tokens: (B, T) int64.
  const Tensor& positions() const;
  // Stores k, v: (B, H_kv, T, head_dim) in `layer`'s slots [length, length + T) and returns
  // softmax(q·kᵀ·scale + mask)·v over every slot so far; q: (B, H, T, head_dim) with H a
  // multiple of H_kv (grouped-query attention). Causal: a token sees the slots up to its own.
  Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                std::optional<double> scale = std::nullopt);
  // Ends the step: its T slots join length().
  void end_step();

 private:
  KVCacheShape shape_;
  DType dtype_;
  std::vector<Tensor> keys_, values_;  // per layer, (B, H_kv, capacity, head_dim)
  std::vector<int64_t> padding_;
  int64_t length_ = 0;
  // The current step: its size (0 between steps), positions, mask (undefined when is_causal or
  // no mask is needed) and whether SDPA's own causal mask is the right one.
  int64_t step_ = 0;
  Tensor positions_;
  Tensor mask_;
  bool causal_ = false;
};

}  // namespace weft::models
