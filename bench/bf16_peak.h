// The peak a bfloat16 product is measured against, by the instruction set weft's bf16 kernel is
// chosen for (tensor/cpu/gemm/gemm.cpp): AMX's tdpbf16ps does 16·16·32 multiply-adds per 16 cycles
// per core, 1024 FLOP/cycle (Intel's figure, at the measured clock, not measured itself); AVX-512
// BF16's vdpbf16ps two products per float32 lane, at the rate weft measured against FMAs
// (cpu_bf16_dot_speedup: ~2 on Zen 4, ~0.5 on Sapphire Rapids, Note [Where BF16 dot products pay]
// in tensor/cpu/isa.h) times the FMA peak; below it bf16 is widened to float32: the FMA peak.
// Shared by bench_matmul and bench_gpt.
#pragma once

#include <cstdio>
#include <string>

#include "fma_peak.h"
#include "weft.h"

namespace bench {

struct Bf16Peak {
  double gflops;
  std::string how;
};

inline Bf16Peak bf16_peak(const FmaPeak& fma, int threads) {
  const weft::CpuIsa isa = weft::cpu_isa();
  if (isa == weft::CpuIsa::Amx) {
    char how[160];
    std::snprintf(how, sizeof(how), "AMX: 1024 FLOP/cycle/core (Intel's figure) x %.2f GHz x %d threads", fma.ghz,
                  threads);
    return {1024.0 * fma.ghz * threads, how};
  }
  if (isa == weft::CpuIsa::Avx512Bf16) {
    const double speedup = weft::cpu_bf16_dot_speedup();
    char how[96];
    std::snprintf(how, sizeof(how), "vdpbf16ps: %.2f x the FMA peak (measured)", speedup);
    return {speedup * fma.gflops(), how};
  }
  return {fma.gflops(), "bf16 widened to fp32: the FMA peak"};
}

}  // namespace bench
