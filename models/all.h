// The models floor in one include (and everything below it): model definitions (GPT, Llama), the
// KV cache and generation, Hugging Face folders in and out, and the tokenizer.
#pragma once

#include "precision/all.h"

#include "models/causal_lm.h"
#include "models/generate.h"
#include "models/gpt.h"
#include "models/hf_config.h"
#include "models/kv_cache.h"
#include "models/llama.h"
#include "models/pretrained.h"
#include "models/rope.h"
#include "models/sampling.h"
#include "models/text_stream.h"
#include "models/tokenizer.h"
