// from_pretrained / save_pretrained: Hugging Face folders, their key mapping and checks.
#include "models/pretrained.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "models/bnb_checkpoint.h"
#include "precision/bitsandbytes_precision.h"
#include "precision/fp8/fp8_weight_linear.h"
#include "tensor/cpu/caching_allocator.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/error.h"
#include "tensor/init_context.h"

namespace weft::models {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every tensor of the folder: model.safetensors, or the shards model.safetensors.index.json names.
nn::TensorDict read_folder_tensors(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) return io::load_safetensors(single).tensors;
  WEFT_CHECK(fs::exists(index), "[from_pretrained] ", dir.string(), " holds neither model.safetensors nor ",
             "model.safetensors.index.json", fs::exists(dir / "pytorch_model.bin")
                                                  ? " (pytorch_model.bin is a pickle, which weft does not read: convert "
                                                    "it with transformers' save_pretrained(safe_serialization=True))"
                                                  : "");
  const io::JsonValue root = io::read_json_file(index, "from_pretrained");
  const io::JsonValue* map = root.is_object() ? root.find("weight_map") : nullptr;
  WEFT_CHECK(map != nullptr && map->is_object(), "[from_pretrained] ", index.string(), " has no 'weight_map' object");
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (const auto& [name, file] : map->as_object()) {
    WEFT_CHECK(file.is_string(), "[from_pretrained] ", index.string(), ": weight_map['", name, "'] must be a file name");
    const std::string& shard = file.as_string();
    WEFT_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard.find('\\') == std::string::npos &&
                   shard != "." && shard != "..",
               "[from_pretrained] ", index.string(), ": weight_map['", name, "'] names '", shard,
               "', which is not a file in the folder");
    names_by_shard[shard].push_back(name);
  }
  nn::TensorDict out;
  for (const auto& [shard, names] : names_by_shard) {
    const io::SafetensorsFile file = io::load_safetensors(dir / shard);
    for (const std::string& name : names) {
      const Tensor* t = file.tensors.find(name);
      WEFT_CHECK(t != nullptr, "[from_pretrained] ", index.string(), " puts '", name, "' in ", shard,
                 ", which does not hold it");
      out.insert(name, *t);
    }
  }
  return out;
}

// GPT-2's Conv1D weights: stored [in, out], nn::Linear's [out, in] here.
bool is_conv1d_weight(const std::string& name) {
  return ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
         ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight");
}

// GPT-2's tensors under weft's names. A Conv1D weight becomes a transposed view of the file's
// [in, out] tensor, not a copy: a float32 model keeps it as its Linear's weight (linear reads a
// transposed weight in place), and a converted or quantized one reads it once.
nn::TensorDict gpt2_weights(const nn::TensorDict& file) {
  nn::TensorDict out;
  std::optional<Tensor> head;
  for (const auto& [stored, t] : file) {
    const std::string name = stored.rfind("transformer.", 0) == 0 ? stored.substr(12) : stored;
    if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias")) continue;  // causal-mask buffers
    if (name == "lm_head.weight") {
      head = t;
      continue;
    }
    out.insert("transformer." + name, is_conv1d_weight(name) && t.dim() == 2 ? t.t() : t);
  }
  const Tensor* wte = out.find("transformer.wte.weight");
  if (head && wte != nullptr)
    WEFT_CHECK(head->shape() == wte->shape() && equal(head->to(kFloat32), wte->to(kFloat32)),
               "[from_pretrained] lm_head.weight differs from transformer.wte.weight: GPT2LMHeadModel's head is tied to ",
               "the token embedding, and an untied head is not supported");
  if (wte != nullptr) out.insert("lm_head.weight", *wte);
  return out;
}

// Note [Sizes checked before the model is built]
// config.json's sizes decide what the model allocates, and how many layers it builds, before
// check_state_dict can compare one tensor with the file: a hand-edited num_hidden_layers of 10^6
// built layers for minutes, an intermediate_size of 10^11 asked the allocator for 12 TB. So each
// size is first checked against a tensor of the file that carries it, the error naming the
// config's keys and the tensor. The full check of every name and shape follows the build.
struct SizedTensor {
  std::string name;
  Shape shape;       // as the config makes it
  std::string keys;  // the config.json keys that set it
};

