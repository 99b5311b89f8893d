// Folders that transformers saved after quantizing tiny_llama with bitsandbytes
// (scripts/golden_bnb_pretrained.py): NF4 with double quantization, FP4 without it, LLM.int8()
// with a skip list (and NF4 recomputed in bfloat16 and float16). They load as they are — the
// stored bytes in weft's quantized layers — give the goldens' logits and greedy continuations,
// and every way a folder can disagree with its quantization_config is refused naming the key.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "../error_message.h"
#include "../temp_dir.h"
#include "models/all.h"
#include "pretrained_test_helpers.h"

using namespace weft;
using namespace weft::models;
namespace fs = std::filesystem;
using namespace pretrained_test;
using precision::quant::Linear4bitImpl;
using precision::quant::Linear8bitLtImpl;

namespace {

const io::JsonValue& goldens() {
  static const io::JsonValue g = io::read_json_file(data_dir() / "bnb_goldens.json", "test");
  return g;
}

Tensor bytes_of(const std::string& text) {
  std::vector<uint8_t> bytes(text.begin(), text.end());
  return from_vector(bytes, {static_cast<int64_t>(bytes.size())}, DType::UInt8);
}

// A copy of a test folder with config.json's `from` replaced by `to` (when given) and every
// tensor passed through `edit`, which may rename it (the name is a reference) or drop it
// (an undefined tensor).
using TensorEdit = std::function<Tensor(std::string& name, const Tensor& t)>;
fs::path edited_copy(const test::TempDir& tmp, const char* folder, const TensorEdit& edit, const std::string& from = "",
                     const std::string& to = "") {
  const fs::path out = tmp.path() / folder;
  fs::copy(data_dir() / folder, out, fs::copy_options::recursive);
  if (!from.empty()) {
    std::string config = read_text(out / "config.json");
    const size_t at = config.find(from);
    REQUIRE(at != std::string::npos);
    std::ofstream(out / "config.json") << config.replace(at, from.size(), to);
  }
  if (edit) {
    const auto file = io::load_safetensors(data_dir() / folder / "model.safetensors");
    nn::TensorDict edited;
    for (const auto& [stored, t] : file.tensors) {
      std::string name = stored;
      const Tensor kept = edit(name, t);
      if (kept.defined()) edited.insert(name, kept);
    }
    io::save_safetensors(out / "model.safetensors", edited, file.metadata);
  }
  return out;
}

// The largest |weft - golden| over the prompt's logits (every position).
double max_logit_error(CausalLM& model, const std::vector<int64_t>& prompt, const io::JsonValue& golden) {
  NoGradGuard no_grad;
  const Tensor logits = model.forward(from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}, DType::Int64));
  const auto& rows = golden.as_array();
  REQUIRE(logits.size(1) == static_cast<int64_t>(rows.size()));
  double worst = 0.0;
  for (size_t t = 0; t < rows.size(); ++t) {
    const auto got = logits.select(0, 0).select(0, static_cast<int64_t>(t)).to(kFloat32).to_vector<float>();
    const auto& want = rows[t].as_array();
    REQUIRE(got.size() == want.size());
    for (size_t v = 0; v < got.size(); ++v) worst = std::max(worst, std::abs(got[v] - want[v].as_number()));
  }
  return worst;
}

const std::string kQProj = "model.layers.0.self_attn.q_proj.weight";

}  // namespace

TEST_CASE("bitsandbytes folders give the goldens' logits and greedy continuations") {
  // The 4-bit goldens are the float model holding each layer's weight decoded from the stored
  // bytes (the script says why not bitsandbytes' own CPU forward), so weft's product — the same
  // decoded weights times float32 activations, summed in float32 — differs only in summation
  // order: ~1e-6 of logits of size ~10 over two layers; 2e-4 leaves a margin. LLM.int8() is
  // bit-identical to bitsandbytes' (precision/quant/llm_int8.h), the rest float32 as transformers.
  const std::vector<std::pair<const char*, double>> folders{
      {"tiny_llama_nf4_bnb", 2e-4}, {"tiny_llama_fp4_bnb", 2e-4}, {"tiny_llama_int8_bnb", 2e-4}};
  for (const auto& [name, tolerance] : folders) {
    const std::string folder = name;  // a structured binding cannot be captured (clang 14)
    CAPTURE(folder);
    const io::JsonValue& g = *goldens().find(folder);
    PretrainedModel loaded = from_pretrained(data_dir() / folder);
    const std::vector<int64_t> prompt = ints(*g.find("prompt"));
    const double worst = max_logit_error(*loaded.model, prompt, *g.find("logits"));
    CAPTURE(worst);
    CHECK(worst < tolerance);
    GenerateOptions o;
    o.max_new_tokens = static_cast<int64_t>(g.find("greedy")->as_array().size());
    CHECK(models::generate(*loaded.model, {prompt}, o).tokens[0] == ints(*g.find("greedy")));
  }
}

