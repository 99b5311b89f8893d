// Which product a 4-bit layer computes (Linear4bitOptions::product, matmul_4bit, gemm_4bit).
//
//   Exact            what bitsandbytes computes: the dequantized weights (table value · block
//                    absmax, rounded to float32) times the float activations, summed in float32.
//                    The default.
//   Int8Activations  for up to kFusedMaxRows rows where the shape allows, the activations are
//                    quantized per weight block to int8 and each block's dot product is exact in
//                    int32 (gemm_4bit.h): faster, but about 1 % of Σ|x·w| off. A user asks for it
//                    by name; larger batches are exact either way.
#pragma once

namespace weft::precision::quant {

enum class Product4bit { Exact, Int8Activations };

inline const char* product_4bit_name(Product4bit product) {
  return product == Product4bit::Exact ? "exact" : "int8_activations";
}

}  // namespace weft::precision::quant
