// Quantized formats, kernels and layers (bitsandbytes-compatible), in one include.
#pragma once

#include "precision/quant/blockwise.h"
#include "precision/quant/codebooks.h"
#include "precision/quant/gemm_4bit.h"
#include "precision/quant/int8_gemm.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "precision/quant/llm_int8.h"
#include "precision/quant/lora.h"
#include "precision/quant/quant_format.h"
#include "precision/quant/quant_kernels.h"
#include "precision/quant/quant_state.h"