TEST_CASE("bitsandbytes folders: bnb_4bit_compute_dtype bfloat16 / float16 computes the 4-bit products in it") {
  // The NF4 folder with only its compute dtype changed (the stored bytes do not depend on it).
  // Both sides round x and every projection's output to bfloat16 (8 bits), but where
  // bitsandbytes also rounds the decoded W, weft's few-row product keeps it exact
  // (precision/quant/gemm_4bit.h): outputs differ by a bfloat16 step (1/32 at the projections'
  // ~8) on about a third of the values, which the next layers carry on. So weft lands about as far
  // from the reference's bfloat16 logits as those lie from its float32 ones (0.1, logits up to
  // ~9; measured 0.11): 0.3 bounds it. An ignored setting (float32 compute) would match the
  // float32 golden within 1e-5; bfloat16 lies measurably away from it (measured 0.086).
  const std::string from = "\"bnb_4bit_compute_dtype\": \"float32\"";
  test::TempDir bf16_dir, f16_dir;
  PretrainedModel loaded = from_pretrained(
      edited_copy(bf16_dir, "tiny_llama_nf4_bnb", {}, from, "\"bnb_4bit_compute_dtype\": \"bfloat16\""));
  int64_t bf16_layers = 0;
  for (const auto& [name, m] : loaded.model->named_modules())
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get()))
      bf16_layers += layer->options().compute_dtype == kBFloat16;
  CHECK(bf16_layers == 2 * 7);
  const io::JsonValue& g = *goldens().find("tiny_llama_nf4_bnb");
  const std::vector<int64_t> prompt = ints(*g.find("prompt"));
  const double to_bf16 = max_logit_error(*loaded.model, prompt, *g.find("logits_bfloat16"));
  const double to_f32 = max_logit_error(*loaded.model, prompt, *g.find("logits"));
  CAPTURE(to_bf16);
  CAPTURE(to_f32);
  CHECK(to_bf16 < 0.3);
  CHECK(to_f32 > 1e-2);

  // float16 (11 bits) the same way: x and outputs rounded to float16, 8 times finer than bfloat16,
  // so about 0.086 / 8 from the float32 golden (measured 0.013): under 0.05, above float32's 1e-5.
  PretrainedModel f16 = from_pretrained(
      edited_copy(f16_dir, "tiny_llama_nf4_bnb", {}, from, "\"bnb_4bit_compute_dtype\": \"float16\""));
  for (const auto& [name, m] : f16.model->named_modules())
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get())) CHECK(layer->options().compute_dtype == kFloat16);
  const double f16_to_f32 = max_logit_error(*f16.model, prompt, *g.find("logits"));
  CAPTURE(f16_to_f32);
  CHECK(f16_to_f32 < 0.05);
  CHECK(f16_to_f32 > 1e-4);
}

