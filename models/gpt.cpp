// GPT: the modules of models/gpt.h. Every forward reaches its children through the run_* handles,
// which on_child_replaced keeps equal to the registered children, so a swapped layer is the one
// that runs (Note in gpt.h).
#include "models/gpt.h"

#include <cmath>
#include <utility>

#include "nn/init.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "tensor/autograd.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::models {

namespace {

constexpr double kInitStd = 0.02;

// The typed member follows a swap only while the new child is still of its kind.
template <class Holder>
void follow_swap(Holder& member, const std::shared_ptr<nn::Module>& module) {
  if (auto typed = std::dynamic_pointer_cast<typename Holder::ContainedType>(module)) member = Holder(typed);
}

// N(0, std) into a Linear's weight, zeros into its bias. A weight stored quantized gets the same
// draw, made in the default floating dtype and quantized.
void init_linear(nn::LinearImpl& linear, double std) {
  Tensor& weight = linear.weight;
  if (weight.is_floating_point()) {
    nn::init::normal_(weight, 0.0, std);
  } else if (!skip_init()) {
    Tensor drawn = empty({linear.out_features, linear.in_features});
    nn::init::normal_(drawn, 0.0, std);
    if (auto* q4 = dynamic_cast<precision::quant::Linear4bitImpl*>(&linear)) {
      q4->quantize_weight(drawn);
    } else if (auto* q8 = dynamic_cast<precision::quant::Linear8bitLtImpl*>(&linear)) {
      q8->quantize_weight(drawn);
    } else {
      WEFT_FAIL("[GPT] cannot initialise a ", linear.type_name(), " whose weight is ", weight.dtype());
    }
  }
  if (linear.bias.defined()) nn::init::zeros_(linear.bias);
}

void init_layer_norm(nn::LayerNormImpl& norm) {
  if (norm.weight.defined()) nn::init::ones_(norm.weight);
  if (norm.bias.defined()) nn::init::zeros_(norm.bias);
}

}  // namespace

// ---- GPTConfig ----

GPTConfig GPTConfig::gpt2_124m() {
  GPTConfig config;
  config.vocab_size = 50257;
  config.block_size = 1024;
  config.n_layer = 12;
  config.n_head = 12;
  config.n_embd = 768;
  return config;
}

void GPTConfig::check() const {
  auto positive = [](int64_t value, const char* name) {
    WEFT_CHECK(value > 0, "[GPTConfig] expected ", name, " > 0, got ", value);
  };
  positive(vocab_size, "vocab_size");
  positive(block_size, "block_size");
  positive(n_layer, "n_layer");
  positive(n_head, "n_head");
  positive(n_embd, "n_embd");
  WEFT_CHECK(n_embd % n_head == 0, "[GPTConfig] expected n_head to divide n_embd, got n_embd ", n_embd,
             " and n_head ", n_head);
  WEFT_CHECK(dropout >= 0.0 && dropout < 1.0, "[GPTConfig] expected dropout in [0, 1), got ", dropout);
  WEFT_CHECK(layer_norm_eps > 0.0, "[GPTConfig] expected layer_norm_eps > 0, got ", layer_norm_eps);
}

int64_t GPTConfig::num_parameters(bool include_positions) const {
  const int64_t C = n_embd, b = bias ? 1 : 0;
  const int64_t layer_norm = C + b * C;
  const int64_t block = 2 * layer_norm                 // ln_1, ln_2
                        + 3 * C * C + b * 3 * C        // c_attn
                        + C * C + b * C                // attn.c_proj
                        + 4 * C * C + b * 4 * C        // c_fc
                        + 4 * C * C + b * C;           // mlp.c_proj
  return vocab_size * C + (include_positions ? block_size * C : 0) + n_layer * block + layer_norm;
}

// ---- CausalSelfAttention ----

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& config)
    : n_head(config.n_head), n_embd(config.n_embd), dropout(config.dropout) {
  config.check();
  c_attn = register_module("c_attn", nn::Linear(n_embd, 3 * n_embd, config.bias));
  c_proj = register_module("c_proj", nn::Linear(n_embd, n_embd, config.bias));
  resid_dropout = register_module("resid_dropout", nn::Dropout(config.dropout));
  run_c_attn_ = c_attn.ptr();
  run_c_proj_ = c_proj.ptr();
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  WEFT_CHECK(x.defined() && x.dim() == 3 && x.size(2) == n_embd, "[CausalSelfAttention] expected input (B, T, ",
             n_embd, "), got ", x.defined() ? x.shape() : Shape{});
  const int64_t B = x.size(0), T = x.size(1), hs = n_embd / n_head;
  // (B, T, 3C) -> three (B, T, C) column blocks -> (B, nh, T, hs) views, no copies.
  const std::vector<Tensor> qkv = split(run_c_attn_->call(x), n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hs}).transpose(1, 2); };
  const Tensor y = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), Tensor(),
                                                is_training() ? dropout : 0.0, /*is_causal=*/true);
  // (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C): the one copy the head merge needs.
  return resid_dropout(run_c_proj_->call(y.transpose(1, 2).reshape({B, T, n_embd})));
}

