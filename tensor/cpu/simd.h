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
