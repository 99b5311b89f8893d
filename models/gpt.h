// GPT: the GPT-2 / nanoGPT decoder-only transformer language model (transformers.md §1).
//
//   idx (B, T) ids -> wte(idx) + wpe(0..T-1) -> drop -> h.0 .. h.{L-1} -> ln_f -> lm_head -> (B, T, V)
//   Block (pre-LN):  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   attn:  c_attn (C -> 3C) split into q, k, v -> (B, nh, T, hs) views -> causal SDPA -> c_proj (C -> C)
//   mlp:   c_fc (C -> 4C) -> GELU (tanh form by default) -> c_proj (4C -> C)
//
// Parameter names are the checkpoint keys of nanoGPT and Hugging Face's GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight", ...), the weights in nn::Linear's [out, in] layout (a
// Hugging Face file stores its Conv1D weights transposed; converting is the loader's business).
//
// Tied head: lm_head.weight IS transformer.wte.weight (one Tensor): parameters() lists it once,
// under "transformer.wte.weight", state_dict() under both names, and its gradient is the sum of
// the embedding's and the head's. The head is a TiedLMHead, not an nn::Linear, so neither a
// precision plugin's module frame nor its convert_module replaces it (a quantized or FP8 head
// would break the tie): it stays in the model's floating dtype and multiplies under whatever
// autocast the forward runs in.
//
// Linears are built through nn::Linear (make_linear) and LayerNorms through nn::LayerNorm, so a
// precision plugin's module_init_context builds them as its layers (NF4/int8, FP8). Forward
// always calls the registered children: when a child is swapped afterwards (replace_module,
// convert_module, apply_lora), forward follows the swap; the typed members (c_attn, ln_1, ...)
// follow too where the new child is still a Linear / LayerNorm, and otherwise keep the layer as
// built (which a LoraLinear wraps as its base_layer).
//
// Initialisation (nanoGPT's _init_weights), drawn from the default generator after construction,
// in this fixed order: wte.weight, wpe.weight, then per block h.0, h.1, ...: c_attn.weight,
// attn c_proj.weight, c_fc.weight, mlp c_proj.weight — each N(0, 0.02), except both c_proj
// weights N(0, 0.02/√(2·n_layer)); every bias 0, every LayerNorm weight 1 and bias 0. A Linear
// whose weight is stored quantized (Linear4bit, inference Linear8bitLt) gets the same normal draw
// quantized. Under a skip-init tensor frame (empty_init) nothing is drawn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "optim/adam.h"

namespace weft::models {

struct GPTConfig {
  int64_t vocab_size = 50304;  // nanoGPT pads GPT-2's 50257 to a multiple of 64
  int64_t block_size = 1024;   // positions (the context length)
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;        // embedding, attention-weight, residual and MLP dropout
  bool bias = true;            // biases in the Linears and LayerNorms
  double layer_norm_eps = 1e-5;
  bool gelu_tanh = true;       // GPT-2's gelu_new; false = the exact erf GELU (nanoGPT's nn.GELU())

  // GPT-2 124M: 12 layers, 12 heads, 768 wide, vocabulary 50257, context 1024.
  static GPTConfig gpt2_124m();

  // Throws naming the field: sizes <= 0, n_head not dividing n_embd, dropout outside [0, 1),
  // layer_norm_eps <= 0.
  void check() const;
  int64_t head_size() const { return n_embd / n_head; }
  // Parameters of the model, the tied head counted once (124,439,808 for gpt2_124m()), without
  // building it. `include_positions = false` leaves out wpe, as nanoGPT's get_num_params reports.
  int64_t num_parameters(bool include_positions = true) const;
};

// Causal multi-head self-attention. x: (B, T, C) -> (B, T, C).
class CausalSelfAttentionImpl : public nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GPTConfig& config);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t n_head;
  int64_t n_embd;
  double dropout;               // on the attention weights (inside SDPA), while training
  nn::Linear c_attn{nullptr};   // C -> 3C: q, k, v in that order
  nn::Linear c_proj{nullptr};   // C -> C
  nn::Dropout resid_dropout{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_c_attn_, run_c_proj_;
};

