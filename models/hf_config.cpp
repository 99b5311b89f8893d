// config.json / generation_config.json: reading with every key checked, and writing back.
#include "models/hf_config.h"

#include <cmath>
#include <cstdio>

#include "io/json.h"
#include "tensor/error.h"

namespace weft::models {

namespace {

using io::JsonValue;

// Typed access to one config file's members; errors name the key and the file.
class ConfigReader {
 public:
  ConfigReader(const JsonValue& root, std::string file) : root_(root), file_(std::move(file)) {
    WEFT_CHECK(root.is_object(), "[from_pretrained] ", file_, " must hold a JSON object, got ", root.kind_name());
  }
  const JsonValue* find(const std::string& key) const {
    const JsonValue* v = root_.find(key);
    return v != nullptr && !v->is_null() ? v : nullptr;
  }
  const JsonValue& require(const std::string& key) const {
    const JsonValue* v = find(key);
    WEFT_CHECK(v != nullptr, "[from_pretrained] ", file_, " has no '", key, "', which the model needs");
    return *v;
  }
  int64_t integer(const std::string& key) const { return as_integer(require(key), key); }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    const JsonValue* v = find(key);
    return v ? as_integer(*v, key) : fallback;
  }
  double number_or(const std::string& key, double fallback) const {
    const JsonValue* v = find(key);
    if (v == nullptr) return fallback;
    WEFT_CHECK(v->is_number(), "[from_pretrained] ", file_, ": '", key, "' must be a number, got ", v->kind_name());
    return v->as_number();
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    const JsonValue* v = find(key);
    if (v == nullptr) return fallback;
    WEFT_CHECK(v->is_bool(), "[from_pretrained] ", file_, ": '", key, "' must be true or false, got ", v->kind_name());
    return v->as_bool();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    const JsonValue* v = find(key);
    if (v == nullptr) return fallback;
    WEFT_CHECK(v->is_string(), "[from_pretrained] ", file_, ": '", key, "' must be a string, got ", v->kind_name());
    return v->as_string();
  }
  // An integer or a list of integers (eos_token_id); empty when absent.
  std::vector<int64_t> integers_or_empty(const std::string& key) const {
    const JsonValue* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) return {as_integer(*v, key)};
    std::vector<int64_t> out;
    for (const JsonValue& e : v->as_array()) out.push_back(as_integer(e, key));
    return out;
  }
  const std::string& file() const { return file_; }

 private:
  int64_t as_integer(const JsonValue& v, const std::string& key) const {
    WEFT_CHECK(v.is_integer(), "[from_pretrained] ", file_, ": '", key, "' must be an integer, got ", v.kind_name());
    return v.as_integer();
  }
  const JsonValue& root_;
  std::string file_;
};

GPTConfig read_gpt2(const ConfigReader& r) {
  GPTConfig c;
  c.vocab_size = r.integer("vocab_size");
  c.n_embd = r.integer("n_embd");
  c.n_layer = r.integer("n_layer");
  c.n_head = r.integer("n_head");
  c.block_size = r.find("n_positions") ? r.integer("n_positions") : r.integer("n_ctx");
  c.layer_norm_eps = r.number_or("layer_norm_epsilon", 1e-5);
  c.dropout = 0.0;
  c.bias = true;
  const std::string act = r.string_or("activation_function", "gelu_new");
  WEFT_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu", "[from_pretrained] ", r.file(),
             ": activation_function '", act, "' is not supported (supported: gelu_new, gelu_pytorch_tanh, gelu)");
  c.gelu_tanh = act != "gelu";
  const int64_t inner = r.integer_or("n_inner", 4 * c.n_embd);
  WEFT_CHECK(inner == 4 * c.n_embd, "[from_pretrained] ", r.file(), ": n_inner ", inner,
             " is not supported (weft's GPT-2 MLP is 4 · n_embd = ", 4 * c.n_embd, " wide)");
  WEFT_CHECK(r.boolean_or("scale_attn_weights", true), "[from_pretrained] ", r.file(),
             ": scale_attn_weights false is not supported (attention scores are scaled by 1/sqrt(head size))");
  WEFT_CHECK(!r.boolean_or("scale_attn_by_inverse_layer_idx", false), "[from_pretrained] ", r.file(),
             ": scale_attn_by_inverse_layer_idx true is not supported");
  WEFT_CHECK(r.boolean_or("tie_word_embeddings", true), "[from_pretrained] ", r.file(),
             ": tie_word_embeddings false is not supported for GPT2LMHeadModel (its head is the token embedding)");
  WEFT_CHECK(!r.boolean_or("add_cross_attention", false), "[from_pretrained] ", r.file(),
             ": add_cross_attention true is not supported (a decoder-only model has no encoder to attend to)");
  c.check();
  return c;
}

