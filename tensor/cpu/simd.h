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

#if defined(__AVX512F__) || defined(WEFT_SIMD_EMULATE_UNIT)
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

// Four vectors of int32 partial sums folded into one whose every 128-bit lane is (a, b, c, d),
// each a partial sum: the four lanes together sum to the four vectors' totals. The 4-bit kernels
// fold four blocks' dot products this way to convert and scale them at once.
static inline __m512i fold4_epi32(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));  // a b a b
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));  // c d c d
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}
#endif
