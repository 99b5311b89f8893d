// The models floor in one include (and everything below it): model definitions (GPT), and, as
// they land, Hugging Face folder loading and saving, the tokenizer and generation.
#pragma once

#include "precision/all.h"

#include "models/gpt.h"
