// scaled_dot_product_attention: softmax(q·kᵀ·scale + mask)·v with PyTorch's shapes, masks and
// errors. The front end checks, broadcasts the batch dims, flattens them into the kernels' 4-D
// (N, H, L, E) form (tensor/attention_kernels.h), draws the dropout key and records autograd; the
// fused kernels compute. What they do not cover runs the unfused composition (tensor/attention.h).
//
// The output of the fused path is laid out (N, L, H, Ev) in memory and viewed as (N, H, L, Ev),
// as PyTorch's CPU flash attention does: a model's out.transpose(1, 2).contiguous() then copies
// nothing.
#include "tensor/attention.h"

#include <cmath>
#include <limits>

#include "tensor/attention_kernels.h"
#include "tensor/autocast_state.h"
#include "tensor/op_helpers.h"
#include "tensor/ops.h"
#include "tensor/philox.h"

namespace weft {

using autograd::SavedTensor;

namespace detail {

KernelRegistry<AttentionForwardKernel>& attention_forward_kernels() {
  static KernelRegistry<AttentionForwardKernel> registry("scaled_dot_product_attention", &cpu_attention_forward,
                                                         cuda_attention_forward);
  return registry;
}

KernelRegistry<AttentionBackwardKernel>& attention_backward_kernels() {
  static KernelRegistry<AttentionBackwardKernel> registry("scaled_dot_product_attention backward",
                                                          &cpu_attention_backward, cuda_attention_backward);
  return registry;
}

}  // namespace detail

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();

// k or v with its heads (dim -3) repeated so that each serves `group` consecutive query heads.
Tensor repeat_heads(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  Shape expanded = t.shape();
  expanded.insert(expanded.end() - 2, group);
  Shape merged = t.shape();
  merged[merged.size() - 3] *= group;
  return t.unsqueeze(-3).expand(expanded).reshape(merged);
}

Shape leading(const Tensor& t, int64_t drop) { return Shape(t.shape().begin(), t.shape().end() - drop); }

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The multipliers of Note [Attention dropout stream] for weights of shape (..., L, S): 1/(1 − p)
// where kept, else 0, in q's dtype on q's device.
Tensor dropout_multipliers(const Shape& weights, double p, uint64_t key, const Tensor& like) {
  const int64_t L = weights[weights.size() - 2], S = weights.back();
  const int64_t heads = L * S == 0 ? 0 : detail::shape_numel(weights) / (L * S);
  const float keep = static_cast<float>(1.0 - p), scale = keep > 0.0f ? 1.0f / keep : 0.0f;
  std::vector<float> values(static_cast<size_t>(heads * L * S));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const auto index = static_cast<uint64_t>((h * S + j) * L + i);
        values[static_cast<size_t>((h * L + i) * S + j)] =
            detail::philox_uniform_at(key, index) < keep ? scale : 0.0f;
      }
  return from_vector(values, weights, TensorOptions(like.dtype()).device(like.device()));
}

// Every check PyTorch makes, in its words after the op's name.
void check_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
                     bool is_causal, bool enable_gqa) {
  WEFT_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "[", kOp,
             "] Expected query, key, and value to have the same dtype, but got query.dtype: ", q.dtype(),
             " key.dtype: ", k.dtype(), " and value.dtype: ", v.dtype(), " instead.");
  WEFT_CHECK(is_floating(q.dtype()), "[", kOp, "] expected floating query, key and value, got ", q.dtype());
  detail::check_same_device(q, k, kOp);
  detail::check_same_device(q, v, kOp);
  WEFT_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "[", kOp,
             "] Expected query, key, and value to all be at least 2 dimensional, but got query.dim: ", q.dim(),
             " key.dim: ", k.dim(), " and value.dim: ", v.dim(), " instead.");
  WEFT_CHECK(q.size(-1) == k.size(-1), "[", kOp, "] expected query and key to have the same embedding size, got ",
             q.shape(), " and ", k.shape());
  WEFT_CHECK(k.size(-2) == v.size(-2), "[", kOp, "] expected key and value to have the same sequence length, got ",
             k.shape(), " and ", v.shape());
  WEFT_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "[", kOp,
             "] dropout probability has to be between 0 and 1, but got ", dropout_p);
  if (attn_mask.defined()) {
    WEFT_CHECK(!is_causal, "[", kOp, "] Explicit attn_mask should not be set when is_causal=True");
    WEFT_CHECK(attn_mask.dtype() == DType::Bool || attn_mask.dtype() == kFloat32 || attn_mask.dtype() == q.dtype(),
               "[", kOp, "] Expected attn_mask dtype to be bool or float or to match query dtype, but got ",
               "attn_mask.dtype: ", attn_mask.dtype(), " and query.dtype: ", q.dtype(), " instead.");
    detail::check_same_device(q, attn_mask, kOp);
    WEFT_CHECK(attn_mask.dim() >= 2, "[", kOp, "] expected attn_mask of at least 2 dimensions (..., L, S), got ",
               attn_mask.shape());
  }
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3) {
    const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
    WEFT_CHECK(hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0, "[", kOp,
               "] Number of heads in key and value must divide the number of heads in query, got query ", q.shape(),
               ", key ", k.shape(), " and value ", v.shape());
  }
}