TEST_CASE("bitsandbytes folders: the stored projections become weft's quantized layers, in the config's format") {
  PretrainedModel nf4 = from_pretrained(data_dir() / "tiny_llama_nf4_bnb");
  int64_t four_bit = 0;
  for (const auto& [name, m] : nf4.model->named_modules()) {
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get())) {
      ++four_bit;
      CHECK(layer->quant_state().type == precision::quant::QuantKind::NF4);
      CHECK(layer->quant_state().nested);
      CHECK(layer->options().compute_dtype == kFloat32);
    }
  }
  CHECK(four_bit == 2 * 7);  // q, k, v, o, gate, up, down per layer
  // llm_int8_skip_modules null: transformers kept lm_head float, and so does weft.
  auto& llama = dynamic_cast<LlamaForCausalLMImpl&>(*nf4.model);
  CHECK(llama.lm_head->type_name() == "Linear");
  CHECK(llama.lm_head->weight.dtype() == kFloat32);

  PretrainedModel fp4 = from_pretrained(data_dir() / "tiny_llama_fp4_bnb");
  int64_t fp4_layers = 0;
  for (const auto& [name, m] : fp4.model->named_modules()) {
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get())) {
      ++fp4_layers;
      CHECK(layer->quant_state().type == precision::quant::QuantKind::FP4);
      CHECK_FALSE(layer->quant_state().nested);
    }
  }
  CHECK(fp4_layers == 2 * 7);

  // llm_int8_skip_modules ["down_proj"]: the down projections stay float and, the list being
  // explicit, transformers quantized lm_head, which weft's head follows.
  PretrainedModel int8 = from_pretrained(data_dir() / "tiny_llama_int8_bnb");
  int64_t eight_bit = 0;
  for (const auto& [name, m] : int8.model->named_modules()) {
    if (const auto* layer = dynamic_cast<const Linear8bitLtImpl*>(m.get())) {
      ++eight_bit;
      CHECK(layer->options().threshold == 6.0);
      CHECK_FALSE(layer->options().has_fp16_weights);
    }
    if (name.ends_with("down_proj")) CHECK(m->type_name() == "Linear");
  }
  CHECK(eight_bit == 2 * 6 + 1);
  CHECK(dynamic_cast<LlamaForCausalLMImpl&>(*int8.model).lm_head->type_name() == "Linear8bitLt");

  // llm_int8_threshold comes from the config.
  test::TempDir dir;
  PretrainedModel low = from_pretrained(
      edited_copy(dir, "tiny_llama_int8_bnb", {}, "\"llm_int8_threshold\": 6.0", "\"llm_int8_threshold\": 2.5"));
  for (const auto& [name, m] : low.model->named_modules())
    if (const auto* layer = dynamic_cast<const Linear8bitLtImpl*>(m.get())) CHECK(layer->options().threshold == 2.5);
}

TEST_CASE("bitsandbytes folders: the loaded model holds the file's bytes, and saves them back unchanged") {
  for (const std::string folder : {"tiny_llama_nf4_bnb", "tiny_llama_fp4_bnb", "tiny_llama_int8_bnb"}) {
    CAPTURE(folder);
    const auto file = io::load_safetensors(data_dir() / folder / "model.safetensors");
    PretrainedModel loaded = from_pretrained(data_dir() / folder);
    const nn::TensorDict state = loaded.model->state_dict();
    REQUIRE(state.size() == file.tensors.size());
    for (const auto& [name, t] : file.tensors) {
      const std::string key = name;
      CAPTURE(key);
      const Tensor* mine = state.find(key);
      REQUIRE(mine != nullptr);
      CHECK(mine->dtype() == t.dtype());
      CHECK(mine->shape() == t.shape());
      CHECK(equal(*mine, t));  // packed codes, absmax, quant maps, the quant_state JSON, SCB
    }
  }
  // The packed codes as the layer itself reads them.
  PretrainedModel nf4 = from_pretrained(data_dir() / "tiny_llama_nf4_bnb");
  const auto file = io::load_safetensors(data_dir() / "tiny_llama_nf4_bnb" / "model.safetensors");
  for (const auto& [name, m] : nf4.model->named_modules())
    if (name == "model.layers.0.self_attn.q_proj")
      CHECK(equal(dynamic_cast<const Linear4bitImpl&>(*m).weight, file.tensors.at(kQProj)));
}

TEST_CASE("bitsandbytes folders: quantize on an already quantized folder is refused") {
  CHECK(error_of([&] { from_pretrained(data_dir() / "tiny_llama_nf4_bnb", {.quantize = "int8"}); })
            .find("has a bitsandbytes quantization_config (nf4-dq): the weights are already quantized, so quantize = "
                  "\"int8\" cannot apply; load without quantize") != std::string::npos);
}

