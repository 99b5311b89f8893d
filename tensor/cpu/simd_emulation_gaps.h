// Lane-by-lane definitions of the AVX-512 intrinsics SIMDe 0.7 (Debian 12) does not provide, for
// emulation builds only (Note [ISA kernel units] in tensor/cpu/simd.h). Each follows the Intel SDM's
// description of the instruction; they are slow and need not be otherwise. Included by simd.h after
// SIMDe, in units compiled with WEFT_SIMD_EMULATE_UNIT; everything here is static.
#pragma once

#include <cstring>

namespace weft_simd_emulation {

template <class Lane, class Vec>
static inline void to_lanes(const Vec& v, Lane* lanes) { std::memcpy(lanes, &v, sizeof(Vec)); }
template <class Vec, class Lane>
static inline Vec from_lanes(const Lane* lanes) {
  Vec v;
  std::memcpy(&v, lanes, sizeof(Vec));
  return v;
}

static inline uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// vcvtneps2bf16: round to nearest even, NaN -> quiet NaN, fp32 denormals -> signed zero.
static inline uint16_t bf16_rne(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

static inline float reduce_add_ps(simde__m512 v) {
  float l[16]; to_lanes(v, l);
  // The hardware sequence halves the vector repeatedly; do the same so sums round alike.
  for (int w = 8; w >= 1; w /= 2) for (int i = 0; i < w; ++i) l[i] += l[i + w];
  return l[0];
}
static inline float reduce_max_ps(simde__m512 v) {
  float l[16]; to_lanes(v, l);
  for (int w = 8; w >= 1; w /= 2) for (int i = 0; i < w; ++i) l[i] = l[i] > l[i + w] ? l[i] : l[i + w];
  return l[0];
}
static inline int32_t reduce_add_epi32(simde__m512i v) {
  int32_t l[16]; to_lanes(v, l);
  uint32_t s = 0;
  for (int32_t x : l) s += static_cast<uint32_t>(x);
  return static_cast<int32_t>(s);
}
static inline simde__m512 maskz_loadu_ps(uint16_t k, const void* p) {
  float l[16] = {};
  for (int i = 0; i < 16; ++i) if (k >> i & 1) std::memcpy(&l[i], static_cast<const char*>(p) + 4 * i, 4);
  return from_lanes<simde__m512>(l);
}
static inline simde__m512 mask_loadu_ps(simde__m512 src, uint16_t k, const void* p) {
  float l[16]; to_lanes(src, l);
  for (int i = 0; i < 16; ++i) if (k >> i & 1) std::memcpy(&l[i], static_cast<const char*>(p) + 4 * i, 4);
  return from_lanes<simde__m512>(l);
}
static inline void mask_storeu_ps(void* p, uint16_t k, simde__m512 v) {
  float l[16]; to_lanes(v, l);
  for (int i = 0; i < 16; ++i) if (k >> i & 1) std::memcpy(static_cast<char*>(p) + 4 * i, &l[i], 4);
}
static inline simde__m512d maskz_loadu_pd(uint8_t k, const void* p) {
  double l[8] = {};
  for (int i = 0; i < 8; ++i) if (k >> i & 1) std::memcpy(&l[i], static_cast<const char*>(p) + 8 * i, 8);
  return from_lanes<simde__m512d>(l);
}
static inline void mask_storeu_pd(void* p, uint8_t k, simde__m512d v) {
  double l[8]; to_lanes(v, l);
  for (int i = 0; i < 8; ++i) if (k >> i & 1) std::memcpy(static_cast<char*>(p) + 8 * i, &l[i], 8);
}
static inline simde__m512i maskz_loadu_epi8(uint64_t k, const void* p) {
  uint8_t l[64] = {};
  for (int i = 0; i < 64; ++i) if (k >> i & 1) l[i] = static_cast<const uint8_t*>(p)[i];
  return from_lanes<simde__m512i>(l);
}
static inline simde__m512i maskz_loadu_epi16(uint32_t k, const void* p) {
  uint16_t l[32] = {};
  for (int i = 0; i < 32; ++i) if (k >> i & 1) std::memcpy(&l[i], static_cast<const char*>(p) + 2 * i, 2);
  return from_lanes<simde__m512i>(l);
}
static inline simde__m256i maskz_loadu_epi16_x16(uint16_t k, const void* p) {  // the 256-bit form (AVX-512VL)
  uint16_t l[16] = {};
  for (int i = 0; i < 16; ++i) if (k >> i & 1) std::memcpy(&l[i], static_cast<const char*>(p) + 2 * i, 2);
  return from_lanes<simde__m256i>(l);
}
static inline void mask_storeu_epi16(void* p, uint32_t k, simde__m512i v) {
  uint16_t l[32]; to_lanes(v, l);
  for (int i = 0; i < 32; ++i) if (k >> i & 1) std::memcpy(static_cast<char*>(p) + 2 * i, &l[i], 2);
}
static inline void mask_storeu_epi32(void* p, uint16_t k, simde__m512i v) {
  uint32_t l[16]; to_lanes(v, l);
  for (int i = 0; i < 16; ++i) if (k >> i & 1) std::memcpy(static_cast<char*>(p) + 4 * i, &l[i], 4);
}
static inline uint16_t cmplt_epu32_mask(simde__m512i a, simde__m512i b) {
  uint32_t x[16], y[16]; to_lanes(a, x); to_lanes(b, y);
  uint16_t k = 0;
  for (int i = 0; i < 16; ++i) k = static_cast<uint16_t>(k | (x[i] < y[i]) << i);
  return k;
}
static inline void mask_storeu_epi8(void* p, uint64_t k, simde__m512i v) {
  uint8_t l[64]; to_lanes(v, l);
  for (int i = 0; i < 64; ++i) if (k >> i & 1) static_cast<uint8_t*>(p)[i] = l[i];
}
// vcvtps2pd / vcvtpd2ps (round to nearest even) and vextractf32x8, for the optimizers' float64 path.
static inline simde__m512d cvtps_pd(simde__m256 v) {
  float a[8]; double r[8]; to_lanes(v, a);
  for (int i = 0; i < 8; ++i) r[i] = a[i];
  return from_lanes<simde__m512d>(r);
}
static inline simde__m256 cvtpd_ps(simde__m512d v) {
  double a[8]; float r[8]; to_lanes(v, a);
  for (int i = 0; i < 8; ++i) r[i] = static_cast<float>(a[i]);
  return from_lanes<simde__m256>(r);
}
static inline simde__m256 extractf32x8_ps(simde__m512 v, int half) {
  float a[16]; to_lanes(v, a);
  return from_lanes<simde__m256>(a + 8 * (half & 1));
}
static inline simde__m512 cvtepi32_ps(simde__m512i v) {
  int32_t a[16]; float r[16]; to_lanes(v, a);
  for (int i = 0; i < 16; ++i) r[i] = static_cast<float>(a[i]);
  return from_lanes<simde__m512>(r);
}
// vcvtps2dq under the default MXCSR: round to nearest even; out of range -> 0x80000000.
static inline simde__m512i cvtps_epi32(simde__m512 v) {
  float a[16]; int32_t r[16]; to_lanes(v, a);
  for (int i = 0; i < 16; ++i) {
    float x = a[i];
    if (!(x >= -2147483648.0f && x < 2147483648.0f)) { r[i] = INT32_MIN; continue; }
    float t = static_cast<float>(static_cast<int64_t>(x));  // truncated
    float diff = x - t;
    int64_t n = static_cast<int64_t>(t);
    if (diff > 0.5f || (diff == 0.5f && (n & 1))) ++n;
    if (diff < -0.5f || (diff == -0.5f && (n & 1))) --n;
    r[i] = static_cast<int32_t>(n);
  }
  return from_lanes<simde__m512i>(r);
}
template <class From, int N>
static inline simde__m512i widen_to_epi32(const void* v) {
  From a[N]; int32_t r[16];
  std::memcpy(a, v, sizeof(a));
  for (int i = 0; i < 16; ++i) r[i] = a[i];
  return from_lanes<simde__m512i>(r);
}
static inline simde__m512i cvtepu8_epi32(simde__m128i v) { return widen_to_epi32<uint8_t, 16>(&v); }
static inline simde__m512i cvtepi8_epi32(simde__m128i v) { return widen_to_epi32<int8_t, 16>(&v); }
static inline simde__m512i cvtepu16_epi32(simde__m256i v) { return widen_to_epi32<uint16_t, 16>(&v); }
static inline simde__m512i cvtepi16_epi32(simde__m256i v) { return widen_to_epi32<int16_t, 16>(&v); }
static inline simde__m512i cvtepu8_epi16(simde__m256i v) {
  uint8_t a[32]; int16_t r[32]; std::memcpy(a, &v, 32);
  for (int i = 0; i < 32; ++i) r[i] = a[i];
  return from_lanes<simde__m512i>(r);
}
// vcvtph2ps: 16 float16 -> float32, exact (subnormals widened, Inf and NaN payloads kept).
static inline simde__m512 cvtph_ps(simde__m256i v) {
  uint16_t a[16]; float r[16]; std::memcpy(a, &v, 32);
  for (int i = 0; i < 16; ++i) {
    const uint32_t sign = static_cast<uint32_t>(a[i] & 0x8000u) << 16, exp = (a[i] >> 10) & 0x1Fu, mant = a[i] & 0x3FFu;
    if (exp == 0) {
      const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant · 2^-24
      r[i] = sign ? -magnitude : magnitude;
    } else {
      r[i] = float_of(sign | (exp == 31 ? 0x7F800000u : (exp + 112) << 23) | mant << 13);
    }
  }
  return from_lanes<simde__m512>(r);
}
// Two bf16 vectors of 16 from fp32: b fills the low 16 lanes, a the high 16.
static inline simde__m512bh cvtne2ps_pbh(simde__m512 a, simde__m512 b) {
  float fa[16], fb[16]; uint16_t r[32]; to_lanes(a, fa); to_lanes(b, fb);
  for (int i = 0; i < 16; ++i) { r[i] = bf16_rne(fb[i]); r[16 + i] = bf16_rne(fa[i]); }
  return from_lanes<simde__m512bh>(r);
}
static inline simde__m256bh cvtneps_pbh(simde__m512 a) {
  float fa[16]; uint16_t r[16]; to_lanes(a, fa);
  for (int i = 0; i < 16; ++i) r[i] = bf16_rne(fa[i]);
  return from_lanes<simde__m256bh>(r);
}
// vpsrlw with a merge mask: word i is a's shifted right by imm where bit i of k is set, else src's.
static inline simde__m512i mask_srli_epi16(simde__m512i src, uint32_t k, simde__m512i a, unsigned imm) {
  uint16_t s[32], v[32]; to_lanes(src, s); to_lanes(a, v);
  for (int i = 0; i < 32; ++i)
    if (k >> i & 1) s[i] = imm > 15 ? 0 : static_cast<uint16_t>(v[i] >> imm);
  return from_lanes<simde__m512i>(s);
}
// vfpclassps: lane i's bit set when the lane is in any class imm names (0x01 quiet NaN, 0x02 +0,
// 0x04 -0, 0x08 +infinity, 0x10 -infinity, 0x20 denormal, 0x40 finite negative, 0x80 signalling NaN).
static inline uint16_t fpclass_ps_mask(simde__m512 v, int imm) {
  uint32_t a[16]; to_lanes(v, a);
  uint16_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    const uint32_t magnitude = a[i] & 0x7fffffffu;
    const bool negative = (a[i] >> 31) != 0, nan = magnitude > 0x7f800000u;
    const bool quiet = nan && (a[i] & 0x00400000u) != 0;
    const bool in = ((imm & 0x01) && quiet) || ((imm & 0x80) && nan && !quiet) ||
                    ((imm & 0x02) && a[i] == 0) || ((imm & 0x04) && a[i] == 0x80000000u) ||
                    ((imm & 0x08) && a[i] == 0x7f800000u) || ((imm & 0x10) && a[i] == 0xff800000u) ||
                    ((imm & 0x20) && magnitude != 0 && magnitude < 0x00800000u) ||
                    ((imm & 0x40) && negative && magnitude < 0x7f800000u);
    if (in) mask = static_cast<uint16_t>(mask | (1u << i));
  }
  return mask;
}
static inline simde__m512bh castsi512_pbh(simde__m512i v) { return from_lanes<simde__m512bh>(reinterpret_cast<const uint8_t*>(&v)); }


// ---- FP8 casts (precision/fp8/fp8_kernels_avx512.cpp) ----
// vpmovdb / vpmovdw: each 32-bit lane truncated to its low byte / word, in lane order.
static inline simde__m128i cvtepi32_epi8(simde__m512i v) {
  uint32_t a[16]; uint8_t r[16]; to_lanes(v, a);
  for (int i = 0; i < 16; ++i) r[i] = static_cast<uint8_t>(a[i]);
  return from_lanes<simde__m128i>(r);
}
static inline simde__m256i cvtepi32_epi16(simde__m512i v) {
  uint32_t a[16]; uint16_t r[16]; to_lanes(v, a);
  for (int i = 0; i < 16; ++i) r[i] = static_cast<uint16_t>(a[i]);
  return from_lanes<simde__m256i>(r);
}

}  // namespace weft_simd_emulation