// Whether `from` broadcasts to `to` without growing it.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

// The output's shape; throws, naming the shapes, when the batch dims or the mask do not broadcast.
Shape output_shape(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool gqa) {
  const int64_t drop = gqa ? 3 : 2;
  Shape batch = broadcast_shapes(broadcast_shapes(leading(q, drop), leading(k, drop), kOp), leading(v, drop), kOp);
  if (gqa) batch.push_back(q.size(-3));
  if (attn_mask.defined()) {
    const Shape scores = concat(batch, {q.size(-2), k.size(-2)});
    WEFT_CHECK(broadcasts_to(attn_mask.shape(), scores), "[", kOp, "] expected attn_mask of shape ",
               attn_mask.shape(), " to broadcast to the scores' shape ", scores);
  }
  return concat(batch, {q.size(-2), v.size(-1)});
}

// The fused path: t expanded to the batch (outer + heads) and flattened to (N, heads, rows, cols).
Tensor to_4d(const Tensor& t, const Shape& outer, int64_t heads) {
  const Tensor expanded = t.expand(concat(outer, {heads, t.size(-2), t.size(-1)}));
  if (outer.size() == 1) return expanded;
  return expanded.reshape({detail::shape_numel(outer), heads, t.size(-2), t.size(-1)});
}

// (N, heads, rows, cols) stored as (N, rows, heads, cols): the layout of a model's (B, T, H, hs)
// views, whose transpose and reshape back to (B, T, C) are then views too.
Tensor heads_inside_rows(int64_t N, int64_t heads, int64_t rows, int64_t cols, DType dtype, Device device) {
  const Tensor base = detail::make_tensor({N, rows, heads, cols}, dtype, device);
  return detail::make_view(base, {N, heads, rows, cols}, {rows * heads * cols, cols, heads * cols, 1}, 0);
}

// The gradient of q, k or v (N, heads, rows, E) laid out as t is: heads inside rows where t's are
// (a GPT's q, k and v, views of its projection's output), so that the model's way back to
// (B, T, C) copies nothing (it copied each of the three, every layer), else contiguous.
Tensor gradient_laid_out_as(const Tensor& t) {
  if (t.stride(1) >= t.stride(2)) return detail::make_tensor(t.shape(), t.dtype(), t.device());
  return heads_inside_rows(t.size(0), t.size(1), t.size(2), t.size(3), t.dtype(), t.device());
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
             bool is_causal, double scale, bool gqa, uint64_t key, const Shape& out_shape) {
  // outer: the batch dims before the heads; without GQA the last batch dim plays the heads.
  Shape outer(out_shape.begin(), out_shape.end() - 2);
  int64_t hq = 1, hk = 1;
  if (!outer.empty()) {
    hq = outer.back();
    outer.pop_back();
    hk = gqa ? k.size(-3) : hq;
  }
  const Tensor q4 = to_4d(q, outer, hq), k4 = to_4d(k, outer, hk), v4 = to_4d(v, outer, hk);
  Tensor mask4;
  if (attn_mask.defined()) mask4 = to_4d(attn_mask.detach(), outer, hq);
  const int64_t N = q4.size(0), L = q4.size(2), Ev = v4.size(3);

  Tensor out = heads_inside_rows(N, hq, L, Ev, q.dtype(), q.device());
  const Tensor lse = detail::make_tensor({N, hq, L}, kFloat32, q.device());
  detail::attention_forward_kernels().at(q.device())(
      {q4.detach(), k4.detach(), v4.detach(), mask4, out, lse, scale, is_causal, dropout_p, key});
  if (autograd::needs_grad({&q4, &k4, &v4})) {
    autograd::record("ScaledDotProductAttention", out, {q4, k4, v4},
                     [sq = SavedTensor(q4), sk = SavedTensor(k4), sv = SavedTensor(v4), so = SavedTensor(out),
                      lse, mask4, scale, is_causal, dropout_p, key](const Tensor& g) {
                       const Tensor& qv = sq.unpack();
                       const Tensor& kv = sk.unpack();
                       const Tensor& vv = sv.unpack();
                       std::vector<Tensor> grads{gradient_laid_out_as(qv), gradient_laid_out_as(kv),
                                                 gradient_laid_out_as(vv)};
                       detail::attention_backward_kernels().at(qv.device())(
                           {qv, kv, vv, mask4, so.unpack(), lse, detail::raw_cast(g, qv.dtype()), grads[0], grads[1],
                            grads[2], scale, is_causal, dropout_p, key});
                       return grads;
                     });
  }
  return out.reshape(out_shape);
}

}  // namespace