// Whether the file's `t` holds a weight of `shape`: as it is, or packed two 4-bit values a byte
// in one column (a bitsandbytes 4-bit folder). The count is a double: absurd sizes overflow int64.
bool holds(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return true;
  if (t.dtype() != kUInt8 || t.dim() != 2 || t.size(1) != 1) return false;
  double values = 1;
  for (const int64_t d : shape) values *= static_cast<double>(d);
  return static_cast<double>(t.size(0)) == std::ceil(values / 2);
}

// The layer numbers N of the file's "<prefix>N." tensors.
std::set<int64_t> layer_numbers(const nn::TensorDict& weights, const std::string& prefix) {
  std::set<int64_t> numbers;
  for (const auto& [name, t] : weights) {
    if (!name.starts_with(prefix)) continue;
    const std::string digits = name.substr(prefix.size(), name.find('.', prefix.size()) - prefix.size());
    if (!digits.empty() && digits.size() < 10 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      numbers.insert(std::stoll(digits));
  }
  return numbers;
}

void check_sizes_against_weights(const HfConfig& config, const nn::TensorDict& weights, const std::string& file) {
  const bool gpt2 = config.architecture == HfArchitecture::GPT2;
  const std::string prefix = gpt2 ? "transformer.h." : "model.layers.";
  const int64_t layers = gpt2 ? config.gpt.n_layer : config.llama.num_hidden_layers;
  const std::set<int64_t> found = layer_numbers(weights, prefix);
  if (static_cast<int64_t>(found.size()) != layers || (!found.empty() && *found.rbegin() != layers - 1)) {
    const std::string held = found.empty() ? "no '" + prefix + "N.' tensors"
                                           : weft::detail::cat(found.size(), found.size() == 1 ? " layer" : " layers",
                                                               " ('", prefix, "N.', N from ", *found.begin(), " to ",
                                                               *found.rbegin(), ")");
    WEFT_FAIL("[from_pretrained] ", file, " gives ", gpt2 ? "n_layer " : "num_hidden_layers ", layers,
              ", but the weights hold ", held);
  }
  std::vector<SizedTensor> sized;
  if (gpt2) {
    const GPTConfig& c = config.gpt;
    sized = {{"transformer.wte.weight", {c.vocab_size, c.n_embd}, "vocab_size and n_embd"},
             {"transformer.wpe.weight", {c.block_size, c.n_embd}, "n_positions and n_embd"},
             {"transformer.h.0.mlp.c_fc.weight", {4 * c.n_embd, c.n_embd}, "n_embd"}};
  } else {
    const LlamaConfig& c = config.llama;
    const int64_t head = c.resolved_head_dim();
    sized = {{"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, "vocab_size and hidden_size"},
             {"model.layers.0.mlp.down_proj.weight", {c.hidden_size, c.intermediate_size},
              "hidden_size and intermediate_size"},
             {"model.layers.0.self_attn.q_proj.weight", {c.num_attention_heads * head, c.hidden_size},
              "num_attention_heads, head_dim and hidden_size"},
             {"model.layers.0.self_attn.k_proj.weight", {c.num_key_value_heads * head, c.hidden_size},
              "num_key_value_heads, head_dim and hidden_size"}};
  }
  for (const SizedTensor& s : sized) {
    const Tensor* t = weights.find(s.name);  // a missing one is named by the full check
    if (t != nullptr && !holds(*t, s.shape))
      WEFT_FAIL("[from_pretrained] ", file, ": its ", s.keys, " make '", s.name, "' ", s.shape,
                ", but the weights hold it as ", t->shape());
  }
}

std::shared_ptr<CausalLM> build(const HfConfig& config) {
  if (config.architecture == HfArchitecture::GPT2) {
    auto gpt = std::make_shared<GPTImpl>(config.gpt);
    gpt->eos_token_ids = config.eos_token_ids;
    return gpt;
  }
  return std::make_shared<LlamaForCausalLMImpl>(config.llama);
}

// Drops the resident pages of file bytes already converted into the model: a mapped file's page
// a tensor was read through stays counted in the process's resident memory until the mapping
// goes, which for a model converted to bfloat16 or quantized would add the float32 file to the
// peak. MADV_DONTNEED on a MAP_PRIVATE page nobody wrote leaves the file's page in the page cache
// and only unmaps it here; a later read maps it again. Only pages wholly inside the tensor's bytes
// are dropped, so a neighbour's are untouched. A tensor the loader copied instead (unaligned in
// its file) is heap memory whose pages would come back as zeros, so callers release only bytes no
// later step reads.
void release_pages(const Tensor& t) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + t.nbytes()) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// dest = src converted, a slab of src's memory (~16 MiB) at a time, each slab's pages released
// after it is copied when `release`: at the peak the process holds the converted model and one
// slab of the file. src is contiguous, or a transposed view of a contiguous matrix (GPT-2's
// Conv1D weights: its slabs are runs of the file's rows, columns of src).
void convert_into(const Tensor& dest, const Tensor& src, bool release) {
  constexpr size_t kSlabBytes = size_t{16} << 20;
  const bool transposed = !src.is_contiguous() && src.dim() == 2 && src.t().is_contiguous();
  if (src.dim() == 0 || src.numel() == 0 || (!src.is_contiguous() && !transposed)) {
    Tensor(dest).copy_(src);
    if (release && src.is_contiguous()) release_pages(src);
    return;
  }
  const int64_t dim = transposed ? 1 : 0, length = src.size(dim);
  const size_t slice_bytes = static_cast<size_t>(src.numel() / length) * itemsize(src.dtype());
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(kSlabBytes / slice_bytes));
  for (int64_t i = 0; i < length; i += step) {
    const int64_t n = std::min(step, length - i);
    const Tensor piece = src.narrow(dim, i, n);
    dest.narrow(dim, i, n).copy_(piece);
    if (release) release_pages(piece);
  }
}

