// Hugging Face folders: GPT-2 and Llama checkpoints that transformers wrote
// (scripts/golden_generate.py) load into weft and give transformers' logits and greedy
// continuations; save_pretrained writes the same keys and shapes back; every malformed folder is
// refused naming the key, before a weight is copied.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../error_message.h"
#include "../temp_dir.h"
#include "models/all.h"
#include "precision/all.h"
#include "pretrained_test_helpers.h"

using namespace weft;
using namespace weft::models;
namespace fs = std::filesystem;
using namespace pretrained_test;

namespace {

const io::JsonValue& goldens() {
  static const io::JsonValue g = io::read_json_file(data_dir() / "generate_goldens.json", "test");
  return g;
}

// A copy of a test folder whose config.json has `from` replaced by `to`.
void copy_with_config_edit(const fs::path& from_dir, const fs::path& to_dir, const std::string& from, const std::string& to) {
  fs::copy(from_dir, to_dir, fs::copy_options::recursive);
  std::string config = read_text(to_dir / "config.json");
  const size_t at = config.find(from);
  REQUIRE(at != std::string::npos);
  write_text(to_dir / "config.json", config.replace(at, from.size(), to));
}

}  // namespace

TEST_CASE("transformers' GPT-2 and Llama folders give its logits and its greedy continuations") {
  for (const char* name : {"tiny_gpt2", "tiny_llama", "tiny_llama_tied"}) {
    CAPTURE(name);
    const io::JsonValue& g = *goldens().find(name);
    PretrainedModel loaded = from_pretrained(data_dir() / name);
    const std::vector<int64_t> prompt = ints(g.find("prompts")->as_array()[0]);
    NoGradGuard no_grad;
    const Tensor logits = loaded.model->forward(from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}, DType::Int64));
    const auto& rows = g.find("logits")->as_array();
    REQUIRE(logits.size(1) == static_cast<int64_t>(rows.size()));
    double worst = 0.0;
    for (size_t t = 0; t < rows.size(); ++t) {
      const auto got = logits.select(0, 0).select(0, static_cast<int64_t>(t)).to_vector<float>();
      const auto& want = rows[t].as_array();
      REQUIRE(got.size() == want.size());
      for (size_t v = 0; v < got.size(); ++v) worst = std::max(worst, std::abs(got[v] - want[v].as_number()));
    }
    CHECK(worst < 2e-4);

    GenerateOptions o;
    o.max_new_tokens = g.find("new_tokens")->as_integer();
    const auto& prompts = g.find("prompts")->as_array();
    const auto& greedy = g.find("greedy")->as_array();
    for (size_t p = 0; p < prompts.size(); ++p) {
      CAPTURE(p);
      CHECK(models::generate(*loaded.model, {ints(prompts[p])}, o).tokens[0] == ints(greedy[p]));
    }
    // All prompts at once, left-padded, give the same continuations.
    std::vector<std::vector<int64_t>> all;
    for (const auto& p : prompts) all.push_back(ints(p));
    const auto batch = models::generate(*loaded.model, all, o).tokens;
    for (size_t p = 0; p < prompts.size(); ++p) CHECK(batch[p] == ints(greedy[p]));
  }
}

TEST_CASE("save_pretrained writes the keys, shapes and config transformers wrote; the folder loads back") {
  for (const char* name : {"tiny_gpt2", "tiny_llama", "tiny_llama_tied"}) {
    CAPTURE(name);
    test::TempDir dir;
    PretrainedModel loaded = from_pretrained(data_dir() / name);
    save_pretrained(*loaded.model, loaded.config, dir.path() / "out");
    const auto original = io::load_safetensors(data_dir() / name / "model.safetensors");
    const auto saved = io::load_safetensors(dir.path() / "out" / "model.safetensors");
    CHECK(saved.metadata.at("format") == "pt");
    REQUIRE(saved.tensors.size() == original.tensors.size());
    for (const auto& [name, t] : original.tensors) {
      const std::string key = name;  // a structured binding cannot be captured (clang 14)
      CAPTURE(key);
      const Tensor* mine = saved.tensors.find(key);
      REQUIRE(mine != nullptr);
      CHECK(equal(*mine, t));
    }
    PretrainedModel again = from_pretrained(dir.path() / "out");
    const Tensor ids = from_vector(std::vector<int64_t>{3, 1, 4, 1, 5}, {1, 5}, DType::Int64);
    NoGradGuard no_grad;
    CHECK(equal(again.model->forward(ids), loaded.model->forward(ids)));
  }
}