Tensor CausalSelfAttentionImpl::forward_cached(const Tensor& x, KVCache& cache, int64_t layer) {
  const int64_t B = x.size(0), T = x.size(1), hs = n_embd / n_head;
  const std::vector<Tensor> qkv = split(run_c_attn_->call(x), n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hs}).transpose(1, 2); };
  const Tensor y = cache.attend(layer, heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));
  return run_c_proj_->call(y.transpose(1, 2).reshape({B, T, n_embd}));
}

std::string CausalSelfAttentionImpl::extra_repr() const {
  return weft::detail::cat("n_head=", n_head, ", n_embd=", n_embd, ", dropout=", dropout);
}

void CausalSelfAttentionImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  if (name == "c_attn") {
    run_c_attn_ = module;
    follow_swap(c_attn, module);
  } else if (name == "c_proj") {
    run_c_proj_ = module;
    follow_swap(c_proj, module);
  } else if (name == "resid_dropout") {
    follow_swap(resid_dropout, module);
  }
}

// ---- MLP ----

MLPImpl::MLPImpl(const GPTConfig& config) : gelu_tanh(config.gelu_tanh) {
  config.check();
  c_fc = register_module("c_fc", nn::Linear(config.n_embd, 4 * config.n_embd, config.bias));
  c_proj = register_module("c_proj", nn::Linear(4 * config.n_embd, config.n_embd, config.bias));
  dropout = register_module("dropout", nn::Dropout(config.dropout));
  run_c_fc_ = c_fc.ptr();
  run_c_proj_ = c_proj.ptr();
}

Tensor MLPImpl::forward(const Tensor& x) {
  return dropout(run_c_proj_->call(gelu(run_c_fc_->call(x), gelu_tanh)));
}

std::string MLPImpl::extra_repr() const { return gelu_tanh ? "gelu=tanh" : "gelu=erf"; }

void MLPImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  if (name == "c_fc") {
    run_c_fc_ = module;
    follow_swap(c_fc, module);
  } else if (name == "c_proj") {
    run_c_proj_ = module;
    follow_swap(c_proj, module);
  } else if (name == "dropout") {
    follow_swap(dropout, module);
  }
}

// ---- Block ----

BlockImpl::BlockImpl(const GPTConfig& config) {
  config.check();
  ln_1 = register_module("ln_1", nn::LayerNorm(config.n_embd, config.layer_norm_eps, true, config.bias));
  attn = register_module("attn", CausalSelfAttention(config));
  ln_2 = register_module("ln_2", nn::LayerNorm(config.n_embd, config.layer_norm_eps, true, config.bias));
  mlp = register_module("mlp", MLP(config));
  run_ln_1_ = ln_1.ptr();
  run_attn_ = attn.ptr();
  run_ln_2_ = ln_2.ptr();
  run_mlp_ = mlp.ptr();
}

Tensor BlockImpl::forward(const Tensor& x) {
  const Tensor h = x + run_attn_->call(run_ln_1_->call(x));
  return h + run_mlp_->call(run_ln_2_->call(h));
}

Tensor BlockImpl::forward_cached(const Tensor& x, KVCache& cache, int64_t layer) {
  auto* attention = dynamic_cast<CausalSelfAttentionImpl*>(run_attn_.get());
  WEFT_CHECK(attention != nullptr, "[GPT] generation with a KV cache needs each block's attention to be a ",
             "CausalSelfAttention, got a ", run_attn_->type_name());
  const Tensor h = x + attention->forward_cached(run_ln_1_->call(x), cache, layer);
  return h + run_mlp_->call(run_ln_2_->call(h));
}

void BlockImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  if (name == "ln_1") {
    run_ln_1_ = module;
    follow_swap(ln_1, module);
  } else if (name == "attn") {
    run_attn_ = module;
    follow_swap(attn, module);
  } else if (name == "ln_2") {
    run_ln_2_ = module;
    follow_swap(ln_2, module);
  } else if (name == "mlp") {
    run_mlp_ = module;
    follow_swap(mlp, module);
  }
}

