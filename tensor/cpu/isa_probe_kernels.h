// The loops isa.cpp times to learn whether this CPU's BF16 dot products outpace its float32 FMAs
// (Note [Where BF16 dot products pay] in tensor/cpu/isa.h). Each runs twelve independent chains
// of `steps` instructions, enough to keep every unit busy at any latency seen so far, and returns
// their sum so that the work cannot be dropped. Callable only where cpu_isa_supported() is at
// least CpuIsa::Avx512Bf16.
#pragma once

#include <cstdint>

namespace weft::detail {

float bf16_dot_chains_avx512bf16(int64_t steps);  // vdpbf16ps zmm
float fma_chains_avx512bf16(int64_t steps);       // vfmadd231ps zmm, the same count

}  // namespace weft::detail
