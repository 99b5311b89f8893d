// Llama: configuration checks, the layers' forwards, the cached and uncached model forwards.
#include "models/llama.h"

#include <cmath>

#include "nn/init.h"
#include "tensor/autograd.h"
#include "tensor/error.h"

namespace weft::models {

namespace {

Tensor split_heads(const Tensor& x, int64_t heads, int64_t head_dim) {  // (B, T, h·d) -> (B, h, T, d)
  return x.view({x.size(0), x.size(1), heads, head_dim}).transpose(1, 2);
}

}  // namespace

void LlamaConfig::check() const {
  auto positive = [](int64_t v, const char* key) {
    WEFT_CHECK(v > 0, "[LlamaConfig] ", key, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(max_position_embeddings, "max_position_embeddings");
  WEFT_CHECK(head_dim > 0 || hidden_size % num_attention_heads == 0, "[LlamaConfig] num_attention_heads (",
             num_attention_heads, ") must divide hidden_size (", hidden_size, ") unless head_dim is given");
  WEFT_CHECK(num_attention_heads % num_key_value_heads == 0, "[LlamaConfig] num_key_value_heads (", num_key_value_heads,
             ") must divide num_attention_heads (", num_attention_heads, ")");
  WEFT_CHECK(resolved_head_dim() % 2 == 0, "[LlamaConfig] the head size must be even for rotary embeddings, got ",
             resolved_head_dim());
  WEFT_CHECK(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.0, "[LlamaConfig] rms_norm_eps must be positive, got ",
             rms_norm_eps);
  WEFT_CHECK(std::isfinite(rope_theta) && rope_theta > 0.0, "[LlamaConfig] rope_theta must be positive, got ",
             rope_theta);
  rope_scaling.check();
}

LlamaRMSNormImpl::LlamaRMSNormImpl(int64_t hidden_size, double eps_) : eps(eps_) {
  weight = register_parameter("weight", ones({hidden_size}));
}

Tensor LlamaRMSNormImpl::forward(const Tensor& x) { return rms_norm(x, weight, eps); }

std::string LlamaRMSNormImpl::extra_repr() const {
  return weft::detail::cat("(", weight.size(0), ",), eps=", eps);
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& config, int64_t layer_)
    : layer(layer_), n_head(config.num_attention_heads), n_kv_head(config.num_key_value_heads),
      head_dim(config.resolved_head_dim()) {
  const int64_t C = config.hidden_size;
  q_proj = register_module("q_proj", nn::Linear(C, n_head * head_dim, config.attention_bias));
  k_proj = register_module("k_proj", nn::Linear(C, n_kv_head * head_dim, config.attention_bias));
  v_proj = register_module("v_proj", nn::Linear(C, n_kv_head * head_dim, config.attention_bias));
  o_proj = register_module("o_proj", nn::Linear(n_head * head_dim, C, config.attention_bias));
  run_q_ = q_proj.ptr();
  run_k_ = k_proj.ptr();
  run_v_ = v_proj.ptr();
  run_o_ = o_proj.ptr();
}

void LlamaAttentionImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  (name == "q_proj" ? run_q_ : name == "k_proj" ? run_k_ : name == "v_proj" ? run_v_ : run_o_) = module;
}

Tensor LlamaAttentionImpl::forward(const Tensor& x, const LlamaStep& step) {
  const int64_t B = x.size(0), T = x.size(1);
  const Tensor q = apply_rope(split_heads(run_q_->call(x), n_head, head_dim), step.rope);
  const Tensor k = apply_rope(split_heads(run_k_->call(x), n_kv_head, head_dim), step.rope);
  const Tensor v = split_heads(run_v_->call(x), n_kv_head, head_dim);
  const Tensor y = step.cache != nullptr
                       ? step.cache->attend(layer, q, k, v)
                       : scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true, std::nullopt,
                                                      /*enable_gqa=*/n_head != n_kv_head);
  return run_o_->call(y.transpose(1, 2).reshape({B, T, n_head * head_dim}));
}

LlamaMLPImpl::LlamaMLPImpl(const LlamaConfig& config) {
  const int64_t C = config.hidden_size, I = config.intermediate_size;
  gate_proj = register_module("gate_proj", nn::Linear(C, I, config.mlp_bias));
  up_proj = register_module("up_proj", nn::Linear(C, I, config.mlp_bias));
  down_proj = register_module("down_proj", nn::Linear(I, C, config.mlp_bias));
  run_gate_ = gate_proj.ptr();
  run_up_ = up_proj.ptr();
  run_down_ = down_proj.ptr();
}

void LlamaMLPImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  (name == "gate_proj" ? run_gate_ : name == "up_proj" ? run_up_ : run_down_) = module;
}

