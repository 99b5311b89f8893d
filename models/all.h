// The models floor in one include (and everything below it): model definitions (GPT), and, as
// they land, Hugging Face folder loading and saving, the tokenizer and generation.
#pragma once

#include "precision/all.h"
#include "models/causal_lm.h"
#include "models/generate.h"
#include "models/kv_cache.h"
#include "models/llama.h"
#include "models/rope.h"
#include "models/sampling.h"
#include "models/hf_config.h"
#include "models/pretrained.h"
