// scaled_dot_product_attention: softmax(q·kᵀ·scale + mask)·v with PyTorch's shapes, masks and
// errors. This version composes existing ops (matmul, masked_fill, softmax, dropout), so autograd
// comes from theirs; it materialises the (..., L, S) score matrix.
#include <cmath>
#include <limits>

#include "tensor/op_helpers.h"
#include "tensor/ops.h"

namespace weft {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// k or v with its heads (dim -3) repeated so that each serves `group` consecutive query heads.
Tensor repeat_heads(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  Shape expanded = t.shape();
  expanded.insert(expanded.end() - 2, group);
  Shape merged = t.shape();
  merged[merged.size() - 3] *= group;
  return t.unsqueeze(-3).expand(expanded).reshape(merged);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale,
                                    bool enable_gqa, Generator* gen) {
  detail::check_defined(q, kOp, "query");
  detail::check_defined(k, kOp, "key");
  detail::check_defined(v, kOp, "value");
  WEFT_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "[", kOp,
             "] expected query, key, and value to have the same dtype, but got query.dtype: ", q.dtype(),
             " key.dtype: ", k.dtype(), " and value.dtype: ", v.dtype(), " instead");
  WEFT_CHECK(is_floating(q.dtype()), "[", kOp, "] expected floating query, key and value, got ", q.dtype());
  detail::check_same_device(q, k, kOp);
  detail::check_same_device(q, v, kOp);
  WEFT_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "[", kOp,
             "] expected query, key and value of at least 2 dimensions, got ", q.shape(), ", ", k.shape(), " and ",
             v.shape());
  WEFT_CHECK(q.size(-1) == k.size(-1), "[", kOp, "] expected query and key to have the same embedding size, got ",
             q.shape(), " and ", k.shape());
  WEFT_CHECK(k.size(-2) == v.size(-2), "[", kOp, "] expected key and value to have the same sequence length, got ",
             k.shape(), " and ", v.shape());
  WEFT_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "[", kOp, "] dropout_p must be in [0, 1], got ", dropout_p);
  WEFT_CHECK(!(is_causal && attn_mask.defined()), "[", kOp,
             "] explicit attn_mask should not be set when is_causal=True");

  Tensor key = k, value = v;
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3) {
    const int64_t hq = q.size(-3), hk = k.size(-3);
    WEFT_CHECK(v.size(-3) == hk, "[", kOp, "] expected key and value to have the same number of heads, got ",
               k.shape(), " and ", v.shape());
    WEFT_CHECK(hk > 0 && hq % hk == 0, "[", kOp, "] number of heads in key/value must divide number of heads in ",
               "query, got query ", q.shape(), " and key ", k.shape());
    key = repeat_heads(k, hq / hk);
    value = repeat_heads(v, hq / hk);
  }

  const int64_t L = q.size(-2), S = key.size(-2);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  Tensor scores = mul(matmul(q, key.transpose(-2, -1)), s);
  if (is_causal) {
    const TensorOptions positions = TensorOptions(DType::Int64).device(q.device());
    const Tensor keep = ge(arange(static_cast<double>(L), positions).unsqueeze(1),
                           arange(static_cast<double>(S), positions).unsqueeze(0));
    scores = masked_fill(scores, logical_not(keep), -std::numeric_limits<double>::infinity());
  }
  if (attn_mask.defined()) {
    WEFT_CHECK(attn_mask.dtype() == DType::Bool || attn_mask.dtype() == q.dtype(), "[", kOp,
               "] expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: ",
               attn_mask.dtype(), " and query.dtype: ", q.dtype(), " instead");
    detail::check_same_device(q, attn_mask, kOp);
    broadcast_shapes(attn_mask.shape(), scores.shape(), kOp);  // throws naming both shapes
    scores = attn_mask.dtype() == DType::Bool
                 ? masked_fill(scores, logical_not(attn_mask), -std::numeric_limits<double>::infinity())
                 : add(scores, attn_mask);
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true, gen);
  return matmul(weights, value);
}

}  // namespace weft
