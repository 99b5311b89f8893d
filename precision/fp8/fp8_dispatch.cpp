// The FP8 kernel set for the active instruction set (precision/fp8/fp8_dispatch.h).
#include "precision/fp8/fp8_dispatch.h"

#include "tensor/cpu/isa.h"

namespace weft::detail {

const Fp8KernelTable& fp8_kernels() {
  static constexpr Fp8KernelTable kScalar{fp8_encode_scalar, fp8_decode_scalar, fp8_amax_scalar, fp8_epilogue_scalar};
  static constexpr Fp8KernelTable kAvx2{fp8_encode_avx2, fp8_decode_avx2, fp8_amax_avx2, fp8_epilogue_avx2};
  static constexpr Fp8KernelTable kAvx512{fp8_encode_avx512, fp8_decode_avx512, fp8_amax_avx512, fp8_epilogue_avx512};
  const CpuIsa isa = cpu_isa();
  if (isa >= CpuIsa::Avx512) return kAvx512;
  if (isa == CpuIsa::Avx2) return kAvx2;
  return kScalar;
}

}  // namespace weft::detail