Tensor LlamaMLPImpl::forward(const Tensor& x) {
  return run_down_->call(mul(silu(run_gate_->call(x)), run_up_->call(x)));
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& config, int64_t layer) {
  input_layernorm = register_module("input_layernorm", LlamaRMSNorm(config.hidden_size, config.rms_norm_eps));
  self_attn = register_module("self_attn", LlamaAttention(config, layer));
  post_attention_layernorm =
      register_module("post_attention_layernorm", LlamaRMSNorm(config.hidden_size, config.rms_norm_eps));
  mlp = register_module("mlp", LlamaMLP(config));
}

Tensor LlamaDecoderLayerImpl::forward(const Tensor& x, const LlamaStep& step) {
  const Tensor h = add(x, self_attn(input_layernorm(x), step));
  return add(h, mlp(post_attention_layernorm(h)));
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& config)
    : inv_freq(rope_inverse_frequencies(config.resolved_head_dim(), config.rope_theta, config.rope_scaling)) {
  embed_tokens = register_module("embed_tokens", nn::Embedding(config.vocab_size, config.hidden_size));
  nn::ModuleList list;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    layers.emplace_back(config, l);
    list->push_back(layers.back());
  }
  register_module("layers", list);
  norm = register_module("norm", LlamaRMSNorm(config.hidden_size, config.rms_norm_eps));
}

Tensor LlamaModelImpl::forward(const Tensor& ids, const Tensor& positions, KVCache* cache) {
  const LlamaStep step{rope_tables(positions, inv_freq), cache};
  Tensor h = embed_tokens(ids);
  for (auto& layer : layers) h = layer(h, step);
  return norm(h);
}

LlamaForCausalLMImpl::LlamaForCausalLMImpl(const LlamaConfig& config_) : config(config_) {
  config.check();
  eos_token_ids = config.eos_token_ids;
  model = register_module("model", LlamaModel(config));
  if (!config.tie_word_embeddings) {
    lm_head = std::make_shared<nn::LinearImpl>(config.hidden_size, config.vocab_size, false);
    register_module("lm_head", lm_head);
  }
  reset_parameters();
}

void LlamaForCausalLMImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  // A quantized head (a bitsandbytes folder whose llm_int8_skip_modules left lm_head out) is a Linear.
  if (name == "lm_head") lm_head = std::dynamic_pointer_cast<nn::LinearImpl>(module);
}

void LlamaForCausalLMImpl::reset_parameters(double initializer_range) {
  NoGradGuard no_grad;
  for (const auto& [name, module] : named_modules()) {
    if (auto* linear = dynamic_cast<nn::LinearImpl*>(module.get())) {
      // A quantized replacement holds its weight in its own format and is drawn when built.
      if (linear->weight.defined() && is_floating(linear->weight.dtype())) nn::init::normal_(linear->weight, 0.0, initializer_range);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::EmbeddingImpl*>(module.get())) {
      nn::init::normal_(embedding->weight, 0.0, initializer_range);
    } else if (auto* rms = dynamic_cast<LlamaRMSNormImpl*>(module.get())) {
      nn::init::ones_(rms->weight);
    }
  }
}

CausalLMShape LlamaForCausalLMImpl::lm_shape() const {
  return {config.vocab_size, config.num_hidden_layers, config.num_key_value_heads, config.resolved_head_dim(),
          config.max_position_embeddings};
}

Tensor LlamaForCausalLMImpl::head(const Tensor& hidden) const {
  return lm_head ? lm_head->forward(hidden) : linear(hidden, model->embed_tokens->weight);
}

Tensor LlamaForCausalLMImpl::forward(const Tensor& ids) {
  WEFT_CHECK(ids.dim() == 2 && is_integral(ids.dtype()), "[LlamaForCausalLM] expected integer ids of shape (B, T), got ",
             ids.dtype(), " ", ids.shape());
  const int64_t B = ids.size(0), T = ids.size(1);
  WEFT_CHECK(T <= config.max_position_embeddings, "[LlamaForCausalLM] sequence length ", T, " exceeds the model's ",
             config.max_position_embeddings, " positions");
  const Tensor positions = arange(static_cast<double>(T), TensorOptions(DType::Int64).device(ids.device()))
                               .unsqueeze(0)
                               .expand({B, T});
  return head(model->forward(ids, positions, nullptr));
}

Tensor LlamaForCausalLMImpl::forward_cached(const Tensor& ids, KVCache& cache, bool last_only) {
  WEFT_CHECK(ids.dim() == 2 && is_integral(ids.dtype()), "[LlamaForCausalLM] expected integer ids of shape (B, T), got ",
             ids.dtype(), " ", ids.shape());
  cache.begin_step(ids.size(1));
  Tensor hidden = model->forward(ids, cache.positions(), &cache);
  cache.end_step();
  if (last_only) hidden = hidden.narrow(1, hidden.size(1) - 1, 1);
  return head(hidden);
}

}  // namespace weft::models