// The feed-forward half of a block. x: (B, T, C) -> (B, T, C).
class MLPImpl : public nn::Module {
 public:
  explicit MLPImpl(const GPTConfig& config);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  bool gelu_tanh;
  nn::Linear c_fc{nullptr};     // C -> 4C
  nn::Linear c_proj{nullptr};   // 4C -> C
  nn::Dropout dropout{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_c_fc_, run_c_proj_;
};

WEFT_MODULE(CausalSelfAttention);
WEFT_MODULE(MLP);

// One pre-LN transformer block. x: (B, T, C) -> (B, T, C).
class BlockImpl : public nn::Module {
 public:
  explicit BlockImpl(const GPTConfig& config);
  Tensor forward(const Tensor& x) override;

  nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  nn::LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_ln_1_, run_attn_, run_ln_2_, run_mlp_;
};

WEFT_MODULE(Block);

// The body of the model (Hugging Face's GPT2Model, the "transformer" of the checkpoint keys):
// idx (B, T) -> hidden states after ln_f (B, T, C).
class GPTTransformerImpl : public nn::Module {
 public:
  explicit GPTTransformerImpl(const GPTConfig& config);
  Tensor forward(const Tensor& idx) override;

  int64_t block_size;
  nn::Embedding wte{nullptr};   // (V, C), shared with the head
  nn::Embedding wpe{nullptr};   // (block_size, C)
  nn::Dropout drop{nullptr};
  nn::ModuleList h{nullptr};    // BlockImpl x n_layer (a swapped block is followed: ModuleList)
  nn::LayerNorm ln_f{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_wte_, run_wpe_, run_drop_, run_ln_f_;
};

WEFT_MODULE(GPTTransformer);

// The language-model head whose weight is another module's tensor: x: (*, C) -> (*, V) = x·Wᵀ,
// no bias. Deliberately not an nn::Linear (see the file's note on the tied head).
class TiedLMHeadImpl : public nn::Module {
 public:
  // Registers `weight` itself (V, C) as this module's "weight".
  explicit TiedLMHeadImpl(const Tensor& weight);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;
};

WEFT_MODULE(TiedLMHead);

class GPTImpl : public nn::Module {
 public:
  // Checks the config, builds the model and initialises it (the file's note gives the order).
  explicit GPTImpl(const GPTConfig& config);

  // idx: (B, T) int64 (or int32) ids, T <= block_size -> logits (B, T, V).
  Tensor forward(const Tensor& idx) override;
  // Mean cross-entropy of forward(idx) against targets (B, T) over all B·T positions; targets
  // equal to -1 are ignored (nanoGPT's ignore_index).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  // Logits of the last position only, (B, V): what sampling needs, without the (B, T, V) head.
  Tensor last_logits(const Tensor& idx);

  // Draws the initial weights again (the file's note).
  void reset_parameters();
  // Block `i` (0 <= i < n_layer) as built, or as swapped if the swap is still a Block.
  std::shared_ptr<BlockImpl> block(int64_t i) const;
  // Parameters counted once (tied head once), with or without wpe.
  int64_t num_parameters(bool include_positions = true) const;

  GPTConfig config;
  GPTTransformer transformer{nullptr};
  TiedLMHead lm_head{nullptr};

 protected:
  void on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) override;

 private:
  std::shared_ptr<nn::Module> run_transformer_, run_lm_head_;
};

WEFT_MODULE(GPT);

// nanoGPT's AdamW grouping over the parameters of `model` that require grad (any module: a GPT,
// a GPT with LoRA adapters): those of dim >= 2 (weights, embeddings) get options.weight_decay,
// the others (biases, LayerNorm) none. Groups in that order; an empty group is left out.
std::vector<optim::ParamGroup<optim::AdamWOptions>> gpt_param_groups(const nn::Module& model,
                                                                     const optim::AdamWOptions& options);
// An AdamW over gpt_param_groups(model, options). Throws when nothing requires grad.
optim::AdamW make_gpt_adamw(const nn::Module& model, const optim::AdamWOptions& options);

}  // namespace weft::models
