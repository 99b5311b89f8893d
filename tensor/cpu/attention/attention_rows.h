// The row kernels of the fused CPU attention's decode path (tensor/cpu/attention/attention.cpp):
// float32 or bfloat16 attention for a few queries at a time, one query row against the keys and
// values as they lie in the KV cache, with no tile padding. A decode step has one query per head;
// the tile path (attention_tiles.h) would spread it over a block of 128 query columns (16 on an
// AMX tile), so most of its work would be padding. One set per instruction set:
// attention_rows_scalar.cpp (the reference), attention_avx2.cpp and attention_avx512.cpp (beside
// the tile kernels).
//
// Keys and values are float32 or bfloat16 rows (the bits), `ld` elements apart, unit stride within
// a row. Sums are float32; probabilities stay float32 (no bf16 rounding of P, unlike the AMX tiles).
//
// Plain declarations only: included by ISA kernel units (Note [ISA kernel units] in
// tensor/cpu/simd.h).
#pragma once

#include <cstdint>

namespace weft::detail {

struct AttentionRows {
  const char* name;
  // s[j] = scale · Σ_e q[e]·k_j[e] for keys j < rows (k_j = k + j·ldk, E values), q float32.
  void (*scores_f32)(const float* q, const float* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s);
  void (*scores_bf16)(const float* q, const uint16_t* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s);
  // The softmax numerators in place: m = max_j s[j], s[j] ← e^(s[j] − m), returns Σ_j s[j].
  // When every s[j] is −inf (nothing kept) m is −inf, every s[j] becomes 0 and the sum is 0.
  float (*exp_row)(float* s, int64_t n, float* m);
  // o[d] += Σ_j p[j]·v_j[d] for keys j < rows (v_j = v + j·ldv), d < Ev.
  void (*accumulate_f32)(const float* p, const float* v, int64_t ldv, int64_t rows, int64_t Ev, float* o);
  void (*accumulate_bf16)(const float* p, const uint16_t* v, int64_t ldv, int64_t rows, int64_t Ev, float* o);
};

extern const AttentionRows kAttentionRowsScalar;
extern const AttentionRows kAttentionRowsAvx2;
extern const AttentionRows kAttentionRowsAvx512;

}  // namespace weft::detail