// Note [Small tensors are copied]: the kernel maps a file's page cache in large folios (up to
// 2 MiB), and a fault on one page of a folio maps all of it. A bias or norm weight left in the
// mapping between converted (released) weights would, at its first read, bring back up to 2 MiB
// of them: an nf4 GPT-2 grew 2 MiB per layer it ran. So only tensors of at least a folio's size
// are adopted; smaller ones (a fraction of a percent of a model) are copied like converted ones.
constexpr size_t kAdoptMinBytes = size_t{2} << 20;

// Loads `weights` (already checked against the model) without copying what need not be copied:
// a parameter or buffer whose file tensor has its dtype and shape and at least kAdoptMinBytes
// takes that tensor itself — a copy-on-write view of the mapped file (io/safetensors.h), or a
// transposed view of one (GPT-2's Conv1D weights) — so the model's memory is the file's pages,
// shared by every process that loads the file. A floating one of another dtype, or a small one,
// is converted (copied) into memory of its exact size, slab by slab (convert_into), once per
// tensor however many names it has (a tied head). A file tensor's pages are released once its
// last reader is done.
// A module whose entries in the file are more than its tensors (a quantized layer: packed codes
// plus statistics under "weight.absmax", "SCB", ...) loads through its own hook, which must see
// all of them at once: its tensors are never adopted or converted here, or the hook would find the
// codes gone and keep the statistics it was built with (bitsandbytes folders' packed uint8
// weights have the parameter's dtype and shape, so they would otherwise be adopted).
void adopt_or_load(nn::Module& model, const nn::TensorDict& weights) {
  std::map<std::string, Tensor> handles;
  for (auto& [name, t] : model.named_parameters()) handles.emplace(name, t);
  for (auto& [name, t] : model.named_buffers()) handles.emplace(name, t);
  std::set<std::string> hooked;  // module names under which the file holds keys that are no tensor's
  for (const auto& [name, t] : weights) {
    if (handles.count(name)) continue;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      hooked.insert(name.substr(0, dot));
  }
  auto owner = [](const std::string& name) {
    const size_t dot = name.rfind('.');
    return dot == std::string::npos ? std::string() : name.substr(0, dot);
  };
  auto plain_layout = [](const Tensor& t) { return t.is_contiguous() || (t.dim() == 2 && t.t().is_contiguous()); };
  for (const auto& [name, t] : weights) {
    const auto it = handles.find(name);
    if (it != handles.end() && !hooked.count(owner(name)) && !it->second.is_uninitialized() &&
        it->second.dtype() == t.dtype() && it->second.shape() == t.shape() && it->second.device() == t.device() &&
        plain_layout(t) && t.nbytes() >= kAdoptMinBytes)
      it->second.set_data(t);
  }
  // What is left to read, each model tensor once, and how many steps read each file tensor.
  const nn::TensorDict now = model.state_dict();
  std::set<const void*> adopted;
  for (const auto& [name, t] : now) adopted.insert(t.data_ptr());
  // A tied name (lm_head.weight) is listed by named_parameters under its first name only; its
  // state_dict entry shares that tensor's data.
  std::map<const void*, const detail::TensorImpl*> tensor_at;
  for (const auto& [name, t] : handles)
    if (!t.is_uninitialized()) tensor_at.emplace(t.data_ptr(), t.impl());
  std::vector<std::pair<std::string, Tensor>> rest;
  std::set<const detail::TensorImpl*> loading;
  std::map<const void*, int> readers;
  for (const auto& [name, t] : weights) {
    const Tensor* mine = now.find(name);
    if (mine != nullptr && mine->dtype() == t.dtype() && mine->data_ptr() == t.data_ptr()) continue;
    if (mine != nullptr && !mine->is_uninitialized()) {
      const auto at = tensor_at.find(mine->data_ptr());
      if (at != tensor_at.end() && !loading.insert(at->second).second) continue;  // a tied name: loaded once
    }
    rest.emplace_back(name, t);
    ++readers[t.data_ptr()];
  }
  nn::TensorDict through_hooks;  // the quantized layers' entries, each layer's together
  for (const auto& [name, t] : rest) {
    if (hooked.count(owner(name))) {
      through_hooks.insert(name, t.contiguous());
      continue;
    }
    const bool last = --readers[t.data_ptr()] == 0 && t.device() == kCPU && !adopted.count(t.data_ptr());
    const auto it = handles.find(name);
    // A float8 parameter is a quantized layer's codes (Fp8WeightLinear): its own hook quantizes
    // the weight with its scale, where a plain conversion would cast it with the stand-in's scale 1.
    const bool codes = it != handles.end() && (it->second.dtype() == kFloat8E4M3FN || it->second.dtype() == kFloat8E5M2);
    if (it != handles.end() && !it->second.is_uninitialized() && it->second.is_floating_point() && !codes &&
        t.is_floating_point() && it->second.shape() == t.shape() && it->second.device() == kCPU && t.device() == kCPU) {
      // A checkpoint's converted weights live as long as the model: memory of their exact size
      // (tensor/cpu/exact_memory.h), not the caching allocator's size classes.
      const Tensor dest = exact_empty(t.shape(), it->second.dtype());
      convert_into(dest, t, last);
      it->second.set_data(dest);
      continue;
    }
    // As it is: a quantized layer reads a transposed Conv1D weight in the pieces it needs, and a
    // whole contiguous copy here would stay in the caching allocator beside the model.
    nn::TensorDict one;
    one.insert(name, t);
    model.load_state_dict(one, /*strict=*/false);
    if (last && plain_layout(t)) release_pages(t);
  }
  if (!through_hooks.empty()) model.load_state_dict(through_hooks, /*strict=*/false);
}

