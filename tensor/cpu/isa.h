// Which vector instruction set the CPU kernels run with, chosen at run time.
//
// One binary must be fast on every x86-64 CPU it meets (an AVX2-only EPYC, an AVX-512 Xeon, a Zen 5
// with VNNI and BF16), so kernels are compiled once per instruction set and picked here, never by
// -march=native. The levels are ordered; every CPU that has a level has all the levels below it:
//
//   Scalar      portable C++, the reference every fast kernel is tested against
//   Avx2        AVX2 + FMA + F16C (Haswell, Zen 1-3)
//   Avx512      AVX-512 F/BW/VL/DQ (Skylake-SP)
//   Avx512Vnni  + VNNI int8 dot products (Cascade Lake, Ice Lake)
//   Avx512Bf16  + BF16 dot products (Cooper Lake, Sapphire Rapids, Zen 4/5)
//   Amx         + AMX tiles with int8 and bf16 dot products (Sapphire Rapids and later Xeons)
//
// AMX needs more than CPUID: the OS must save the tile state (XCR0 bits 17-18), and Linux hands
// it only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM); detection asks once, and a
// refusal leaves the level at Avx512Bf16.
// The supported level is read once from CPUID and XGETBV (the OS must save the zmm state). The
// active level starts at the default one (the supported level, one lower where BF16 dot products
// do not pay: Note [Where BF16 dot products pay]), or where the environment variable WEFT_CPU_ISA
// names another (scalar, avx2, avx512, avx512_vnni, avx512_bf16, amx), and set_cpu_isa() moves it
// for tests and users. Neither may go above what the CPU supports: that would be a SIGILL, so it
// is an error instead.
//
// Note [Where BF16 dot products pay]
// vdpbf16ps does two multiply-adds per float32 lane, so it promises twice the rate of vfmadd231ps,
// and bfloat16 products at the Avx512Bf16 level run on it (gemm_bf16_avx512bf16.cpp, the bf16
// GEMV); below that level they are widened to float32 as they are packed (a shift) and run on the
// float32 FMA tiles. On Zen 4 and 5 it delivers (the pairs kernel ran 1024³ at 957 GFLOP/s on a
// Zen 5, 87 % of twice the FMA peak). Sapphire and Emerald Rapids issue one zmm vdpbf16ps per ~2.1
// cycles against two FMAs per cycle: half the FMA rate. Those Xeons normally run bfloat16 on AMX,
// but a VM may hide AMX (or Linux refuse this process its tile state), and then the pairs kernel
// ran bfloat16 products at ~0.6x the widened path's speed (a 2-core Emerald Rapids VM:
// bench_matmul's squares 163-169 against 280-297 GFLOP/s, GPT-2's bf16-mixed training step 1,377
// against 856 ms). So where the supported level is Avx512Bf16 the default is Avx512Vnni unless
// vdpbf16ps does at least 4/3 the multiply-adds per second of FMAs.
// That is measured, not looked up by model (a VM names its CPU "Intel Xeon Processor"): twelve
// chains of each instruction, timed once at first use, the best of five rounds (~0.1 ms). The two
// kinds of CPU sit 2x either side of the threshold, far outside timing noise. Emulated builds
// (WEFT_SIMD_EMULATION) skip the measurement and start at the supported level, so that the
// default runs there still cover the pairs kernel.
//
// In a build with WEFT_SIMD_EMULATION the AVX-512 kernel units are compiled through SIMDe onto
// AVX2, so every AVX-512 level is "supported": that is how an AVX2-only machine tests the AVX-512
// paths' logic (see Note [ISA kernel units] in tensor/cpu/simd.h). AMX has no emulation: its
// level is supported only where the CPU has it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace weft {

enum class CpuIsa : uint8_t { Scalar, Avx2, Avx512, Avx512Vnni, Avx512Bf16, Amx };

// What CPUID and XGETBV report, feature by feature (all false off x86-64).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;  // and the OS lets this process use them
};

const CpuFeatures& cpu_features();

std::string_view cpu_isa_name(CpuIsa isa);  // "scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"
// Parses the names above; throws weft::Error listing them otherwise.
CpuIsa cpu_isa_from_name(std::string_view name);

// The highest level this CPU and OS can run (every AVX-512 level in an emulation build).
CpuIsa cpu_isa_supported();
// Every level from Scalar up to cpu_isa_supported(): what a test runs each kernel at.
std::vector<CpuIsa> cpu_isas_supported();
bool cpu_isa_emulated();

// vdpbf16ps's multiply-adds per second over vfmadd231ps's on zmm registers, measured once (Note
// [Where BF16 dot products pay]); 0 where the CPU lacks AVX-512 BF16 or it is emulated.
double cpu_bf16_dot_speedup();
// The level kernels start at when WEFT_CPU_ISA is unset: cpu_isa_supported(), or Avx512Vnni where
// that is Avx512Bf16 and cpu_bf16_dot_speedup() is below 4/3.
CpuIsa cpu_isa_default();

// The level kernels use now. Throws on first use if WEFT_CPU_ISA is malformed or above what is supported.
CpuIsa cpu_isa();
// Throws weft::Error, naming the supported level, when isa is above it. Process-wide.
void set_cpu_isa(CpuIsa isa);

// Sets a level for a scope and restores the previous one (tests, benchmarks).
class CpuIsaGuard {
 public:
  explicit CpuIsaGuard(CpuIsa isa) : previous_(cpu_isa()) { set_cpu_isa(isa); }
  ~CpuIsaGuard() { set_cpu_isa(previous_); }
  CpuIsaGuard(const CpuIsaGuard&) = delete;
  CpuIsaGuard& operator=(const CpuIsaGuard&) = delete;

 private:
  CpuIsa previous_;
};

}  // namespace weft