TEST_CASE("bitsandbytes folders that disagree with their quantization_config are refused, naming the key") {
  auto refusal = [&](const char* folder, const TensorEdit& edit, const std::string& from = "", const std::string& to = "") {
    test::TempDir dir;
    return error_of([&] { from_pretrained(edited_copy(dir, folder, edit, from, to)); });
  };
  const std::string state_key = kQProj + ".quant_state.bitsandbytes__nf4";
  auto replace_blob = [&](const std::string& from, const std::string& to) -> TensorEdit {
    return [=](std::string& name, const Tensor& t) {
      if (name != state_key) return t;
      std::string json(static_cast<const char*>(t.contiguous().data_ptr()), static_cast<size_t>(t.numel()));
      const size_t at = json.find(from);
      REQUIRE(at != std::string::npos);
      return bytes_of(json.replace(at, from.size(), to));
    };
  };

  SUBCASE("config") {
    CHECK(refusal("tiny_llama_nf4_bnb", {}, "\"bnb_4bit_quant_storage\": \"uint8\"",
                  "\"bnb_4bit_quant_storage\": \"float32\"")
              .find("quantization_config.bnb_4bit_quant_storage must be uint8 (two 4-bit codes a byte), got 'float32'") !=
          std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", {}, "\"bnb_4bit_compute_dtype\": \"float32\"",
                  "\"bnb_4bit_compute_dtype\": \"float64\"")
              .find("bnb_4bit_compute_dtype must be float32, bfloat16 or float16, got 'float64'") != std::string::npos);
    CHECK(refusal("tiny_llama_int8_bnb", {}, "\"llm_int8_has_fp16_weight\": false", "\"llm_int8_has_fp16_weight\": true")
              .find("llm_int8_has_fp16_weight must be false (int8 inference weights), got true") != std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", {}, "\"load_in_8bit\": false", "\"load_in_8bit\": true")
              .find("expected exactly one of load_in_4bit and load_in_8bit to be true, got both") != std::string::npos);
  }
  SUBCASE("the stored format is not the config's") {
    CHECK(refusal("tiny_llama_nf4_bnb", {}, "\"bnb_4bit_quant_type\": \"nf4\"", "\"bnb_4bit_quant_type\": \"fp4\"")
              .find("'" + state_key + "' holds nf4 statistics, but quantization_config.bnb_4bit_quant_type is 'fp4'") !=
          std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", {}, "\"bnb_4bit_use_double_quant\": true", "\"bnb_4bit_use_double_quant\": false")
              .find("'" + state_key + "' holds double-quantized statistics (nested_*), but "
                    "quantization_config.bnb_4bit_use_double_quant is false") != std::string::npos);
    const std::string eight = refusal("tiny_llama_int8_bnb", {}, "\"load_in_4bit\": false", "\"load_in_4bit\": true");
    CHECK(eight.find("expected exactly one of load_in_4bit and load_in_8bit") != std::string::npos);
    const std::string four = refusal("tiny_llama_int8_bnb", {}, "\"load_in_8bit\": true", "\"load_in_8bit\": false");
    CHECK(four.find("neither") != std::string::npos);
    CHECK(refusal("tiny_llama_int8_bnb", {}, "\"llm_int8_skip_modules\": [\n      \"down_proj\"\n    ]",
                  "\"llm_int8_skip_modules\": [\"q_proj\"]")
              .find("'model.layers.1.self_attn.q_proj' is stored quantized, but quantization_config.llm_int8_skip_modules "
                    "names it ('q_proj'), which keeps it float") != std::string::npos);
  }
  SUBCASE("a corrupt quant_state blob") {
    CHECK(refusal("tiny_llama_nf4_bnb", replace_blob("\"blocksize\": 64", "\"blocksize\": 48"))
              .find("'" + state_key + "' [quant_state] nf4 block size must be a power of two in [") != std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", replace_blob("\"nested_blocksize\": 256", "\"nested_blocksize\": 128"))
              .find("'" + state_key + "' expected nested_blocksize 256, got 128") != std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", replace_blob("\"shape\": [32, 32]", "\"shape\": [32, 32"))
              .find("'" + state_key + "' [load_quant_state] the quant_state JSON is malformed") != std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", replace_blob("\"quant_type\": \"nf4\"", "\"quant_type\": \"fp4\""))
              .find("'" + state_key + "' holds quant_type 'fp4' under the key of nf4") != std::string::npos);
    CHECK(refusal("tiny_llama_nf4_bnb", replace_blob("\"shape\": [32, 32]", "\"shape\": [32, 64]"))
              .find("'" + state_key + "' describes a 32x64 weight, so '" + kQProj +
                    "' must be uint8 of shape (1024, 1) (two 4-bit codes a byte), got (512, 1) uint8") != std::string::npos);
    // An unknown quant type in the key.
    CHECK(refusal("tiny_llama_nf4_bnb", [&](std::string& name, const Tensor& t) {
            if (name == state_key) name = kQProj + ".quant_state.bitsandbytes__int4";
            return t;
          }).find("'" + kQProj + ".quant_state.bitsandbytes__int4' names quant type 'int4', expected nf4 or fp4") !=
          std::string::npos);
  }
  SUBCASE("wrong shapes and dtypes of the stored tensors") {
    // The packed codes in another shape (the same bytes).
    CHECK(refusal("tiny_llama_nf4_bnb", [&](std::string& name, const Tensor& t) {
            return name == kQProj ? t.reshape({256, 2}) : t;
          }).find("must be uint8 of shape (512, 1) (two 4-bit codes a byte), got (256, 2) uint8") != std::string::npos);
    // One absmax code short: the layer's own check, naming the weight.
    CHECK(refusal("tiny_llama_nf4_bnb", [&](std::string& name, const Tensor& t) {
            return name == kQProj + ".absmax" ? t.slice(0, 0, 15).contiguous() : t;
          }).find("'" + kQProj + "': [load_quant_state] expected 16 absmax values of dtype uint8, got 15 uint8") !=
          std::string::npos);
    // The code table in another dtype (bitsandbytes writes float32).
    CHECK(refusal("tiny_llama_fp4_bnb", [&](std::string& name, const Tensor& t) {
            return name == kQProj + ".quant_map" ? t.to(kFloat16) : t;
          }).find("'" + kQProj + "': [load_quant_state] quant_map is not the fp4 table bitsandbytes writes") !=
          std::string::npos);
    CHECK(refusal("tiny_llama_int8_bnb", [&](std::string& name, const Tensor& t) {
            return name == "model.layers.0.self_attn.q_proj.SCB" ? t.slice(0, 0, 31).contiguous() : t;
          }).find("'model.layers.0.self_attn.q_proj.SCB' expected 32 float32 row scales (32,) for "
                  "'model.layers.0.self_attn.q_proj.weight', got (31,) float32") != std::string::npos);
    CHECK(refusal("tiny_llama_int8_bnb", [&](std::string& name, const Tensor& t) {
            const Tensor row_major_1 = from_vector(std::vector<uint8_t>{1}, {}, DType::UInt8);
            return name == "model.layers.0.self_attn.q_proj.weight_format" ? row_major_1 : t;
          }).find("'model.layers.0.self_attn.q_proj.weight_format' must be 0 (row-major)") != std::string::npos);
    // Packed codes whose statistics are gone.
    CHECK(refusal("tiny_llama_nf4_bnb", [&](std::string& name, const Tensor& t) {
            return name.rfind(kQProj + ".", 0) == 0 ? Tensor() : t;
          }).find("'" + kQProj + "' is stored as uint8 without bitsandbytes statistics: expected '" + kQProj +
                  ".quant_state.bitsandbytes__<nf4|fp4>' or 'model.layers.0.self_attn.q_proj.SCB' beside it") !=
          std::string::npos);
  }
  SUBCASE("every problem is listed at once, before anything is built") {
    const std::string both = refusal("tiny_llama_nf4_bnb", [&](std::string& name, const Tensor& t) {
      if (name == state_key) name = kQProj + ".quant_state.bitsandbytes__int4";
      return name == "model.layers.1.mlp.up_proj.weight" ? t.reshape({1, -1}) : t;
    });
    CHECK(both.find("names quant type 'int4'") != std::string::npos);
    CHECK(both.find("'model.layers.1.mlp.up_proj.weight' must be uint8 of shape (1024, 1)") != std::string::npos);
  }
  SUBCASE("a quantization_config over float weights, or over GPT-2") {
    auto with_int8_config = [](const char* folder) {
      return error_of([&] {
        test::TempDir dir;
        const fs::path out = dir.path() / "f";
        fs::copy(data_dir() / folder, out, fs::copy_options::recursive);
        std::string config = read_text(out / "config.json");
        config.insert(config.rfind('}'), ", \"quantization_config\": {\"quant_method\": \"bitsandbytes\", "
                                        "\"load_in_8bit\": true}");
        std::ofstream(out / "config.json") << config;
        from_pretrained(out);
      });
    };
    CHECK(with_int8_config("tiny_llama").find("no tensor is an LLM.int8() row scale ('<module>.SCB'): the weights are "
                                              "not stored quantized") != std::string::npos);
    CHECK(with_int8_config("tiny_gpt2").find("bitsandbytes-quantized folders load for LlamaForCausalLM, got "
                                             "GPT2LMHeadModel") != std::string::npos);
  }
}
