// The instruction-set levels a sweep of GEMM products needs: each supported level whose kernel set
// for a dtype (cpu_gemm_kernel) differs from the one below it. Levels that share a kernel set run
// the same code (every AVX-512 level takes the same float32 kernels), and the sanitizer build
// emulates each AVX-512 level at -O0, where one sweep costs minutes.
#pragma once

#include <string>
#include <vector>

#include "tensor/all.h"

inline std::vector<weft::CpuIsa> levels_with_own_gemm_kernels(weft::DType dtype) {
  std::vector<weft::CpuIsa> levels;
  std::string below;
  for (const weft::CpuIsa isa : weft::cpu_isas_supported()) {
    weft::CpuIsaGuard guard(isa);
    std::string kernels = weft::cpu_gemm_kernel(dtype);
    if (kernels != below) levels.push_back(isa);
    below = std::move(kernels);
  }
  return levels;
}