TEST_CASE("quantize on load: every projection becomes a quantized layer computing with its dequantized weight") {
  NoGradGuard no_grad;
  const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}, DType::Int64);
  for (const char* mode : {"nf4", "nf4-dq", "fp4"}) {
    CAPTURE(mode);
    PretrainedModel q = from_pretrained(data_dir() / "tiny_llama", {.quantize = mode});
    // The same model unquantized, holding each 4-bit layer's dequantized weight: bitsandbytes'
    // 4-bit forward is exactly that product (dequantized weights times float activations).
    PretrainedModel reference = from_pretrained(data_dir() / "tiny_llama");
    const auto modules = reference.model->named_modules();
    int64_t quantized = 0;
    for (const auto& [name, m] : q.model->named_modules()) {
      const auto* layer = dynamic_cast<const precision::quant::Linear4bitImpl*>(m.get());
      if (layer == nullptr) continue;
      ++quantized;
      for (const auto& [ref_name, ref] : modules)
        if (ref_name == name) dynamic_cast<nn::LinearImpl&>(*ref).weight.detach().copy_(layer->dequantize_weight());
    }
    CHECK(quantized == 2 * 7);  // q, k, v, o, gate, up, down per layer; the head stays float
    CHECK(allclose(q.model->forward(ids), reference.model->forward(ids), 1e-4, 1e-4));
  }
  // FP8 weights (E4M3 with a scale per tensor or per output row): each layer holds the file's
  // weight quantized as Fp8WeightLinear quantizes it (scale amax / 448, not a plain cast), and the same model holding each
  // layer's dequantized weight gives the same logits.
  for (const char* mode : {"fp8", "fp8-channel"}) {
    CAPTURE(mode);
    PretrainedModel q = from_pretrained(data_dir() / "tiny_llama", {.quantize = mode});
    PretrainedModel reference = from_pretrained(data_dir() / "tiny_llama");
    const auto modules = reference.model->named_modules();
    const nn::TensorDict file = read_pretrained_weights(data_dir() / "tiny_llama", q.config);
    int64_t quantized = 0;
    for (const auto& [name, m] : q.model->named_modules()) {
      const auto* layer = dynamic_cast<const precision::Fp8WeightLinearImpl*>(m.get());
      if (layer == nullptr) continue;
      ++quantized;
      precision::Fp8WeightLinearImpl expected(layer->in_features, layer->out_features, false, layer->granularity());
      expected.quantize_weight(*file.find(name + ".weight"));
      CHECK(equal(layer->weight_scale(), expected.weight_scale()));
      CHECK(equal(layer->weight.detach().view(kUInt8), expected.weight.detach().view(kUInt8)));
      for (const auto& [ref_name, ref] : modules)
        if (ref_name == name) dynamic_cast<nn::LinearImpl&>(*ref).weight.detach().copy_(layer->dequantize_weight());
    }
    CHECK(quantized == 2 * 7);
    CHECK(allclose(q.model->forward(ids), reference.model->forward(ids), 1e-4, 1e-4));
    test::TempDir dir;
    CHECK(error_of([&] { save_pretrained(*q.model, q.config, dir.path() / "out"); })
              .find("is stored as float8_e4m3fn: save the unquantized model") != std::string::npos);
  }
  // LLM.int8() also quantizes the activations (rows absmax-scaled to int8, outlier columns kept in
  // float16): the logits stay within a few percent of the float model's.
  PretrainedModel plain = from_pretrained(data_dir() / "tiny_llama");
  PretrainedModel int8 = from_pretrained(data_dir() / "tiny_llama", {.quantize = "int8"});
  int64_t int8_layers = 0;
  for (const auto& [n, m] : int8.model->named_modules()) int8_layers += m->type_name() == "Linear8bitLt";
  CHECK(int8_layers == 2 * 7);
  const Tensor want = plain.model->forward(ids);
  const Tensor got = int8.model->forward(ids).to(kFloat32);
  CHECK(norm(sub(got, want)).item<double>() < 0.05 * norm(want).item<double>());
}

