// Folders that transformers saved after quantizing a model with bitsandbytes (a
// quantization_config in config.json): which projections the file stores quantized, the checks
// that the file agrees with its config, and the swap of those projections for weft's own layers.
//
// The file decides which Linears are quantized — transformers already applied
// llm_int8_skip_modules (and its default of keeping lm_head float) when it saved — and the
// config decides how: a projection whose weight comes with "<name>.weight.quant_state.
// bitsandbytes__nf4|fp4" becomes a Linear4bit computing in bnb_4bit_compute_dtype; one with
// "<name>.SCB" a Linear8bitLt (int8 inference) with llm_int8_threshold. The layers then take the
// stored bytes as they are through their own load hooks (precision/quant/linear_4bit.h,
// linear_8bit.h): no dequantize and requantize round trip.
//
// check_bnb_weights looks at every tensor before anything is built and throws one weft::Error
// listing every problem, each naming the key, what was expected and what was got: statistics of
// the other bit width or quant type than the config says, double quantization other than
// bnb_4bit_use_double_quant, a quant_state blob that does not parse or names an unknown quant
// type or block size, packed codes of the wrong dtype or shape (transformers stores them
// (out · in / 2, 1) uint8), an int8 or uint8 weight without its statistics, a module that
// llm_int8_skip_modules names stored quantized, and a folder with no quantized weight at all.
#pragma once

#include "models/hf_config.h"
#include "nn/module.h"
#include "nn/tensor_dict.h"

namespace weft::models {

// `file` is the folder's tensors under their stored names; `config_file` names config.json.
void check_bnb_weights(const nn::TensorDict& file, const HfQuantization& quantization, const std::string& config_file);

// Replaces every Linear of `model` whose weight `file` stores quantized by the matching quantized
// layer (built in `dtype`, without drawing weights).
void use_bnb_layers(nn::Module& model, const nn::TensorDict& file, const HfQuantization& quantization, DType dtype);

}  // namespace weft::models
