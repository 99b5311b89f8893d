// The one header an instruction-set kernel unit includes: the vector intrinsics, real or emulated.
//
// Note [ISA kernel units]
// A fast CPU kernel lives in a file named for its instruction set, `<name>_avx2.cpp`,
// `<name>_avx512.cpp`, `<name>_avx512vnni.cpp` or `<name>_avx512bf16.cpp`; CMake compiles each with
// that set's -m flags (cmake/WeftIsa.cmake) and nothing else in weft gets them. Those flags let the
// compiler use the instructions anywhere in the file, so the file must not emit a function the
// linker could share with the rest of the program: an inline function or template instantiated
// here (std::min, a header helper) is a weak symbol, and if the linker keeps this file's AVX-512
// copy, an AVX2-only CPU dies with SIGILL far from any kernel. Hence the rules, checked by
// scripts/check_layering.py:
//   - include only this header and kernel declaration headers (plain declarations, <cstddef>/<cstdint>);
//   - everything but the declared entry points is `static` or in an anonymous namespace;
//   - no standard library beyond <cstddef>/<cstdint>, no templates shared with other files.
// Entry points are chosen at run time from cpu_isa() (tensor/cpu/isa.h) by the caller, which sits
// in an ordinary file, beside the scalar reference kernel every fast one is tested against.
//
// With WEFT_SIMD_EMULATION (CMake option) the AVX-512 units are compiled with AVX2 flags and their
// intrinsics come from SIMDe, a portable implementation, so an AVX2-only machine runs and tests the
// AVX-512 kernels' logic (slowly, and with SIMDe's rounding where a real instruction differs, e.g.
// vdpbf16ps's denormal flushing). The few intrinsics SIMDe 0.7 lacks are defined below.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(WEFT_SIMD_EMULATE_UNIT)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include "tensor/cpu/simd_emulation_gaps.h"
#else
#include <immintrin.h>
#endif

#if defined(__AVX2__)
// The largest of eight unsigned 32-bit lanes.
static inline uint32_t hmax_epu32(__m256i v) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(h));
}

// max |x[i]| over n values (a multiple of 8), NaN if any is NaN: on the magnitudes' bits integer
// order is float order, every NaN above infinity (the quantizers' absmax_of, vectorised).
static inline float absmax_ps(const float* x, int64_t n) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; i += 8)
    m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), magnitude));
  const uint32_t most = hmax_epu32(m);
  float amax;
  __builtin_memcpy(&amax, &most, 4);
  return amax;
}

// 32 int32 lanes (a: values 0-7, b: 8-15, ...) saturated to int8, in order. The packs work within
// 128-bit lanes, leaving dwords of values 0-3, 8-11, 16-19, 24-27, 4-7, ...; the permute restores
// the order.
static inline __m256i pack_epi32_to_epi8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif

#if defined(__AVX512F__) || defined(WEFT_SIMD_EMULATE_UNIT)
// Masks of the first n lanes (n clamped to [0, lanes]), for the ragged ends of AVX-512 loops:
// 16 lanes of 32 bits, 32 of 16 bits, 64 bytes.
static inline __mmask16 lane_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}
static inline __mmask32 lane_mask32(int64_t n) {
  return n >= 32 ? ~__mmask32(0) : n <= 0 ? __mmask32(0) : (__mmask32(1) << n) - 1;
}
static inline __mmask64 lane_mask64(int64_t n) {
  return n >= 64 ? ~__mmask64(0) : n <= 0 ? __mmask64(0) : (__mmask64(1) << n) - 1;
}

// The first `count` of 32 int32 lanes (lo: 0-15, hi: 16-31) stored at c: a row of an int8 GEMM
// tile's C, masked stores whatever its width.
static inline void store_epi32_row(int32_t* c, __m512i lo, __m512i hi, int64_t count) {
  _mm512_mask_storeu_epi32(c, lane_mask(count), lo);
  _mm512_mask_storeu_epi32(c + 16, lane_mask(count - 16), hi);
}