void write_text(const fs::path& path, const std::string& text) {
  io::AtomicFileWriter writer(path, "save_pretrained");
  writer.write(text.data(), text.size());
  writer.commit();
}

const std::set<std::string>& quantize_modes() {
  static const std::set<std::string> modes{"nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "fp8", "fp8-channel"};
  return modes;
}

}  // namespace

nn::TensorDict read_pretrained_weights(const fs::path& dir, const HfConfig& config) {
  const nn::TensorDict file = read_folder_tensors(dir);
  return config.architecture == HfArchitecture::GPT2 ? gpt2_weights(file) : file;
}

PretrainedModel from_pretrained(const fs::path& dir, const PretrainedOptions& options) {
  WEFT_CHECK(fs::is_directory(dir), "[from_pretrained] ", dir.string(), " is not a directory");
  WEFT_CHECK(options.dtype == kFloat32 || options.dtype == kBFloat16,
             "[from_pretrained] expected float32 or bfloat16 weights, got ", options.dtype);
  WEFT_CHECK(options.quantize.empty() || quantize_modes().count(options.quantize), "[from_pretrained] quantize '",
             options.quantize, "' is not a mode (nf4, nf4-dq, fp4, fp4-dq, int8, fp8, fp8-channel)");
  PretrainedModel out;
  out.config = read_hf_config(dir);
  out.generation = read_hf_generation_config(dir);
  // A folder that transformers saved after quantizing it with bitsandbytes: its projections load
  // as weft's quantized layers, taking the stored bytes as they are (models/bnb_checkpoint.h).
  const std::optional<HfQuantization>& stored = out.config.quantization;
  const std::string config_file = (dir / "config.json").string();
  if (stored) {
    WEFT_CHECK(options.quantize.empty(), "[from_pretrained] ", config_file, " has a bitsandbytes quantization_config (",
               stored->mode, "): the weights are already quantized, so quantize = \"", options.quantize,
               "\" cannot apply; load without quantize");
    WEFT_CHECK(out.config.architecture == HfArchitecture::Llama, "[from_pretrained] ", config_file,
               ": bitsandbytes-quantized folders load for LlamaForCausalLM, got ",
               hf_architecture_name(out.config.architecture));
  }
  const std::string mode = options.quantize;
  const nn::TensorDict weights = read_pretrained_weights(dir, out.config);
  if (stored) check_bnb_weights(weights, *stored, config_file);
  check_sizes_against_weights(out.config, weights, config_file);

  {
    // Built without drawing initial weights (the file's replace them), in the requested dtype,
    // its projections as quantized layers when asked or as a bitsandbytes folder stores them.
    TensorFrameGuard frame(TensorFrame{options.dtype, std::nullopt, true});
    if (mode.empty()) {
      out.model = build(out.config);
      if (stored) use_bnb_layers(*out.model, weights, *stored, options.dtype);
    } else if (const auto granularity = precision::fp8_weight_granularity_of(mode)) {
      precision::Context context = precision::fp8_weight_init_context(*granularity, options.dtype);
      out.model = build(out.config);
    } else {
      const DType compute = mode == "int8" ? kFloat16 : options.dtype;
      precision::BitsandbytesPrecision plugin(mode, compute);
      precision::Context context = plugin.module_init_context();
      out.model = build(out.config);
    }
  }
  out.model->check_state_dict(weights, /*strict=*/true);
  adopt_or_load(*out.model, weights);
  // Loading made temporaries (a Conv1D weight's transposed copy, the float16 rounding an int8
  // weight is quantized from, a quantizer's float32 copy) that the caching allocator keeps for
  // reuse: a loaded model would hold them for life, an eighth of a quantized GPT-2's memory. This
  // also returns whatever else the allocator held free; nothing in use is touched.
  // With the quantized layers' stand-in weights in zero pages and their weights in exact-size
  // memory (tensor/cpu/exact_memory.h), peak RSS of quantized generation stays within 1.15 × the
  // weights as stored plus the KV cache (bench/bench_generate.cpp prints both).
  cpu_allocator::empty_cache();
  out.model->eval();
  out.model->requires_grad_(false);
  if (out.generation && !out.generation->eos_token_ids.empty()) out.model->eos_token_ids = out.generation->eos_token_ids;
  return out;
}