RopeScaling read_rope_scaling(const JsonValue& v, const std::string& file) {
  WEFT_CHECK(v.is_object(), "[from_pretrained] ", file, ": rope scaling must be an object, got ", v.kind_name());
  const ConfigReader r(v, file);
  RopeScaling s;
  s.type = r.string_or("rope_type", r.string_or("type", "default"));
  s.factor = r.number_or("factor", 1.0);
  s.low_freq_factor = r.number_or("low_freq_factor", 1.0);
  s.high_freq_factor = r.number_or("high_freq_factor", 4.0);
  s.original_max_position_embeddings = r.integer_or("original_max_position_embeddings", 8192);
  s.check();
  return s;
}

LlamaConfig read_llama(const ConfigReader& r) {
  LlamaConfig c;
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer_or("num_key_value_heads", c.num_attention_heads);
  c.head_dim = r.integer_or("head_dim", 0);
  c.max_position_embeddings = r.integer("max_position_embeddings");
  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.attention_bias = r.boolean_or("attention_bias", false);
  c.mlp_bias = r.boolean_or("mlp_bias", false);
  const std::string act = r.string_or("hidden_act", "silu");
  WEFT_CHECK(act == "silu", "[from_pretrained] ", r.file(), ": hidden_act '", act, "' is not supported (supported: silu)");
  WEFT_CHECK(r.integer_or("pretraining_tp", 1) == 1, "[from_pretrained] ", r.file(),
             ": pretraining_tp other than 1 is not supported");
  // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; earlier files rope_theta
  // beside an optional rope_scaling {rope_type or type, factor, ...}.
  if (const JsonValue* params = r.find("rope_parameters")) {
    c.rope_scaling = read_rope_scaling(*params, r.file());
    c.rope_theta = ConfigReader(*params, r.file()).number_or("rope_theta", 10000.0);
  } else {
    c.rope_theta = r.number_or("rope_theta", 10000.0);
    if (const JsonValue* scaling = r.find("rope_scaling")) c.rope_scaling = read_rope_scaling(*scaling, r.file());
  }
  c.check();
  return c;
}

