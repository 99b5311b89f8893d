// The precision floor in one include (and everything below it): precision inputs, plugins,
// autocast, GradScaler, the FSDP/DeepSpeed precision tables, FP8 training (casts, recipes,
// fp8_autocast, the FP8 GEMM, Fp8Linear, the transformer-engine plugin), FP8 weight-only inference
// (Fp8WeightLinear), and the quantized formats, kernels and layers with their plugin
// (bitsandbytes-compatible).
#pragma once

#include "io/all.h"

#include "precision/autocast.h"
#include "precision/bitsandbytes_precision.h"
#include "precision/context.h"
#include "precision/convert.h"
#include "precision/cross_rank.h"
#include "precision/deepspeed_precision.h"
#include "precision/fp8/fp8_autocast.h"
#include "precision/fp8/fp8_cast.h"
#include "precision/fp8/fp8_gemm.h"
#include "precision/fp8/fp8_linear.h"
#include "precision/fp8/fp8_weight_linear.h"
#include "precision/fp8/te_layer_norm.h"
#include "precision/fsdp_precision.h"
#include "precision/grad_scaler.h"
#include "precision/make_precision.h"
#include "precision/mixed_precision.h"
#include "precision/precision.h"
#include "precision/precision_input.h"
#include "precision/quant/quant.h"
#include "precision/replace_layers.h"
#include "precision/transformer_engine_precision.h"
#include "precision/true_precision.h"
#include "precision/warnings.h"