// ---- GPTTransformer ----

GPTTransformerImpl::GPTTransformerImpl(const GPTConfig& config) : block_size(config.block_size) {
  config.check();
  wte = register_module("wte", nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", nn::Embedding(config.block_size, config.n_embd));
  drop = register_module("drop", nn::Dropout(config.dropout));
  h = register_module("h", nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(Block(config));
  ln_f = register_module("ln_f", nn::LayerNorm(config.n_embd, config.layer_norm_eps, true, config.bias));
  run_wte_ = wte.ptr();
  run_wpe_ = wpe.ptr();
  run_drop_ = drop.ptr();
  run_ln_f_ = ln_f.ptr();
}

Tensor GPTTransformerImpl::forward(const Tensor& idx) {
  WEFT_CHECK(idx.defined() && idx.dim() == 2, "[GPT] expected token ids of shape (B, T), got ",
             idx.defined() ? idx.shape() : Shape{});
  WEFT_CHECK(idx.dtype() == DType::Int64 || idx.dtype() == DType::Int32,
             "[GPT] expected token ids of dtype int64 or int32, got ", idx.dtype());
  const int64_t T = idx.size(1);
  WEFT_CHECK(idx.size(0) > 0 && T > 0, "[GPT] expected at least one sequence of at least one token, got ids of shape ",
             idx.shape());
  WEFT_CHECK(T <= block_size, "[GPT] sequence length ", T, " exceeds the context of ", block_size, " positions");
  const Tensor positions = arange(static_cast<double>(T), TensorOptions(DType::Int64).device(idx.device()));
  // (B, T, C) + (T, C)
  Tensor x = run_drop_->call(run_wte_->call(idx) + run_wpe_->call(positions));
  for (const std::shared_ptr<nn::Module>& block : *h) x = block->call(x);
  return run_ln_f_->call(x);
}

Tensor GPTTransformerImpl::forward_cached(const Tensor& idx, KVCache& cache) {
  WEFT_CHECK(idx.defined() && idx.dim() == 2 && is_integral(idx.dtype()), "[GPT] expected integer token ids of ",
             "shape (B, T), got ", idx.defined() ? idx.shape() : Shape{});
  // (B, T, C) + (B, T, C): each sequence's own positions (left padding shifts them).
  Tensor x = run_wte_->call(idx) + run_wpe_->call(cache.positions());
  int64_t layer = 0;
  for (const std::shared_ptr<nn::Module>& block : *h) {
    auto* b = dynamic_cast<BlockImpl*>(block.get());
    WEFT_CHECK(b != nullptr, "[GPT] generation with a KV cache needs every block to be a Block, got a ",
               block->type_name());
    x = b->forward_cached(x, cache, layer++);
  }
  return run_ln_f_->call(x);
}

void GPTTransformerImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  if (name == "wte") {
    run_wte_ = module;
    follow_swap(wte, module);
  } else if (name == "wpe") {
    run_wpe_ = module;
    follow_swap(wpe, module);
  } else if (name == "drop") {
    run_drop_ = module;
    follow_swap(drop, module);
  } else if (name == "h") {
    follow_swap(h, module);
  } else if (name == "ln_f") {
    run_ln_f_ = module;
    follow_swap(ln_f, module);
  }
}

// ---- TiedLMHead ----

TiedLMHeadImpl::TiedLMHeadImpl(const Tensor& tied_weight) {
  WEFT_CHECK(tied_weight.defined() && tied_weight.dim() == 2, "[TiedLMHead] expected a (V, C) weight, got ",
             tied_weight.defined() ? tied_weight.shape() : Shape{});
  weight = register_parameter("weight", tied_weight, tied_weight.requires_grad());
}

Tensor TiedLMHeadImpl::forward(const Tensor& x) { return linear(x, weight); }

std::string TiedLMHeadImpl::extra_repr() const {
  return weft::detail::cat("in_features=", weight.size(1), ", out_features=", weight.size(0), ", bias=false, tied");
}

// ---- GPT ----

GPTImpl::GPTImpl(const GPTConfig& config_in) : config(config_in) {
  config.check();
  transformer = register_module("transformer", GPTTransformer(config));
  lm_head = register_module("lm_head", TiedLMHead(transformer->wte->weight));
  run_transformer_ = transformer.ptr();
  run_lm_head_ = lm_head.ptr();
  reset_parameters();
}

Tensor GPTImpl::forward(const Tensor& idx) { return run_lm_head_->call(run_transformer_->call(idx)); }

CausalLMShape GPTImpl::lm_shape() const {
  return {config.vocab_size, config.n_layer, config.n_head, config.head_size(), config.block_size};
}

Tensor GPTImpl::forward_cached(const Tensor& ids, KVCache& cache, bool last_only) {
  auto* body = dynamic_cast<GPTTransformerImpl*>(run_transformer_.get());
  WEFT_CHECK(body != nullptr, "[GPT] generation with a KV cache needs the transformer body, got a ",
             run_transformer_->type_name());
  WEFT_CHECK(ids.defined() && ids.dim() == 2, "[GPT] expected token ids of shape (B, T), got ",
             ids.defined() ? ids.shape() : Shape{});
  cache.begin_step(ids.size(1));
  Tensor hidden = body->forward_cached(ids, cache);
  cache.end_step();
  if (last_only) hidden = hidden.narrow(1, hidden.size(1) - 1, 1);
  return run_lm_head_->call(hidden);
}

Tensor GPTImpl::loss(const Tensor& idx, const Tensor& targets) {
  WEFT_CHECK(targets.defined() && idx.defined() && targets.shape() == idx.shape(),
             "[GPT.loss] expected targets of the ids' shape ", idx.defined() ? idx.shape() : Shape{}, ", got ",
             targets.defined() ? targets.shape() : Shape{});
  const Tensor logits = forward(idx);
  const int64_t rows = idx.numel();
  return cross_entropy(logits.view({rows, config.vocab_size}), targets.to(DType::Int64).view({rows}),
                       Reduction::Mean, /*ignore_index=*/-1);
}

Tensor GPTImpl::last_logits(const Tensor& idx) {
  const Tensor hidden = run_transformer_->call(idx);  // (B, T, C)
  return run_lm_head_->call(hidden.select(1, hidden.size(1) - 1));
}

void GPTImpl::on_child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& module) {
  if (name == "transformer") {
    run_transformer_ = module;
    follow_swap(transformer, module);
  } else if (name == "lm_head") {
    run_lm_head_ = module;
    follow_swap(lm_head, module);
  }
}