std::optional<HfQuantization> read_quantization(const ConfigReader& r) {
  const JsonValue* q = r.find("quantization_config");
  if (q == nullptr) return std::nullopt;
  const ConfigReader qr(*q, r.file() + " quantization_config");
  const std::string method = qr.string_or("quant_method", "");
  WEFT_CHECK(method == "bitsandbytes", "[from_pretrained] ", r.file(), ": quantization_config.quant_method '", method,
             "' is not supported (supported: bitsandbytes)");
  HfQuantization out;
  const bool four = qr.boolean_or("load_in_4bit", false), eight = qr.boolean_or("load_in_8bit", false);
  WEFT_CHECK(four != eight, "[from_pretrained] ", r.file(), ": a bitsandbytes quantization_config loads in 4 or 8 bits, ",
             "expected exactly one of load_in_4bit and load_in_8bit to be true, got ", four ? "both" : "neither");
  if (four) {
    const std::string compute = qr.string_or("bnb_4bit_compute_dtype", "float32");
    WEFT_CHECK(compute == "float32" || compute == "bfloat16" || compute == "float16", "[from_pretrained] ", r.file(),
               ": quantization_config.bnb_4bit_compute_dtype must be float32, bfloat16 or float16, got '", compute, "'");
    out.compute_dtype = compute == "bfloat16" ? kBFloat16 : compute == "float16" ? kFloat16 : kFloat32;
    const std::string storage = qr.string_or("bnb_4bit_quant_storage", "uint8");
    WEFT_CHECK(storage == "uint8", "[from_pretrained] ", r.file(), ": quantization_config.bnb_4bit_quant_storage must ",
               "be uint8 (two 4-bit codes a byte), got '", storage, "'");
    const std::string type = qr.string_or("bnb_4bit_quant_type", "fp4");
    WEFT_CHECK(type == "nf4" || type == "fp4", "[from_pretrained] ", r.file(),
               ": quantization_config.bnb_4bit_quant_type must be nf4 or fp4, got '", type, "'");
    out.mode = type + (qr.boolean_or("bnb_4bit_use_double_quant", false) ? "-dq" : "");
  } else {
    WEFT_CHECK(!qr.boolean_or("llm_int8_has_fp16_weight", false), "[from_pretrained] ", r.file(),
               ": quantization_config.llm_int8_has_fp16_weight must be false (int8 inference weights), got true");
    out.int8_threshold = qr.number_or("llm_int8_threshold", 6.0);
    WEFT_CHECK(out.int8_threshold >= 0, "[from_pretrained] ", r.file(),
               ": quantization_config.llm_int8_threshold must be >= 0, got ", out.int8_threshold);
    out.mode = "int8";
  }
  if (const JsonValue* skip = qr.find("llm_int8_skip_modules")) {
    WEFT_CHECK(skip->is_array(), "[from_pretrained] ", r.file(),
               ": quantization_config.llm_int8_skip_modules must be a list of module names or null, got ",
               skip->kind_name());
    for (const JsonValue& name : skip->as_array()) {
      WEFT_CHECK(name.is_string(), "[from_pretrained] ", r.file(),
                 ": quantization_config.llm_int8_skip_modules must hold module names, got a ", name.kind_name());
      out.skip_modules.push_back(name.as_string());
    }
  }
  return out;
}

}  // namespace

const char* hf_architecture_name(HfArchitecture a) {
  return a == HfArchitecture::GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM";
}

HfConfig read_hf_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "config.json";
  const JsonValue root = io::read_json_file(path, "from_pretrained");
  const ConfigReader r(root, path.string());
  const JsonValue& architectures = r.require("architectures");
  WEFT_CHECK(architectures.is_array() && architectures.as_array().size() == 1 && architectures.as_array()[0].is_string(),
             "[from_pretrained] ", path.string(), ": 'architectures' must list one architecture name");
  const std::string name = architectures.as_array()[0].as_string();
  HfConfig config;
  if (name == "GPT2LMHeadModel") {
    config.architecture = HfArchitecture::GPT2;
    config.gpt = read_gpt2(r);
  } else if (name == "LlamaForCausalLM") {
    config.architecture = HfArchitecture::Llama;
    config.llama = read_llama(r);
  } else {
    WEFT_CHECK(false, "[from_pretrained] ", path.string(), ": architecture '", name,
               "' is not supported (supported: GPT2LMHeadModel, LlamaForCausalLM)");
  }
  config.eos_token_ids = r.integers_or_empty("eos_token_id");
  const std::vector<int64_t> bos = r.integers_or_empty("bos_token_id");
  if (!bos.empty()) config.bos_token_id = bos[0];
  config.llama.eos_token_ids = config.eos_token_ids;
  config.quantization = read_quantization(r);
  return config;
}

