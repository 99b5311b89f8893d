// Hugging Face config.json (and generation_config.json) for the two architectures weft loads:
// GPT2LMHeadModel and LlamaForCausalLM (transformers.md §2-3).
//
// Everything a model's shape or arithmetic depends on is read and checked here, before a weight
// is touched: an unknown `architectures` entry, a missing key, a value of the wrong kind, or a
// setting weft does not compute (GPT-2's scale_attn_by_inverse_layer_idx, an activation other
// than GELU / SiLU, an unsupported rope_type) is an error naming the key and the file. Keys that
// only matter for training in Python (dropouts, initializer_range, use_cache, torch_dtype) are
// not needed and not checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "models/llama.h"

namespace weft::models {

enum class HfArchitecture { GPT2, Llama };
const char* hf_architecture_name(HfArchitecture a);  // "GPT2LMHeadModel", "LlamaForCausalLM"

// A bitsandbytes quantization_config as transformers writes it: the folder's projections are
// stored quantized (models/bnb_checkpoint.h says which and how they load).
struct HfQuantization {
  std::string mode;                       // "nf4", "nf4-dq", "fp4", "fp4-dq" or "int8"
  DType compute_dtype = kFloat32;         // bnb_4bit_compute_dtype: the 4-bit layers' product
  double int8_threshold = 6.0;            // llm_int8_threshold: LLM.int8()'s outlier threshold
  std::vector<std::string> skip_modules;  // llm_int8_skip_modules: what transformers left float
};

struct HfConfig {
  HfArchitecture architecture = HfArchitecture::GPT2;
  GPTConfig gpt;      // when GPT2
  LlamaConfig llama;  // when Llama
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<HfQuantization> quantization;  // the checkpoint's weights are stored quantized
};

// Reads `dir`/config.json.
HfConfig read_hf_config(const std::filesystem::path& dir);

// generation_config.json, when present: the defaults transformers' generate() would use.
struct HfGenerationConfig {
  std::vector<int64_t> eos_token_ids;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  std::optional<int64_t> max_new_tokens;
};
// Empty optional when the file is absent.
std::optional<HfGenerationConfig> read_hf_generation_config(const std::filesystem::path& dir);

// The config.json text that transformers reads back as the same model.
std::string hf_config_json(const HfConfig& config);

}  // namespace weft::models