// Sixteen rows of sixteen 32-bit words transposed in registers, for the AVX-512 units' packers
// (the int8 and float32 GEMMs'): r[c] holds row c; afterwards r[w] holds word w of every row.
//   1. unpack 32-bit pairs of rows within 128-bit lanes;  2. unpack 64-bit pairs: lane L of
//   u[4i+j] is column 4L+j of rows 4i..4i+3;  3-4. gather each column's four lanes from u[j],
//   u[4+j], u[8+j], u[12+j].
static inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 4) {
    t[i + 0] = _mm512_unpacklo_epi32(r[i + 0], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i + 0], r[i + 1]);
    t[i + 2] = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]);
    t[i + 3] = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i + 0] = _mm512_unpacklo_epi64(t[i + 0], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i + 0], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i a0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);  // lanes 0, 1 of each
    const __m512i a1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);  // lanes 2, 3
    const __m512i b0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i b1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[0 + j] = _mm512_shuffle_i32x4(a0, b0, 0x88);   // lane 0 of the four
    r[4 + j] = _mm512_shuffle_i32x4(a0, b0, 0xDD);   // lane 1
    r[8 + j] = _mm512_shuffle_i32x4(a1, b1, 0x88);   // lane 2
    r[12 + j] = _mm512_shuffle_i32x4(a1, b1, 0xDD);  // lane 3
  }
}

// 16 float32 lanes rounded to bfloat16, each left in its lane's high 16 bits (the low ones are
// garbage): to nearest even, NaN -> 0x7FC0 (the bits of float_to_bfloat16 in
// tensor/float_formats.h): u + 0x7FFF + ((u >> 16) & 1), the last term a masked add where bit 16 is
// set. A lookup that picks high words needs no narrowing (the 4-bit decoder's per-block tables).
static inline __m512i bf16_in_high_words_x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i biased = _mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF));
  const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
  const __m512i rounded = _mm512_mask_add_epi32(biased, odd, biased, _mm512_set1_epi32(1));
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC00000));
}

// bfloat16 from 16 float32 lanes, rounded as above (the conversion kernels).
static inline __m256i float_to_bf16_x16(__m512 x) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_in_high_words_x16(x), 16));
}

// bfloat16 from 32 float32 lanes (lo: values 0-15, hi: 16-31), rounded as above, in order: one
// two-source word permute picks every lane's high word. The bf16 GEMM's stores of rows that hold a
// NaN or a denormal (the others take vcvtne2ps2bf16, which rounds them the same), so a product
// rounds as a copy would.
static inline __m512i float_to_bf16_x32(__m512 lo, __m512 hi) {
  alignas(64) static const uint16_t kHighWords[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                      23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                      45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(bf16_in_high_words_x16(lo), _mm512_load_si512(kHighWords),
                                   bf16_in_high_words_x16(hi));
}

#if defined(__AVX512BF16__) || defined(WEFT_SIMD_EMULATE_UNIT)
// The same roundings in AVX-512 BF16 units, by the instruction where it gives the same bits. The
// instruction (vcvtne2ps2bf16, vcvtneps2bf16) rounds to nearest even in one step but flushes
// denormals to zero and keeps a NaN's sign and payload, where float_to_bfloat16 keeps denormals
// and makes every NaN 0x7FC0; so it converts only vectors with neither, which one vfpclassps each
// finds (the others take the integer rounding above).
static inline bool has_nan_or_denormal(__m512 x) {
  constexpr int kNanOrDenormal = 0x01 | 0x20 | 0x80;  // vfpclassps: quiet NaN, denormal, signalling NaN
  return _mm512_fpclass_ps_mask(x, kNanOrDenormal) != 0;
}

// 32 lanes (lo: values 0-15, hi: 16-31) in order.
static inline __m512i float_to_bf16_x32_vcvt(__m512 lo, __m512 hi) {
  if (has_nan_or_denormal(lo) || has_nan_or_denormal(hi)) return float_to_bf16_x32(lo, hi);
  const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);  // lo's values in the low half
  __m512i bits;
  __builtin_memcpy(&bits, &both, sizeof(bits));
  return bits;
}

// 16 lanes.
static inline __m256i float_to_bf16_x16_vcvt(__m512 x) {
  if (has_nan_or_denormal(x)) return float_to_bf16_x16(x);
  const __m256bh half = _mm512_cvtneps_pbh(x);
  __m256i bits;
  __builtin_memcpy(&bits, &half, sizeof(bits));
  return bits;
}
#endif