const char* attention_kernel_name(Device device, DType dtype) {
  const bool fusable = dtype == kFloat32 || dtype == DType::BFloat16 || dtype == DType::Float16;
  if (!fusable || detail::attention_forward_kernels().find(device.type) == nullptr) return "unfused";
  return device.is_cuda() ? "cuda" : detail::cpu_attention_kernel_name(dtype);
}

namespace detail {

Tensor scaled_dot_product_attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                            double dropout_p, bool is_causal, double scale, bool enable_gqa,
                                            uint64_t dropout_key) {
  Tensor key = k, value = v;
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3) {
    key = repeat_heads(k, q.size(-3) / k.size(-3));
    value = repeat_heads(v, q.size(-3) / v.size(-3));
  }
  const int64_t L = q.size(-2), S = key.size(-2);
  Tensor scores = mul(matmul(q, key.transpose(-2, -1)), scale);
  if (is_causal) {
    const TensorOptions positions = TensorOptions(DType::Int64).device(q.device());
    const Tensor keep = ge(arange(static_cast<double>(L), positions).unsqueeze(1),
                           arange(static_cast<double>(S), positions).unsqueeze(0));
    scores = masked_fill(scores, logical_not(keep), -kInf);
  }
  if (attn_mask.defined()) {
    scores = attn_mask.dtype() == DType::Bool ? masked_fill(scores, logical_not(attn_mask), -kInf)
                                              : add(scores, attn_mask.to(scores.dtype()));
  }
  // A row with nothing kept is all −inf, which softmax makes NaN; PyTorch gives it weights 0.
  const Tensor nothing_kept = eq(amax(scores, {-1}, true), -kInf);
  Tensor weights = masked_fill(softmax(masked_fill(scores, nothing_kept, 0.0), -1), nothing_kept, 0.0);
  if (dropout_p > 0.0) weights = mul(weights, dropout_multipliers(weights.shape(), dropout_p, dropout_key, weights));
  return matmul(weights, value);
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa, Generator* gen) {
  detail::check_defined(q_in, kOp, "query");
  detail::check_defined(k_in, kOp, "key");
  detail::check_defined(v_in, kOp, "value");
  const auto [q, k, v] = autocast_inputs(AutocastOp::Matmul, {q_in, k_in, v_in});
  check_arguments(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa);
  const bool gqa = enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3;
  const Shape out_shape = output_shape(q, k, v, attn_mask, gqa);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const uint64_t key = dropout_p > 0.0 ? (gen ? *gen : default_generator()).next_u64() : 0;

  const bool fusable_dtype = q.dtype() == kFloat32 || q.dtype() == DType::BFloat16 || q.dtype() == DType::Float16;
  const bool mask_needs_grad = attn_mask.defined() && is_floating(attn_mask.dtype()) && autograd::needs_grad({&attn_mask});
  const bool same_kv_heads = !gqa || k.size(-3) == v.size(-3);
  if (fusable_dtype && !mask_needs_grad && same_kv_heads &&
      detail::attention_forward_kernels().find(q.device().type) != nullptr)
    return fused(q, k, v, attn_mask, dropout_p, is_causal, s, gqa, key, out_shape);
  return detail::scaled_dot_product_attention_unfused(q, k, v, attn_mask, dropout_p, is_causal, s, enable_gqa, key);
}

}  // namespace weft
