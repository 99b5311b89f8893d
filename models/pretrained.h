// Hugging Face model folders in and out: from_pretrained builds a GPT2LMHeadModel or a
// LlamaForCausalLM from config.json and model.safetensors (or a sharded
// model.safetensors.index.json), save_pretrained writes a folder that transformers'
// from_pretrained loads as the same model.
//
// Key mapping (transformers.md §2): GPT-2 files may carry the "transformer." prefix or not; their
// Conv1D weights (c_attn, c_proj, c_fc) are stored [in, out] and transposed into nn::Linear's
// [out, in]; the causal-mask buffers of older files (attn.bias, attn.masked_bias) are skipped; a
// stored lm_head.weight of a tied model must equal the token embedding. Llama keys map one to one.
// Before any weight is copied, every tensor of the model must be in the file with its shape and
// nothing else may be: one error lists every missing, unexpected or misshapen key.
//
// Quantized inference: `quantize` builds the model's projections as quantized layers (nf4, nf4-dq,
// fp4, fp4-dq through Linear4bit; int8 through LLM.int8()'s Linear8bitLt; fp8 and fp8-channel
// through Fp8WeightLinear: E4M3 weights with a scale per tensor or per output row), each quantized
// from the file's weights as it loads, so the float weights never sit in memory whole. Embeddings, norms
// and the head stay in `dtype`. A Llama folder that transformers saved with a bitsandbytes
// quantization_config (4-bit nf4/fp4, with or without double quantization, or 8-bit LLM.int8())
// loads as it is: the projections it stores quantized become Linear4bit / Linear8bitLt holding the
// stored bytes, in the config's compute dtype and threshold, after every tensor is checked against
// the config (models/bnb_checkpoint.h); `quantize` is then an error (the weights are quantized).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "models/hf_config.h"

namespace weft::models {

struct PretrainedOptions {
  std::string quantize;     // "": as stored; "nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "fp8", "fp8-channel"
  DType dtype = kFloat32;   // float32 or bfloat16: the floating weights and the forward
};

struct PretrainedModel {
  std::shared_ptr<CausalLM> model;
  HfConfig config;
  std::optional<HfGenerationConfig> generation;
};

PretrainedModel from_pretrained(const std::filesystem::path& dir, const PretrainedOptions& options = {});

// The file's tensors under the model's own names (GPT-2: prefix, transposes and buffers handled).
nn::TensorDict read_pretrained_weights(const std::filesystem::path& dir, const HfConfig& config);

// Writes config.json, generation_config.json and model.safetensors ({"format": "pt"}) into `dir`
// (created when missing; each file replaced atomically). The model must be of the config's
// architecture and unquantized.
void save_pretrained(const CausalLM& model, const HfConfig& config, const std::filesystem::path& dir);

}  // namespace weft::models