#define _mm512_reduce_add_ps weft_simd_emulation::reduce_add_ps
#define _mm512_reduce_max_ps weft_simd_emulation::reduce_max_ps
#define _mm512_reduce_add_epi32 weft_simd_emulation::reduce_add_epi32
#define _mm512_maskz_loadu_ps weft_simd_emulation::maskz_loadu_ps
#define _mm512_mask_loadu_ps weft_simd_emulation::mask_loadu_ps
#define _mm512_mask_storeu_ps weft_simd_emulation::mask_storeu_ps
#define _mm512_maskz_loadu_pd weft_simd_emulation::maskz_loadu_pd
#define _mm512_mask_storeu_pd weft_simd_emulation::mask_storeu_pd
#undef _mm512_shuffle_f64x2  // clang's own header, which SIMDe includes, defines it as a builtin
#define _mm512_shuffle_f64x2(a, b, imm8) simde_mm512_shuffle_f64x2(a, b, imm8)
#define _mm512_maskz_loadu_epi8 weft_simd_emulation::maskz_loadu_epi8
#define _mm512_maskz_loadu_epi16 weft_simd_emulation::maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 weft_simd_emulation::maskz_loadu_epi16_x16
#define _mm512_mask_storeu_epi16 weft_simd_emulation::mask_storeu_epi16
#define _mm512_mask_storeu_epi8 weft_simd_emulation::mask_storeu_epi8
#define _mm512_mask_storeu_epi32 weft_simd_emulation::mask_storeu_epi32
#undef _mm512_cmplt_epu32_mask
#define _mm512_cmplt_epu32_mask weft_simd_emulation::cmplt_epu32_mask
#undef _mm512_cvtps_pd
#undef _mm512_cvtpd_ps
#undef _mm512_extractf32x8_ps
#define _mm512_cvtps_pd weft_simd_emulation::cvtps_pd
#define _mm512_cvtpd_ps weft_simd_emulation::cvtpd_ps
#define _mm512_extractf32x8_ps weft_simd_emulation::extractf32x8_ps
#define _mm512_cvtepi32_ps weft_simd_emulation::cvtepi32_ps
#define _mm512_cvtps_epi32 weft_simd_emulation::cvtps_epi32
#define _mm512_cvtepu8_epi32 weft_simd_emulation::cvtepu8_epi32
#define _mm512_cvtepi8_epi32 weft_simd_emulation::cvtepi8_epi32
#define _mm512_cvtepu16_epi32 weft_simd_emulation::cvtepu16_epi32
#define _mm512_cvtepi16_epi32 weft_simd_emulation::cvtepi16_epi32
#define _mm512_cvtepu8_epi16 weft_simd_emulation::cvtepu8_epi16
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps weft_simd_emulation::cvtph_ps
#define _mm512_cvtne2ps_pbh weft_simd_emulation::cvtne2ps_pbh
#define _mm512_cvtneps_pbh weft_simd_emulation::cvtneps_pbh
#define _mm512_castsi512_pbh weft_simd_emulation::castsi512_pbh
#undef _mm512_mask_srli_epi16
#define _mm512_mask_srli_epi16 weft_simd_emulation::mask_srli_epi16
#undef _mm512_fpclass_ps_mask  // clang's own header, which SIMDe includes, defines it as a builtin
#define _mm512_fpclass_ps_mask weft_simd_emulation::fpclass_ps_mask
#define _mm512_cvtepi32_epi8 weft_simd_emulation::cvtepi32_epi8
#define _mm512_cvtepi32_epi16 weft_simd_emulation::cvtepi32_epi16

// ---- Quantized kernels (precision/quant/) ----
// SIMDe 0.7's native alias for vpmaddwd takes the masked form's four arguments.
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
