// make_precision: the plugin a precision input selects on a single-device accelerator, as
// Lightning's connector does (reference §1.3): 32-true → Precision, 64-true → DoublePrecision,
// 16-true / bf16-true → HalfPrecision, 16-mixed / bf16-mixed → MixedPrecision on the accelerator,
// transformer-engine / transformer-engine-float16 → TransformerEnginePrecision with bfloat16 /
// float16 weights and the default recipe.
//
// The input is normalised first (aliases warn, invalid values fail, precision/precision_input.h);
// on the cpu "16-mixed" becomes "bf16-mixed" with the reference's warning, so no fp16 scaler is
// ever built there.
#pragma once

#include <memory>
#include <string>

#include "precision/precision.h"
#include "precision/precision_input.h"

namespace weft::precision {

// accelerator: "cpu" or "cuda".
std::unique_ptr<Precision> make_precision(const PrecisionInput& precision, const std::string& accelerator = "cpu");

}  // namespace weft::precision
