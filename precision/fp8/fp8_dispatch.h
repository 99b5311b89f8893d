// The FP8 kernel set for the active instruction set (tensor/cpu/isa.h): AVX-512 units from
// level avx512 up (the FP8 kernels need no VNNI or BF16), AVX2, or the scalar reference.
// Asked per call, so a CpuIsaGuard (tests, benchmarks) takes effect at once.
#pragma once

#include "precision/fp8/fp8_kernels.h"

namespace weft::detail {

struct Fp8KernelTable {
  float (*encode)(const Fp8EncodeArgs&);
  void (*decode)(const Fp8DecodeArgs&);
  float (*amax)(const void* src, bool src_bf16, int64_t n);
  void (*epilogue)(const Fp8EpilogueArgs&);
};

const Fp8KernelTable& fp8_kernels();

}  // namespace weft::detail
