// KVCache: preallocated per-layer keys and values, the step's positions and attention mask.
#include "models/kv_cache.h"

#include <algorithm>

#include "tensor/error.h"

namespace weft::models {

KVCache::KVCache(const KVCacheShape& shape, DType dtype, Device device) : shape_(shape), dtype_(dtype) {
  WEFT_CHECK(shape.n_layer > 0 && shape.batch > 0 && shape.n_kv_head > 0 && shape.head_dim > 0 && shape.capacity > 0,
             "[KVCache] expected positive layers, batch, heads, head size and capacity, got ", shape.n_layer, ", ",
             shape.batch, ", ", shape.n_kv_head, ", ", shape.head_dim, " and ", shape.capacity);
  WEFT_CHECK(dtype == kFloat32 || dtype == kBFloat16, "[KVCache] expected a float32 or bfloat16 cache, got ", dtype);
  const Shape per_layer{shape.batch, shape.n_kv_head, shape.capacity, shape.head_dim};
  for (int64_t l = 0; l < shape.n_layer; ++l) {
    keys_.push_back(empty(per_layer, TensorOptions(dtype).device(device)));
    values_.push_back(empty(per_layer, TensorOptions(dtype).device(device)));
  }
  padding_.assign(static_cast<size_t>(shape.batch), 0);
}

size_t KVCache::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].nbytes() + values_[l].nbytes();
  return total;
}

void KVCache::set_padding(std::vector<int64_t> padding) {
  WEFT_CHECK(length_ == 0 && step_ == 0, "[KVCache] padding is set before the first step, but ", length_,
             " slots are filled");
  WEFT_CHECK(static_cast<int64_t>(padding.size()) == shape_.batch, "[KVCache] expected padding for ", shape_.batch,
             " sequences, got ", padding.size());
  for (int64_t p : padding)
    WEFT_CHECK(p >= 0 && p < shape_.capacity, "[KVCache] padding ", p, " is outside [0, ", shape_.capacity, ")");
  padding_ = std::move(padding);
}

void KVCache::reset() {
  length_ = 0;
  step_ = 0;
  std::fill(padding_.begin(), padding_.end(), 0);
}

void KVCache::begin_step(int64_t tokens) {
  WEFT_CHECK(step_ == 0, "[KVCache] begin_step while a step of ", step_, " slots is open");
  WEFT_CHECK(tokens > 0, "[KVCache] a step has at least one token, got ", tokens);
  WEFT_CHECK(length_ + tokens <= shape_.capacity, "[KVCache] ", tokens, " more tokens after ", length_,
             " do not fit in the cache's ", shape_.capacity, " slots");
  step_ = tokens;
  const int64_t B = shape_.batch, S = length_ + tokens;
  std::vector<int64_t> positions(static_cast<size_t>(B * tokens));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < tokens; ++i)
      positions[static_cast<size_t>(b * tokens + i)] = std::max<int64_t>(length_ + i - padding_[static_cast<size_t>(b)], 0);
  positions_ = from_vector(positions, {B, tokens}, TensorOptions(DType::Int64).device(keys_[0].device()));

  // SDPA's own causal mask is top-left aligned, right for a prefill into an empty cache; one new
  // token sees every slot so far; anything else (padding, a chunk after earlier slots) gets a mask.
  const bool padded = std::any_of(padding_.begin(), padding_.end(), [](int64_t p) { return p > 0; });
  causal_ = !padded && length_ == 0 && tokens > 1;
  mask_ = Tensor();
  if (causal_ || (!padded && tokens == 1)) return;
  // A real token sees the sequence's own slots up to itself. A padding slot's query sees only
  // itself: its output is never used, but a row with nothing to attend to would be NaN, and that
  // NaN would reach the cache as the padding slot's key and value (where 0·NaN poisons the sums).
  std::vector<uint8_t> keep(static_cast<size_t>(B * tokens * S));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pad = padding_[static_cast<size_t>(b)];
    for (int64_t i = 0; i < tokens; ++i) {
      const int64_t slot = length_ + i;
      for (int64_t j = 0; j < S; ++j)
        keep[static_cast<size_t>((b * tokens + i) * S + j)] = slot < pad ? j == slot : j >= pad && j <= slot;
    }
  }
  mask_ = from_buffer(keep.data(), {B, 1, tokens, S}, DType::Bool).to(keys_[0].device());
}

const Tensor& KVCache::positions() const {
  WEFT_CHECK(step_ > 0, "[KVCache] positions are those of an open step; call begin_step first");
  return positions_;
}

Tensor KVCache::attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale) {
  WEFT_CHECK(step_ > 0, "[KVCache] attend needs an open step; call begin_step first");
  WEFT_CHECK(layer >= 0 && layer < shape_.n_layer, "[KVCache] layer ", layer, " is outside [0, ", shape_.n_layer, ")");
  const Shape expected{shape_.batch, shape_.n_kv_head, step_, shape_.head_dim};
  WEFT_CHECK(k.shape() == expected && v.shape() == expected, "[KVCache] expected keys and values of shape ", expected,
             ", got ", k.shape(), " and ", v.shape());
  const Tensor& keys = keys_[static_cast<size_t>(layer)];
  const Tensor& values = values_[static_cast<size_t>(layer)];
  keys.narrow(2, length_, step_).copy_(k);
  values.narrow(2, length_, step_).copy_(v);
  const int64_t S = length_ + step_;
  // A bfloat16 cache attends in bfloat16 with float32 sums, as SDPA computes; q comes rounded too.
  const Tensor query = q.dtype() == dtype_ ? q : q.to(dtype_);
  const Tensor out = scaled_dot_product_attention(query, keys.narrow(2, 0, S), values.narrow(2, 0, S), mask_, 0.0,
                                                  causal_, scale, q.size(1) != shape_.n_kv_head);
  return out.dtype() == q.dtype() ? out : out.to(q.dtype());
}

void KVCache::end_step() {
  WEFT_CHECK(step_ > 0, "[KVCache] end_step without an open step");
  length_ += step_;
  step_ = 0;
}

}  // namespace weft::models