std::optional<HfGenerationConfig> read_hf_generation_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const JsonValue root = io::read_json_file(path, "from_pretrained");
  const ConfigReader r(root, path.string());
  HfGenerationConfig g;
  g.eos_token_ids = r.integers_or_empty("eos_token_id");
  g.do_sample = r.boolean_or("do_sample", false);
  g.temperature = r.number_or("temperature", 1.0);
  g.top_k = r.integer_or("top_k", 50);
  g.top_p = r.number_or("top_p", 1.0);
  if (r.find("max_new_tokens")) g.max_new_tokens = r.integer("max_new_tokens");
  return g;
}

std::string hf_config_json(const HfConfig& config) {
  // Seventeen significant digits: a double read back from the file is the one written.
  auto number = [](double v) {
    char buf[32];
    return std::string(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%.17g", v)));
  };
  auto boolean = [](bool v) { return std::string(v ? "true" : "false"); };
  auto ids = [](const std::vector<int64_t>& v) {
    if (v.empty()) return std::string("null");
    if (v.size() == 1) return std::to_string(v[0]);
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) s += ", ";
      s += std::to_string(v[i]);
    }
    return s + "]";
  };
  const std::string bos = config.bos_token_id ? std::to_string(*config.bos_token_id) : "null";
  using weft::detail::cat;
  if (config.architecture == HfArchitecture::GPT2) {
    const GPTConfig& c = config.gpt;
    return cat("{\n  \"activation_function\": \"", c.gelu_tanh ? "gelu_new" : "gelu", "\",\n",
               "  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"bos_token_id\": ", bos, ",\n",
               "  \"eos_token_id\": ", ids(config.eos_token_ids), ",\n  \"layer_norm_epsilon\": ", number(c.layer_norm_eps),
               ",\n  \"model_type\": \"gpt2\",\n  \"n_embd\": ", c.n_embd, ",\n  \"n_head\": ", c.n_head, ",\n",
               "  \"n_inner\": null,\n  \"n_layer\": ", c.n_layer, ",\n  \"n_positions\": ", c.block_size, ",\n",
               "  \"tie_word_embeddings\": true,\n  \"vocab_size\": ", c.vocab_size, "\n}\n");
  }
  const LlamaConfig& c = config.llama;
  std::string rope = cat("{\"rope_theta\": ", number(c.rope_theta), ", \"rope_type\": \"", c.rope_scaling.type, "\"");
  if (c.rope_scaling.type != "default") rope += cat(", \"factor\": ", number(c.rope_scaling.factor));
  if (c.rope_scaling.type == "llama3")
    rope += cat(", \"low_freq_factor\": ", number(c.rope_scaling.low_freq_factor), ", \"high_freq_factor\": ",
                number(c.rope_scaling.high_freq_factor), ", \"original_max_position_embeddings\": ",
                c.rope_scaling.original_max_position_embeddings);
  return cat("{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": ", boolean(c.attention_bias),
             ",\n  \"bos_token_id\": ", bos, ",\n  \"eos_token_id\": ", ids(config.eos_token_ids), ",\n",
             "  \"head_dim\": ", c.resolved_head_dim(), ",\n  \"hidden_act\": \"silu\",\n",
             "  \"hidden_size\": ", c.hidden_size, ",\n  \"intermediate_size\": ", c.intermediate_size, ",\n",
             "  \"max_position_embeddings\": ", c.max_position_embeddings, ",\n",
             "  \"mlp_bias\": ", boolean(c.mlp_bias), ",\n  \"model_type\": \"llama\",\n",
             "  \"num_attention_heads\": ", c.num_attention_heads, ",\n  \"num_hidden_layers\": ", c.num_hidden_layers,
             ",\n  \"num_key_value_heads\": ", c.num_key_value_heads, ",\n  \"rms_norm_eps\": ", number(c.rms_norm_eps), ",\n",
             "  \"rope_parameters\": ", rope, "},\n  \"tie_word_embeddings\": ", boolean(c.tie_word_embeddings), ",\n",
             "  \"vocab_size\": ", c.vocab_size, "\n}\n");
}

}  // namespace weft::models