void save_pretrained(const CausalLM& model, const HfConfig& config, const fs::path& dir) {
  const bool gpt2 = config.architecture == HfArchitecture::GPT2;
  WEFT_CHECK(gpt2 ? dynamic_cast<const GPTImpl*>(&model) != nullptr : dynamic_cast<const LlamaForCausalLMImpl*>(&model) != nullptr,
             "[save_pretrained] the model is not a ", hf_architecture_name(config.architecture));
  WEFT_CHECK(!fs::exists(dir) || fs::is_directory(dir), "[save_pretrained] ", dir.string(), " exists and is not a directory");
  nn::TensorDict tensors;
  for (const auto& [name, t] : model.state_dict()) {
    WEFT_CHECK(t.dtype() == kFloat32 || t.dtype() == kBFloat16 || t.dtype() == kFloat16 || t.dtype() == kFloat64,
               "[save_pretrained] '", name, "' is stored as ", t.dtype(),
               ": save the unquantized model (quantize again when loading)");
    if (gpt2 && name == "lm_head.weight") continue;  // tied: save_pretrained stores the embedding once
    tensors.insert(name, gpt2 && is_conv1d_weight(name) ? t.t().contiguous() : t.contiguous());
  }
  fs::create_directories(dir);
  io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  write_text(dir / "config.json", hf_config_json(config));
  std::string generation = "{\n";
  if (config.bos_token_id) generation += "  \"bos_token_id\": " + std::to_string(*config.bos_token_id) + ",\n";
  if (!config.eos_token_ids.empty()) {
    const bool list = config.eos_token_ids.size() > 1;
    generation += list ? "  \"eos_token_id\": [" : "  \"eos_token_id\": ";
    for (size_t i = 0; i < config.eos_token_ids.size(); ++i) {
      if (i > 0) generation += ", ";
      generation += std::to_string(config.eos_token_ids[i]);
    }
    generation += list ? "],\n" : ",\n";
  }
  write_text(dir / "generation_config.json", generation + "  \"_from_model_config\": true\n}\n");
}

}  // namespace weft::models
