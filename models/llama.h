// Llama: Hugging Face's LlamaForCausalLM (transformers.md §3), the decoder-only model of Llama 2
// and 3, TinyLlama, SmolLM and their kin.
//
//   ids (B, T) -> embed_tokens -> layers.0 .. layers.{L-1} -> norm -> lm_head -> (B, T, V)
//   DecoderLayer (pre-norm):  x = x + self_attn(input_layernorm(x))
//                             x = x + mlp(post_attention_layernorm(x))
//   self_attn: q_proj (C -> nh·hd), k_proj / v_proj (C -> nkv·hd), rotary embeddings on q and k,
//              causal attention with each k/v head shared by nh/nkv query heads, o_proj (nh·hd -> C)
//   mlp:       down_proj(silu(gate_proj(x)) · up_proj(x))
//   RMSNorm:   computed in float32, x·rsqrt(mean(x²) + eps), cast back, times the weight
//
// Parameter names are the checkpoint keys ("model.layers.0.self_attn.q_proj.weight", ...), every
// Linear in nn::Linear's [out, in] layout, biases only where the config asks. With
// tie_word_embeddings the head multiplies by embed_tokens.weight and has no weight of its own (no
// "lm_head.weight" key, as save_pretrained writes it).
//
// The projections are built through nn::Linear, so a precision plugin's module frame builds them
// quantized (NF4, int8, ...); the head is always a plain LinearImpl (quantized inference keeps the
// head in full precision, as bitsandbytes' llm_int8_skip_modules does by default).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "models/rope.h"
#include "nn/containers.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module_holder.h"

namespace weft::models {

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  std::vector<int64_t> eos_token_ids;

  // Throws naming the field: sizes <= 0, heads not dividing, an odd head size, eps <= 0.
  void check() const;
  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
};

// RMSNorm as Llama computes it. x: (*, C) -> (*, C) in x's dtype (times the weight's).
class LlamaRMSNormImpl : public nn::Module {
 public:
  LlamaRMSNormImpl(int64_t hidden_size, double eps);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double eps;
  Tensor weight;
};
WEFT_MODULE(LlamaRMSNorm);

// The positions and rotary tables of one forward, shared by every layer.
struct LlamaStep {
  RopeTables rope;
  KVCache* cache = nullptr;  // null: plain causal attention over the T tokens given
};

class LlamaAttentionImpl : public nn::Module {
 public:
  using nn::Module::forward;  // the one-tensor forward of the base stays visible
  LlamaAttentionImpl(const LlamaConfig& config, int64_t layer);
  // x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const LlamaStep& step);

  int64_t layer, n_head, n_kv_head, head_dim;
  // As built. The forward runs the registered children, so a swap (LoRA, convert_module) is followed.
  nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_q_, run_k_, run_v_, run_o_;
};
WEFT_MODULE(LlamaAttention);

class LlamaMLPImpl : public nn::Module {
 public:
  explicit LlamaMLPImpl(const LlamaConfig& config);
  Tensor forward(const Tensor& x) override;

  nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};  // as built; see LlamaAttention

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_gate_, run_up_, run_down_;
};
WEFT_MODULE(LlamaMLP);

class LlamaDecoderLayerImpl : public nn::Module {
 public:
  using nn::Module::forward;  // the one-tensor forward of the base stays visible
  LlamaDecoderLayerImpl(const LlamaConfig& config, int64_t layer);
  Tensor forward(const Tensor& x, const LlamaStep& step);

  LlamaRMSNorm input_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  LlamaRMSNorm post_attention_layernorm{nullptr};
  LlamaMLP mlp{nullptr};
};
WEFT_MODULE(LlamaDecoderLayer);

// The body ("model." keys): ids (B, T) -> hidden states after the final norm (B, T, C).
class LlamaModelImpl : public nn::Module {
 public:
  using nn::Module::forward;  // the one-tensor forward of the base stays visible
  explicit LlamaModelImpl(const LlamaConfig& config);
  Tensor forward(const Tensor& ids, const Tensor& positions, KVCache* cache);

  nn::Embedding embed_tokens{nullptr};
  std::vector<LlamaDecoderLayer> layers;  // registered under "layers" as a ModuleList
  LlamaRMSNorm norm{nullptr};
  std::vector<float> inv_freq;  // the rotary frequencies, computed once from the config
};
WEFT_MODULE(LlamaModel);

class LlamaForCausalLMImpl : public CausalLM {
 public:
  explicit LlamaForCausalLMImpl(const LlamaConfig& config);
  // ids (B, T) integer tokens -> logits (B, T, V); differentiable (LoRA fine-tuning).
  Tensor forward(const Tensor& ids) override;
  CausalLMShape lm_shape() const override;
  Tensor forward_cached(const Tensor& ids, KVCache& cache, bool last_only = false) override;
  // Draws every weight again: Linear and Embedding N(0, initializer_range), biases 0, norms 1.
  void reset_parameters(double initializer_range = 0.02);
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

  LlamaConfig config;
  LlamaModel model{nullptr};
  std::shared_ptr<nn::LinearImpl> lm_head;  // null when tied to model.embed_tokens

 private:
  Tensor head(const Tensor& hidden) const;
};
WEFT_MODULE(LlamaForCausalLM);

}  // namespace weft::models