// float32 from 16 bfloat16 values: the bits shifted up by 16.
static inline __m512 bf16_to_float_x16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// exp_neg_reduced (tensor/elementwise_math.h) over 16 lanes, operation for operation, for the
// arithmetic tanh and sigmoid kernels that must give its bits: exp(−r) returned, the power k
// (exp(−y) = exp(−r)·2^−k) in *k.
static inline __m512 exp_neg_reduced_x16(__m512 y, __m512i* k_out) {
  // k = (int)(y·log2 e + ½), truncated. The value is positive, so truncation is the floor: round
  // to nearest, then step down where that went above. (SIMDe, which the sanitizer build runs these
  // units through, has no truncating conversion, and its roundscale toward zero rounded some
  // values to nearest.)
  const __m512 k_real = _mm512_add_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504f)), _mm512_set1_ps(0.5f));
  const __m512i nearest = _mm512_cvtps_epi32(k_real);
  const __mmask16 above = _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(nearest), k_real, _CMP_GT_OQ);
  const __m512i k = _mm512_mask_sub_epi32(nearest, above, nearest, _mm512_set1_epi32(1));
  const __m512 kf = _mm512_cvtepi32_ps(k);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(y, _mm512_mul_ps(kf, _mm512_set1_ps(0.693145752f))),
                                 _mm512_mul_ps(kf, _mm512_set1_ps(1.42860677e-6f)));
  const __m512 m = _mm512_sub_ps(_mm512_setzero_ps(), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_add_ps(_mm512_set1_ps(1.0f / 720), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f / 120), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f / 24), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f / 6), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(m, p));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(m, p));
  *k_out = k;
  return p;
}

// 16 lanes (fewer under `mask`) at element i of float32 or bfloat16 storage, as float32, and back
// (rounded as above): the fused activation kernels' and the transposing copy's operands. Whole
// bfloat16 vectors take plain 256-bit moves (512-bit word operations with the upper half masked
// ran the bf16 tanh GELU at a quarter of its float32 speed); a ragged end the 32-lane masked word
// loads and stores (the mask's 16 bits widened), which SIMDe has.
static inline __m512 load_float_or_bf16_x16(const void* base, int64_t i, __mmask16 mask, bool bf16) {
  if (bf16) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + i;
    if (mask == 0xFFFF) return bf16_to_float_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return bf16_to_float_x16(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16(mask, p)));
  }
  return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(base) + i);
}

static inline void store_float_or_bf16_x16(void* base, int64_t i, __mmask16 mask, bool bf16, __m512 v) {
  if (bf16) {
    uint16_t* p = static_cast<uint16_t*>(base) + i;
    if (mask == 0xFFFF) return _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), float_to_bf16_x16(v));
    return _mm512_mask_storeu_epi16(p, mask, _mm512_castsi256_si512(float_to_bf16_x16(v)));
  }
  _mm512_mask_storeu_ps(static_cast<float*>(base) + i, mask, v);
}

// The 64 bytes `table` gives the 4-bit codes of 32 packed bytes, for the 4-bit kernels: the
// high nibbles' (the even values) in the low half, then the low nibbles' (the odd values). The
// bytes are loaded into both halves and only the low half's words shifted, which saves the insert
// of two 256-bit halves (4096² GEMV, one core: 0.205 -> 0.198 ms).
static inline __m512i nibbles_looked_up(const uint8_t* bytes32, __m512i table) {
  const __m512i both = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes32)));
  const __m512i shifted = _mm512_mask_srli_epi16(both, 0x0000FFFF, both, 4);
  return _mm512_shuffle_epi8(table, _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F)));
}

// Four vectors of int32 partial sums folded into one whose every 128-bit lane is (a, b, c, d),
// each a partial sum: the four lanes together sum to the four vectors' totals. The 4-bit kernels
// fold four blocks' dot products this way to convert and scale them at once.
static inline __m512i fold4_epi32(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));  // a b a b
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));  // c d c d
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

// e^x over sixteen float32 lanes, for the fused attention's softmax and the cross-entropy rows:
// Cephes' expf, x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two so r is exact), e^r from a
// degree-6 polynomial, 2^n applied with vscalefps; within 2 ulp of std::exp. Arguments below −87
// give 0 (e^−87 ≈ 1.6e-38: a weight that small against a row's largest, which is 1, is nothing),
// so −inf gives 0; NaN stays NaN.
static inline __m512 exp_x16(__m512 x) {
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(y, n), underflow, _mm512_setzero_ps());
}

#endif