void GPTImpl::reset_parameters() {
  NoGradGuard no_grad;
  const double proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  nn::init::normal_(transformer->wte->weight, 0.0, kInitStd);
  nn::init::normal_(transformer->wpe->weight, 0.0, kInitStd);
  for (const std::shared_ptr<nn::Module>& child : *transformer->h) {
    auto block = std::dynamic_pointer_cast<BlockImpl>(child);
    if (!block) continue;  // a block swapped for another module initialises itself
    init_layer_norm(*block->ln_1);
    init_linear(*block->attn->c_attn, kInitStd);
    init_linear(*block->attn->c_proj, proj_std);
    init_layer_norm(*block->ln_2);
    init_linear(*block->mlp->c_fc, kInitStd);
    init_linear(*block->mlp->c_proj, proj_std);
  }
  init_layer_norm(*transformer->ln_f);
}

std::shared_ptr<BlockImpl> GPTImpl::block(int64_t i) const {
  const int64_t n = static_cast<int64_t>(transformer->h->size());
  WEFT_CHECK(i >= 0 && i < n, "[GPT] expected a block index in [0, ", n, "), got ", i);
  return transformer->h->at<BlockImpl>(static_cast<size_t>(i));
}

int64_t GPTImpl::num_parameters(bool include_positions) const {
  int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  if (!include_positions) total -= transformer->wpe->weight.numel();
  return total;
}

// ---- AdamW grouping ----

std::vector<optim::ParamGroup<optim::AdamWOptions>> gpt_param_groups(const nn::Module& model,
                                                                     const optim::AdamWOptions& options) {
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  std::vector<optim::ParamGroup<optim::AdamWOptions>> groups;
  if (!decay.empty()) groups.push_back({std::move(decay), options, std::nullopt});
  if (!no_decay.empty()) {
    optim::AdamWOptions undecayed = options;
    undecayed.weight_decay = 0.0;
    groups.push_back({std::move(no_decay), undecayed, std::nullopt});
  }
  return groups;
}

optim::AdamW make_gpt_adamw(const nn::Module& model, const optim::AdamWOptions& options) {
  std::vector<optim::ParamGroup<optim::AdamWOptions>> groups = gpt_param_groups(model, options);
  WEFT_CHECK(!groups.empty(), "[make_gpt_adamw] expected parameters that require grad, the model has none");
  optim::AdamW adamw(std::move(groups[0].params), groups[0].options);
  for (size_t g = 1; g < groups.size(); ++g) adamw.add_param_group(std::move(groups[g].params), groups[g].options);
  return adamw;
}

}  // namespace weft::models