TEST_CASE("malformed folders are refused naming the key, before any weight is copied") {
  const fs::path llama = data_dir() / "tiny_llama";
  {
    test::TempDir dir;
    copy_with_config_edit(llama, dir.path() / "m", "LlamaForCausalLM", "MistralForCausalLM");
    CHECK(error_of([&] { from_pretrained(dir.path() / "m"); })
              .find("architecture 'MistralForCausalLM' is not supported (supported: GPT2LMHeadModel, LlamaForCausalLM)") !=
          std::string::npos);
  }
  {
    test::TempDir dir;
    copy_with_config_edit(llama, dir.path() / "m", "\"hidden_size\"", "\"hidden_sizes\"");
    CHECK(error_of([&] { from_pretrained(dir.path() / "m"); }).find("has no 'hidden_size', which the model needs") !=
          std::string::npos);
  }
  {
    test::TempDir dir;
    copy_with_config_edit(data_dir() / "tiny_gpt2", dir.path() / "m", "\"gelu_new\"", "\"relu\"");
    CHECK(error_of([&] { from_pretrained(dir.path() / "m"); }).find("activation_function 'relu' is not supported") !=
          std::string::npos);
  }
  {
    test::TempDir dir;
    fs::create_directories(dir.path() / "m");
    fs::copy(llama / "config.json", dir.path() / "m" / "config.json");
    CHECK(error_of([&] { from_pretrained(dir.path() / "m"); })
              .find("holds neither model.safetensors nor model.safetensors.index.json") != std::string::npos);
    write_text(dir.path() / "m" / "model.safetensors.index.json",
               "{\"weight_map\": {\"model.norm.weight\": \"../evil.safetensors\"}}");
    CHECK(error_of([&] { from_pretrained(dir.path() / "m"); }).find("names '../evil.safetensors', which is not a file") !=
          std::string::npos);
  }
  CHECK(error_of([&] { from_pretrained(llama, {.quantize = "int4"}); }).find("quantize 'int4' is not a mode") !=
        std::string::npos);
}

// Note [Sizes checked before the model is built]: a size the weights do not hold is named before
// the model allocates or builds anything, however large it is (a million layers would build for
// minutes, the 10^11-wide MLP ask for 12 TB, were they not).
TEST_CASE("config sizes the weights do not hold are refused before the model is built") {
  const fs::path llama = data_dir() / "tiny_llama";
  // The folder `source` with `from` in its config.json made `to` is refused with `expected`.
  auto refused = [](const fs::path& source, const std::string& from, const std::string& to,
                    const std::string& expected) {
    test::TempDir dir;
    copy_with_config_edit(source, dir.path() / "m", from, to);
    const std::string error = error_of([&] { from_pretrained(dir.path() / "m"); });
    INFO(source.filename().string(), ": ", to);
    CHECK_MESSAGE(error.find(expected) != std::string::npos, "error: '", error, "'");
  };
  for (const char* width : {"65", "100000000000"})
    refused(llama, "\"intermediate_size\": 64", std::string("\"intermediate_size\": ") + width,
            "its hidden_size and intermediate_size make 'model.layers.0.mlp.down_proj.weight' (32, " +
                std::string(width) + "), but the weights hold it as (32, 64)");
  for (const char* layers : {"1", "3", "1000000"})
    refused(llama, "\"num_hidden_layers\": 2", std::string("\"num_hidden_layers\": ") + layers,
            std::string("gives num_hidden_layers ") + layers +
                ", but the weights hold 2 layers ('model.layers.N.', N from 0 to 1)");
  refused(llama, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4",
          "its num_key_value_heads, head_dim and hidden_size make 'model.layers.0.self_attn.k_proj.weight' (32, 32), "
          "but the weights hold it as (16, 32)");
  refused(data_dir() / "tiny_gpt2", "\"n_positions\": 64", "\"n_positions\": 1000000000000",
          "its n_positions and n_embd make 'transformer.wpe.weight' (1000000000000, 32), but the weights hold it as "
          "(64, 32)");
  refused(data_dir() / "tiny_gpt2", "\"n_layer\": 2", "\"n_layer\": 3",
          "gives n_layer 3, but the weights hold 2 layers ('transformer.h.N.', N from 0 to 1)");
  // A bitsandbytes 4-bit folder's MLP weight is packed, two values a byte: its size is still checked.
  refused(data_dir() / "tiny_llama_nf4_bnb", "\"intermediate_size\": 64", "\"intermediate_size\": 66",
          "make 'model.layers.0.mlp.down_proj.weight' (32, 66), but the weights hold it as (1024, 1)");
}

TEST_CASE("a sharded checkpoint (model.safetensors.index.json) loads as the single file does") {
  test::TempDir dir;
  const fs::path out = dir.path() / "sharded";
  fs::create_directories(out);
  const fs::path llama = data_dir() / "tiny_llama";
  fs::copy(llama / "config.json", out / "config.json");
  const auto file = io::load_safetensors(llama / "model.safetensors");
  nn::TensorDict first, second;
  std::string map = "{\"metadata\": {}, \"weight_map\": {";
  size_t i = 0;
  for (const auto& [key, t] : file.tensors) {
    const bool one = i++ % 2 == 0;
    (one ? first : second).insert(key, t);
    map += std::string(i > 1 ? ", " : "") + "\"" + key + "\": \"" + (one ? "a.safetensors" : "b.safetensors") + "\"";
  }
  io::save_safetensors(out / "a.safetensors", first);
  io::save_safetensors(out / "b.safetensors", second);
  write_text(out / "model.safetensors.index.json", map + "}}");
  const Tensor ids = from_vector(std::vector<int64_t>{9, 8, 7}, {1, 3}, DType::Int64);
  NoGradGuard no_grad;
  CHECK(equal(from_pretrained(out).model->forward(ids), from_pretrained(llama).model->forward(ids)));
}

TEST_CASE("GPT-2's Conv1D weights: views of the file in float32, converted exactly in bfloat16 and when quantized") {
  // A 384-wide GPT-2 of one layer, its MLP weights 2.25 MiB: large enough to be read in place
  // (pretrained.cpp, Note [Small tensors are copied]), the attention's projection (576 KiB) not.
  test::TempDir dir;
  HfConfig wide = read_hf_config(data_dir() / "tiny_gpt2");
  wide.gpt.n_embd = 384;
  wide.gpt.n_layer = 1;
  save_pretrained(GPTImpl(wide.gpt), wide, dir.path());
  const io::SafetensorsFile wide_file = io::load_safetensors(dir.path() / "model.safetensors");
  PretrainedModel f32 = from_pretrained(dir.path());
  const nn::TensorDict sd32 = f32.model->state_dict();
  const Tensor& fc = *sd32.find("transformer.h.0.mlp.c_fc.weight");
  const Tensor& fc_stored = *wide_file.tensors.find("transformer.h.0.mlp.c_fc.weight");  // [in, out]
  CHECK(fc.shape() == Shape({4 * 384, 384}));
  CHECK(!fc.is_contiguous());  // read in place, transposed: no copy of the file
  CHECK(fc.t().is_contiguous());
  CHECK(equal(fc, fc_stored.t()));
  const Tensor& proj = *sd32.find("transformer.h.0.attn.c_proj.weight");
  CHECK(proj.is_contiguous());  // small: copied, [out, in]
  CHECK(equal(proj, wide_file.tensors.find("transformer.h.0.attn.c_proj.weight")->t()));

  const io::SafetensorsFile file = io::load_safetensors(data_dir() / "tiny_gpt2" / "model.safetensors");
  const Tensor& stored = *file.tensors.find("transformer.h.0.attn.c_attn.weight");  // [in, out]
  const Tensor& wte = *file.tensors.find("transformer.wte.weight");

  // bfloat16: each tensor the file's, rounded once, in a contiguous [out, in] layout; the head
  // still the embedding itself.
  PretrainedModel bf16 = from_pretrained(data_dir() / "tiny_gpt2", {.quantize = "", .dtype = kBFloat16});
  const nn::TensorDict sd16 = bf16.model->state_dict();
  for (const auto& [key, t] : sd16) {
    const std::string name = key;  // CAPTURE's lambda cannot capture a structured binding (clang 14)
    CAPTURE(name);
    CHECK(t.dtype() == kBFloat16);
    CHECK(t.is_contiguous());
  }
  CHECK(equal(*sd16.find("transformer.h.0.attn.c_attn.weight"), stored.t().to(kBFloat16)));
  CHECK(equal(*sd16.find("transformer.wte.weight"), wte.to(kBFloat16)));
  CHECK(sd16.find("lm_head.weight")->data_ptr() == sd16.find("transformer.wte.weight")->data_ptr());

  // Quantized from the transposed view: the codes a Linear holding the contiguous [out, in]
  // weight quantizes to.
  PretrainedModel nf4 = from_pretrained(data_dir() / "tiny_gpt2", {.quantize = "nf4"});
  const precision::quant::Linear4bitImpl* layer = nullptr;
  for (const auto& [name, m] : nf4.model->named_modules())
    if (name == "transformer.h.0.attn.c_attn") layer = dynamic_cast<const precision::quant::Linear4bitImpl*>(m.get());
  REQUIRE(layer != nullptr);
  nn::LinearImpl plain(stored.size(0), stored.size(1), true);
  plain.weight.detach().copy_(stored.t());
  const auto expected = precision::quant::Linear4bitImpl::from_linear(plain, layer->options());
  CHECK(equal(layer->dequantize_weight(), expected->dequantize_weight()));
}
